//! kube-rs's own `watcher`, `reflector` and `watch_object`, unmodified,
//! against the stand-in: lists, pagination, events, bookmarks, selectors.

mod common;

use common::{cluster, drain, lists, wait_for, watches};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event, watch_object, watcher};
use kube::runtime::{WatchStreamExt, reflector};
use kube_standin::fixtures::{self, SliceEndpoint};
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

fn names<K: ResourceExt>(objs: impl IntoIterator<Item = std::sync::Arc<K>>) -> BTreeSet<String> {
    objs.into_iter().map(|o| o.name_any()).collect()
}

#[tokio::test]
async fn initial_list_is_paginated_and_complete() {
    let c = cluster().await;
    for i in 0..7 {
        let ns = if i % 2 == 0 { "a" } else { "b" };
        c.standin
            .create(&fixtures::load_balancer_service(
                ns,
                &format!("svc-{i}"),
                &[],
            ))
            .expect("create");
    }
    let (reader, writer) = reflector::store::<Service>();
    let api: Api<Service> = Api::all(c.client.clone());
    let _run = drain(reflector(
        writer,
        watcher(api, watcher::Config::default().page_size(3)),
    ));
    reader
        .wait_until_ready()
        .await
        .expect("store becomes ready");
    assert_eq!(reader.state().len(), 7);
    wait_for("the watch after the list", || {
        !watches(&c.standin.requests()).is_empty()
    })
    .await;

    let requests = c.standin.requests();
    let pages = lists(&requests, "/api/v1/services");
    assert_eq!(pages.len(), 3, "7 objects in pages of 3: {pages:#?}");
    assert!(
        pages
            .iter()
            .all(|r| r.param("limit").as_deref() == Some("3"))
    );
    assert_eq!(pages[0].param("continue"), None);
    assert!(pages[1].param("continue").is_some() && pages[2].param("continue").is_some());
    // The watch starts at the list's resourceVersion.
    let watch = watches(&requests)[0].clone();
    assert_eq!(watch.path, "/api/v1/services");
    assert_eq!(
        watch.param("resourceVersion"),
        Some(c.standin.resource_version().to_string())
    );

    // A namespaced Api lists one namespace only.
    let in_a: Api<Service> = Api::namespaced(c.client.clone(), "a");
    let list = in_a.list(&ListParams::default()).await.expect("list a");
    let got: BTreeSet<String> = list.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(
        got,
        BTreeSet::from(["svc-0", "svc-2", "svc-4", "svc-6"].map(String::from))
    );
}

#[tokio::test]
async fn paginated_list_is_a_consistent_snapshot() {
    let c = cluster().await;
    for i in 0..4 {
        c.standin
            .create(&fixtures::load_balancer_service(
                "default",
                &format!("s{i}"),
                &[],
            ))
            .expect("create");
    }
    let api: Api<Service> = Api::namespaced(c.client.clone(), "default");
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    let token = first.metadata.continue_.clone().expect("more pages");
    let snapshot_rv = first.metadata.resource_version.clone();
    assert_eq!(first.metadata.remaining_item_count, Some(2));
    // Changes between pages do not show in later pages.
    c.standin
        .delete::<Service>(Some("default"), "s3")
        .expect("delete");
    c.standin
        .create(&fixtures::load_balancer_service("default", "s9", &[]))
        .expect("create");
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .expect("page 2");
    assert_eq!(second.metadata.resource_version, snapshot_rv);
    assert_eq!(second.metadata.continue_, None);
    let got: Vec<String> = first
        .items
        .iter()
        .chain(&second.items)
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(got, ["s0", "s1", "s2", "s3"]);
}

#[tokio::test]
async fn added_modified_deleted_arrive() {
    let c = cluster().await;
    let api: Api<Service> = Api::all(c.client.clone());
    let mut events = drain(watcher(api, watcher::Config::default()));
    let _init = events
        .until("InitDone", |e| matches!(e, Ok(Event::InitDone)))
        .await;

    c.standin
        .create(&fixtures::load_balancer_service("default", "web", &[]))
        .expect("create");
    let (created, _) = events
        .until("Apply(web)", |e| matches!(e, Ok(Event::Apply(_))))
        .await;
    let Ok(Event::Apply(created)) = created else {
        unreachable!()
    };
    assert_eq!(created.name_any(), "web");

    c.standin
        .patch_status::<Service>(
            Some("default"),
            "web",
            &json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}}),
        )
        .expect("patch status");
    let (modified, _) = events
        .until("Apply(web) with VIP", |e| matches!(e, Ok(Event::Apply(_))))
        .await;
    let Ok(Event::Apply(modified)) = modified else {
        unreachable!()
    };
    let ingress = modified
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .expect("ingress present");
    assert_eq!(ingress[0].ip.as_deref(), Some("198.51.100.7"));
    assert!(modified.resource_version() > created.resource_version());
    // A status change is not a spec change.
    assert_eq!(modified.metadata.generation, Some(1));

    c.standin
        .delete::<Service>(Some("default"), "web")
        .expect("delete");
    let (deleted, skipped) = events
        .until("Delete(web)", |e| matches!(e, Ok(Event::Delete(_))))
        .await;
    let Ok(Event::Delete(deleted)) = deleted else {
        unreachable!()
    };
    assert_eq!(deleted.name_any(), "web");
    assert!(skipped.iter().all(Result::is_ok), "no errors: {skipped:#?}");
}

