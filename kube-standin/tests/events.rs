//! Events written by clients: kube-rs's `Recorder` (events.k8s.io/v1,
//! create then merge-patch) and a plain core/v1 `Api<Event>::create`.

mod common;

use common::cluster;
use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference, Service};
use kube::Resource;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube_standin::fixtures;
use serde_json::{Value, json};

fn advertised() -> Event {
    Event {
        type_: EventType::Normal,
        reason: "Advertised".into(),
        note: Some("198.51.100.7/32 advertised to 2 peers".into()),
        action: "Advertise".into(),
        secondary: None,
    }
}

#[tokio::test]
async fn recorder_events_are_recorded_and_their_series_patched() {
    let c = cluster().await;
    let svc = c
        .standin
        .create(&fixtures::load_balancer_service(
            "default",
            "web",
            &["198.51.100.7"],
        ))
        .expect("service");
    let recorder = Recorder::new(
        c.client.clone(),
        Reporter {
            controller: "holdfast".into(),
            instance: Some("node-1".into()),
        },
    );
    let reference = svc.object_ref(&());
    recorder
        .publish(&advertised(), &reference)
        .await
        .expect("first publish");

    let events = c.standin.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    let ev = &events[0];
    assert_eq!(ev["apiVersion"], "events.k8s.io/v1");
    assert_eq!(ev["metadata"]["namespace"], "default");
    assert_eq!(ev["reportingController"], "holdfast");
    assert_eq!(ev["reportingInstance"], "node-1");
    assert_eq!(ev["reason"], "Advertised");
    assert_eq!(ev["action"], "Advertise");
    assert_eq!(ev["type"], "Normal");
    assert_eq!(ev["regarding"]["kind"], "Service");
    assert_eq!(ev["regarding"]["name"], "web");
    assert_eq!(ev["note"], "198.51.100.7/32 advertised to 2 peers");
    assert!(ev["metadata"]["resourceVersion"].is_string());

    // The same event again is a merge patch that starts a series.
    recorder
        .publish(&advertised(), &reference)
        .await
        .expect("second publish");
    recorder
        .publish(&advertised(), &reference)
        .await
        .expect("third publish");
    let events = c.standin.events();
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["series"]["count"], 3);

    let writes: Vec<(String, String)> = c
        .standin
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/events"))
        .map(|r| (r.method, r.path))
        .collect();
    let name = events[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let collection = "/apis/events.k8s.io/v1/namespaces/default/events".to_string();
    assert_eq!(
        writes,
        [
            ("POST".to_string(), collection.clone()),
            ("PATCH".to_string(), format!("{collection}/{name}")),
            ("PATCH".to_string(), format!("{collection}/{name}")),
        ]
    );
}

#[tokio::test]
async fn events_about_a_node_land_in_default() {
    let c = cluster().await;
    let node = c
        .standin
        .create(&fixtures::node("node-1", "192.0.2.11", &[]))
        .expect("node");
    let recorder = Recorder::new(c.client.clone(), "holdfast".into());
    let warning = Event {
        type_: EventType::Warning,
        reason: "PeerDown".into(),
        note: Some("peer 192.0.2.1: hold timer expired".into()),
        action: "Session".into(),
        secondary: None,
    };
    recorder
        .publish(&warning, &node.object_ref(&()))
        .await
        .expect("publish");
    let events = c.standin.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["metadata"]["namespace"], "default");
    assert_eq!(events[0]["regarding"]["kind"], "Node");
    assert_eq!(events[0]["type"], "Warning");
}

#[tokio::test]
async fn core_v1_events_are_recorded_too() {
    let c = cluster().await;
    let api: Api<CoreEvent> = Api::namespaced(c.client.clone(), "kube-system");
    let ev = CoreEvent {
        metadata: kube::api::ObjectMeta {
            generate_name: Some("holdfast-".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Service".into()),
            namespace: Some("kube-system".into()),
            name: Some("dns".into()),
            ..Default::default()
        },
        reason: Some("Withdrawn".into()),
        message: Some("hold-down expired".into()),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    let created = api
        .create(&PostParams::default(), &ev)
        .await
        .expect("create");
    let name = created.metadata.name.clone().expect("generated name");
    assert!(
        name.starts_with("holdfast-") && name.len() == "holdfast-".len() + 5,
        "{name}"
    );
    let events = c.standin.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["apiVersion"], "v1");
    assert_eq!(events[0]["reason"], "Withdrawn");
    assert_eq!(events[0]["metadata"]["name"], Value::String(name));
}

#[tokio::test]
async fn invalid_events_are_refused_like_the_api_server_does() {
    let c = cluster().await;
    let api: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(c.client.clone(), "default");
    let incomplete: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1"},
        "reason": "Advertised", "type": "Normal"
    }))
    .expect("event");
    match api.create(&PostParams::default(), &incomplete).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.contains("reportingController"),
                "{}",
                status.message
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }
    assert!(c.standin.events().is_empty());
    // Other kinds of write go through the same API.
    let svcs: Api<Service> = Api::namespaced(c.client.clone(), "default");
    let made = svcs
        .create(
            &PostParams::default(),
            &fixtures::load_balancer_service("default", "web", &[]),
        )
        .await
        .expect("create service");
    assert_eq!(c.standin.get::<Service>(Some("default"), "web"), Some(made));
}
