//! Fault injection against kube-rs's unmodified watcher: dropped streams,
//! compaction (410 Gone), a stalled and a refusing API server, timeouts.

mod common;

use common::{Cluster, cluster, drain, is_gone, lists, wait_for, watches};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, ListParams, VersionMatch};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event, watcher};
use kube_standin::fixtures;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// name → VIPs of every Service, as the reflector has them.
fn reflected(store: &Store<Service>) -> BTreeMap<String, Vec<String>> {
    store
        .state()
        .iter()
        .map(|s| (s.name_any(), vips(s)))
        .collect()
}

/// name → VIPs of every Service, as the stand-in has them.
fn truth(c: &Cluster) -> BTreeMap<String, Vec<String>> {
    c.standin
        .list::<Service>(None)
        .iter()
        .map(|s| (s.name_any(), vips(s)))
        .collect()
}

fn vips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|ing| ing.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

fn set_vip(c: &Cluster, name: &str, ips: &[&str]) {
    let ingress: Vec<_> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    c.standin
        .patch_status::<Service>(
            Some("default"),
            name,
            &json!({"loadBalancer": {"ingress": ingress}}),
        )
        .expect("patch status");
}

fn add(c: &Cluster, name: &str, ips: &[&str]) {
    c.standin
        .create(&fixtures::load_balancer_service("default", name, ips))
        .expect("create");
}

/// A reflector over all Services with kube-rs's default backoff, and the
/// watcher's events (errors included) as they pass; returned once the
/// watcher's first list is in (its InitDone).
async fn reflect(
    c: &Cluster,
    config: watcher::Config,
) -> (
    Store<Service>,
    common::Drained<Result<Event<Service>, watcher::Error>>,
) {
    let api: Api<Service> = Api::all(c.client.clone());
    let (reader, writer) = reflector::store();
    let mut events = drain(watcher(api, config).default_backoff().reflect(writer));
    let _init = events
        .until("InitDone", |e| matches!(e, Ok(Event::InitDone)))
        .await;
    (reader, events)
}

async fn in_sync(c: &Cluster, store: &Store<Service>, what: &str) {
    wait_for(what, || reflected(store) == truth(c)).await;
}

/// A reflector is in sync as soon as its list is in; its watch opens after.
/// Faults aimed at the watch stream wait for it.
async fn watching(c: &Cluster) {
    wait_for("the watch stream is open", || c.standin.open_watches() == 1).await;
}

#[tokio::test]
async fn dropped_watch_reconnects_without_losing_events() {
    let c = cluster().await;
    add(&c, "a", &["198.51.100.1"]);
    add(&c, "b", &["198.51.100.2"]);
    let (store, _events) = reflect(&c, watcher::Config::default()).await;
    in_sync(&c, &store, "initial sync").await;

    for round in 0..3 {
        watching(&c).await;
        c.standin.drop_watches();
        // Changes while the watcher reconnects.
        set_vip(&c, "a", &[]);
        add(&c, &format!("new-{round}"), &["203.0.113.9"]);
        set_vip(&c, "a", &["198.51.100.1"]);
        c.standin.delete::<Service>(Some("default"), "b").ok();
        in_sync(&c, &store, &format!("sync after drop {round}")).await;
    }
    let requests = c.standin.requests();
    // One list only: every reconnect resumed from a resourceVersion.
    assert_eq!(
        lists(&requests, "/api/v1/services").len(),
        1,
        "{requests:#?}"
    );
    let rewatches = watches(&requests);
    assert!(rewatches.len() >= 4, "{rewatches:#?}");
    assert!(
        rewatches
            .iter()
            .all(|w| w.param("resourceVersion").is_some_and(|rv| rv != "0"))
    );
}