#[tokio::test]
async fn endpoint_slices_filtered_by_label() {
    let c = cluster().await;
    let api: Api<EndpointSlice> = Api::namespaced(c.client.clone(), "default");
    let (reader, writer) = reflector::store::<EndpointSlice>();
    let config = watcher::Config::default().labels("kubernetes.io/service-name=web");
    let _run = drain(reflector(writer, watcher(api, config)));
    c.standin
        .create(&fixtures::endpoint_slice(
            "default",
            "web",
            "web-abc",
            &[SliceEndpoint::ready("10.0.0.1", "node-1")],
        ))
        .expect("create");
    c.standin
        .create(&fixtures::endpoint_slice(
            "default",
            "db",
            "db-abc",
            &[SliceEndpoint::ready("10.0.0.2", "node-1")],
        ))
        .expect("create");
    reader.wait_until_ready().await.expect("ready");
    wait_for("web slice seen", || {
        names(reader.state()).contains("web-abc")
    })
    .await;

    // Relabelled away: the watch reports a deletion; back: an addition.
    c.standin
        .patch::<EndpointSlice>(
            Some("default"),
            "web-abc",
            &json!({"metadata": {"labels": {"kubernetes.io/service-name": "other"}}}),
        )
        .expect("relabel");
    wait_for("web slice gone after relabel", || reader.state().is_empty()).await;
    c.standin
        .patch::<EndpointSlice>(
            Some("default"),
            "db-abc",
            &json!({"metadata": {"labels": {"kubernetes.io/service-name": "web"}}}),
        )
        .expect("relabel");
    wait_for("db slice now selected", || {
        names(reader.state()) == BTreeSet::from(["db-abc".to_string()])
    })
    .await;
    let selectors: Vec<_> = c
        .standin
        .requests()
        .iter()
        .filter_map(|r| r.param("labelSelector"))
        .collect();
    assert!(
        selectors
            .iter()
            .all(|s| s == "kubernetes.io/service-name=web"),
        "{selectors:?}"
    );
}

#[tokio::test]
async fn bookmarks_carry_the_resource_version_forward() {
    let c = cluster().await;
    c.standin.set_bookmark_interval(Duration::from_millis(200));
    let api: Api<Service> = Api::all(c.client.clone());
    let start = c.standin.resource_version();
    // Writes to another resource move the global resourceVersion only.
    c.standin
        .create(&fixtures::node("node-1", "192.0.2.11", &[]))
        .expect("node");
    let now = c.standin.resource_version();
    assert!(now > start);

    {
        let stream = api
            .watch(&WatchParams::default().timeout(30), &start.to_string())
            .await
            .expect("watch");
        let mut stream = std::pin::pin!(stream);
        // The first event on the stream is a bookmark: nothing of the kind
        // changed after `start`.
        let first = tokio::time::timeout(common::DEADLINE, stream.next())
            .await
            .expect("an event within the deadline");
        let Some(Ok(WatchEvent::Bookmark(bookmark))) = first else {
            panic!("expected a bookmark, got {first:?}");
        };
        assert_eq!(bookmark.types.kind, "Service");
        assert_eq!(bookmark.metadata.resource_version, now.to_string());
    }
    wait_for("the raw watch is closed", || c.standin.open_watches() == 0).await;

    // The watcher resumes from a bookmark's resourceVersion after its stream
    // is dropped: no Service changed, yet it resumes past node-2's write.
    let mut events = drain(watcher(api, watcher::Config::default()));
    let _init = events
        .until("InitDone", |e| matches!(e, Ok(Event::InitDone)))
        .await;
    c.standin
        .create(&fixtures::node("node-2", "192.0.2.12", &[]))
        .expect("node");
    let after_node = c.standin.resource_version();
    // Drop the stream until the watcher has had a bookmark to resume from.
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    let mut resumed_from = Vec::new();
    while resumed_from.last() != Some(&Some(after_node.to_string())) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never resumed from {after_node}: {resumed_from:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        wait_for("the watch is open", || c.standin.open_watches() == 1).await;
        c.standin.clear_requests();
        c.standin.drop_watches();
        wait_for("a new watch", || !watches(&c.standin.requests()).is_empty()).await;
        let rewatch = watches(&c.standin.requests())[0].clone();
        assert_eq!(
            rewatch.param("allowWatchBookmarks").as_deref(),
            Some("true")
        );
        resumed_from.push(rewatch.param("resourceVersion"));
    }
    assert!(
        lists(&c.standin.requests(), "/api/v1/services").is_empty(),
        "no re-list"
    );
}