#[tokio::test]
async fn compaction_gives_410_and_the_watcher_relists() {
    let c = cluster().await;
    add(&c, "a", &["198.51.100.1"]);
    add(&c, "b", &["198.51.100.2"]);
    let (store, mut events) = reflect(&c, watcher::Config::default()).await;
    in_sync(&c, &store, "initial sync").await;
    watching(&c).await;

    // While the watcher hears nothing, the cluster moves on and compacts.
    c.standin.pause();
    c.standin
        .delete::<Service>(Some("default"), "a")
        .expect("delete a");
    add(&c, "c", &["203.0.113.3"]);
    set_vip(&c, "b", &[]);
    let point = c.standin.compact();
    c.standin.clear_requests();
    c.standin.drop_watches();
    c.standin.resume();

    let (gone, _) = events
        .until(
            "a 410 watch error",
            |e| matches!(e, Err(err) if is_gone(err)),
        )
        .await;
    let Err(watcher::Error::WatchError(status)) = gone else {
        unreachable!()
    };
    assert_eq!(status.reason, "Expired");
    assert!(
        status.message.contains("too old resource version"),
        "{}",
        status.message
    );
    let _relist = events
        .until("Init after 410", |e| matches!(e, Ok(Event::Init)))
        .await;
    in_sync(&c, &store, "sync after relist").await;
    assert_eq!(
        reflected(&store),
        BTreeMap::from([
            ("b".to_string(), vec![]),
            ("c".to_string(), vec!["203.0.113.3".to_string()])
        ])
    );
    // The watch that follows the re-list starts at or after the compaction
    // point, and there is exactly one re-list.
    let resumed_at = |r: &kube_standin::RequestRecord| {
        r.param("resourceVersion")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|rv| *rv >= point)
    };
    wait_for("a watch from after the compaction point", || {
        watches(&c.standin.requests())
            .iter()
            .any(|w| resumed_at(w).is_some())
    })
    .await;
    let requests = c.standin.requests();
    let relists = lists(&requests, "/api/v1/services");
    assert_eq!(relists.len(), 1, "{requests:#?}");
    let first_watch = watches(&requests)[0].clone();
    let stale: u64 = first_watch
        .param("resourceVersion")
        .and_then(|v| v.parse().ok())
        .expect("numeric rv");
    assert!(
        stale < point,
        "the first watch after the drop resumed from before the compaction"
    );
}

#[tokio::test]
async fn stale_exact_list_and_continue_get_410() {
    let c = cluster().await;
    for i in 0..3 {
        add(&c, &format!("s{i}"), &[]);
    }
    let api: Api<Service> = Api::all(c.client.clone());
    let first = api
        .list(&ListParams::default().limit(1))
        .await
        .expect("page 1");
    let old_rv = first.metadata.resource_version.clone().expect("rv");
    let token = first.metadata.continue_.clone().expect("continue");
    // Before compaction both work.
    api.list(
        &ListParams::default()
            .at(&old_rv)
            .matching(VersionMatch::Exact),
    )
    .await
    .expect("exact list at a live rv");
    c.standin.compact();
    let exact = api
        .list(
            &ListParams::default()
                .at(&old_rv)
                .matching(VersionMatch::Exact),
        )
        .await
        .expect_err("exact list at a compacted rv");
    let continued = api
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .expect_err("continue from before compaction");
    for err in [exact, continued] {
        match err {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 410, "{status:?}");
                assert_eq!(status.reason, "Expired");
            }
            other => panic!("expected 410, got {other:?}"),
        }
    }
    // NotOlderThan still serves the current state.
    let now = api
        .list(
            &ListParams::default()
                .at(&old_rv)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .expect("not-older-than list");
    assert_eq!(now.items.len(), 3);
}

#[tokio::test]
async fn paused_server_stalls_the_client_and_resume_recovers() {
    let c = cluster().await;
    add(&c, "a", &["198.51.100.1"]);
    let (store, mut events) = reflect(&c, watcher::Config::default()).await;
    in_sync(&c, &store, "initial sync").await;
    watching(&c).await;

    c.standin.pause();
    set_vip(&c, "a", &[]);
    add(&c, "b", &["198.51.100.2"]);
    // A plain request gets no answer while paused.
    let api: Api<Service> = Api::all(c.client.clone());
    let held = tokio::spawn(async move { api.list(&ListParams::default()).await });
    let quiet = events.collect_for(Duration::from_millis(1500)).await;
    assert!(quiet.is_empty(), "nothing arrives while paused: {quiet:#?}");
    assert!(!held.is_finished(), "a list is held while paused");
    assert_eq!(
        reflected(&store).get("a"),
        Some(&vec!["198.51.100.1".to_string()])
    );

    c.standin.resume();
    in_sync(&c, &store, "sync after resume").await;
    let list = tokio::time::timeout(common::DEADLINE, held)
        .await
        .expect("held list answered after resume")
        .expect("task")
        .expect("list ok");
    assert_eq!(list.items.len(), 2);
}

#[tokio::test]
async fn paused_watch_times_out_on_the_client_side() {
    // kube-rs gives up on a silent watch after timeoutSeconds + 5 s; with
    // timeoutSeconds=1 the stalled stream is abandoned and a new watch sent.
    let c = cluster().await;
    let (store, _events) = reflect(&c, watcher::Config::default().timeout(1)).await;
    // Stall an open stream (a request held before its answer is not covered
    // by kube-rs's idle timeout: it would wait for ever).
    watching(&c).await;
    c.standin.pause();
    c.standin.clear_requests();
    wait_for(
        "the client abandons the stalled watch and tries again",
        || !watches(&c.standin.requests()).is_empty(),
    )
    .await;
    add(&c, "late", &["203.0.113.1"]);
    c.standin.resume();
    in_sync(&c, &store, "sync after resume").await;
}

#[tokio::test]
async fn refusing_server_gives_errors_and_resume_recovers() {
    let c = cluster().await;
    add(&c, "a", &["198.51.100.1"]);
    let (store, mut events) = reflect(&c, watcher::Config::default()).await;
    in_sync(&c, &store, "initial sync").await;
    watching(&c).await;

    c.standin.refuse();
    let (err, _) = events.until("an error while refused", Result::is_err).await;
    assert!(
        matches!(
            err,
            Err(watcher::Error::WatchStartFailed(_) | watcher::Error::WatchFailed(_))
        ),
        "{err:?}"
    );
    let api: Api<Service> = Api::all(c.client.clone());
    api.list(&ListParams::default())
        .await
        .expect_err("a list fails while refused");
    set_vip(&c, "a", &["198.51.100.5"]);
    add(&c, "b", &[]);

    c.standin.resume();
    in_sync(&c, &store, "sync after resume").await;
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream_and_the_watcher_resumes() {
    let c = cluster().await;
    let (store, mut events) = reflect(&c, watcher::Config::default().timeout(1)).await;
    wait_for("three watches of 1 s", || {
        watches(&c.standin.requests()).len() >= 3
    })
    .await;
    add(&c, "x", &[]);
    in_sync(&c, &store, "sync").await;
    let requests = c.standin.requests();
    assert!(
        watches(&requests)
            .iter()
            .all(|w| w.param("timeoutSeconds").as_deref() == Some("1"))
    );
    assert_eq!(
        lists(&requests, "/api/v1/services").len(),
        1,
        "no re-list on timeout"
    );
    let errors: Vec<_> = events
        .collect_for(Duration::from_millis(100))
        .await
        .into_iter()
        .filter(Result::is_err)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[tokio::test]
async fn closed_watches_resume_cleanly() {
    let c = cluster().await;
    let (store, mut events) = reflect(&c, watcher::Config::default()).await;
    watching(&c).await;
    c.standin.close_watches();
    add(&c, "y", &[]);
    in_sync(&c, &store, "sync").await;
    wait_for("watch reopened", || {
        watches(&c.standin.requests()).len() >= 2
    })
    .await;
    let seen = events.collect_for(Duration::from_millis(200)).await;
    assert!(seen.iter().all(Result::is_ok), "{seen:#?}");
}

/// Makes the watcher re-list: every version it holds becomes too old.
fn force_relist(c: &Cluster) {
    c.standin.pause();
    c.standin.compact();
    c.standin.drop_watches();
    c.standin.resume();
}

#[tokio::test]
async fn an_emptied_kind_lists_no_items_and_sends_no_events_until_served_again() {
    let c = cluster().await;
    add(&c, "a", &["198.51.100.1"]);
    add(&c, "b", &["198.51.100.2"]);
    let (store, mut events) = reflect(&c, watcher::Config::default()).await;
    in_sync(&c, &store, "initial sync").await;
    watching(&c).await;

    // The API server now says there is no Service; the watcher re-lists
    // and believes it.
    c.standin.serve_empty::<Service>();
    let api: Api<Service> = Api::all(c.client.clone());
    let listed = api.list(&ListParams::default()).await.expect("list");
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    force_relist(&c);
    let _relist = events
        .until("InitDone after the re-list", |e| {
            matches!(e, Ok(Event::InitDone))
        })
        .await;
    wait_for("an empty store", || store.state().is_empty()).await;
    // Changes meanwhile reach no watcher.
    add(&c, "c", &["198.51.100.3"]);
    watching(&c).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(store.state().is_empty(), "{:?}", reflected(&store));
    // The store kept everything: served again, the next re-list shows it.
    c.standin.serve_stored::<Service>();
    force_relist(&c);
    in_sync(&c, &store, "sync after serving again").await;
    assert_eq!(reflected(&store).len(), 3);
}