#[tokio::test]
async fn single_node_watch_by_name() {
    let c = cluster().await;
    c.standin
        .create(&fixtures::node("node-2", "192.0.2.12", &[]))
        .expect("other node");
    let api: Api<Node> = Api::all(c.client.clone());
    let mut seen = drain(watch_object(api, "node-1"));
    let (first, _) = seen.until("initial None", |_| true).await;
    assert!(
        matches!(first, Ok(None)),
        "node-1 does not exist yet: {first:?}"
    );

    c.standin
        .create(&fixtures::node("node-1", "192.0.2.11", &[("rack", "r1")]))
        .expect("node-1");
    let (found, _) = seen.until("node-1", |_| true).await;
    let node = found.expect("no error").expect("node-1 present");
    assert_eq!(node.labels().get("rack").map(String::as_str), Some("r1"));

    // Changes to another node are not seen; changes to node-1 are.
    c.standin
        .patch::<Node>(
            None,
            "node-2",
            &json!({"metadata": {"labels": {"rack": "r9"}}}),
        )
        .expect("patch node-2");
    c.standin
        .patch::<Node>(
            None,
            "node-1",
            &json!({"metadata": {"labels": {"rack": "r2"}}}),
        )
        .expect("patch node-1");
    let (updated, _) = seen.until("node-1 update", |_| true).await;
    let node = updated.expect("no error").expect("node-1 present");
    assert_eq!(node.name_any(), "node-1");
    assert_eq!(node.labels().get("rack").map(String::as_str), Some("r2"));

    c.standin.delete::<Node>(None, "node-1").expect("delete");
    let (gone, _) = seen.until("node-1 deletion", |_| true).await;
    assert!(matches!(gone, Ok(None)), "{gone:?}");

    let requests = c.standin.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.param("fieldSelector").as_deref() == Some("metadata.name=node-1")),
        "{requests:#?}"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.is_watch() && r.path == "/api/v1/nodes")
    );
}

#[tokio::test]
async fn streaming_list_initial_events() {
    let c = cluster().await;
    for name in ["a", "b"] {
        c.standin
            .create(&fixtures::load_balancer_service(
                "default",
                name,
                &["198.51.100.1"],
            ))
            .expect("create");
    }
    let api: Api<Service> = Api::all(c.client.clone());
    let (reader, writer) = reflector::store::<Service>();
    let _run = drain(reflector(
        writer,
        watcher(api, watcher::Config::default().streaming_lists()),
    ));
    reader.wait_until_ready().await.expect("ready");
    assert_eq!(
        names(reader.state()),
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    c.standin
        .delete::<Service>(Some("default"), "a")
        .expect("delete");
    wait_for("a deleted", || {
        names(reader.state()) == BTreeSet::from(["b".to_string()])
    })
    .await;
    let requests = c.standin.requests();
    assert!(
        lists(&requests, "/api/v1/services").is_empty(),
        "no list: {requests:#?}"
    );
    let first = watches(&requests)[0].clone();
    assert_eq!(first.param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(
        first.param("resourceVersionMatch").as_deref(),
        Some("NotOlderThan")
    );
}

#[tokio::test]
async fn applied_objects_with_backoff_sees_every_change() {
    let c = cluster().await;
    let api: Api<Service> = Api::namespaced(c.client.clone(), "default");
    let mut applied = drain(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects(),
    );
    for i in 0..20 {
        c.standin
            .create(&fixtures::load_balancer_service(
                "default",
                &format!("s{i:02}"),
                &[],
            ))
            .expect("create");
    }
    let mut seen = BTreeSet::new();
    while seen.len() < 20 {
        let (svc, _) = applied.until("applied service", |_| true).await;
        seen.insert(svc.expect("no error").name_any());
    }
}
