//! The main loop answering the API: requests go in as values, answers come
//! back as values built at the moment of the request, and a loop that
//! does not answer costs the client a bounded wait and a 503, never more.
//! A daemon without peers or sockets, driven by its real loop.

use std::time::Duration;

use super::*;
use crate::api::StateView;
use crate::report::status::RoutePage;

const CONFIG: &str = r#"
[speaker]
asn = 65001
router_id = "192.0.2.2"
graceful_shutdown_wait = "60s"

[[peer]]
name = "tor1"
address = "192.0.2.1"
asn = 65000

[source]
kind = "file"
path = "vips.toml"
"#;

/// A daemon on `dir`'s config (no peer started, no listener), its inputs,
/// the API's view of it, and the source's end.
fn daemon(dir: &Path) -> (Daemon, Inputs, Arc<View>, watch::Sender<SourceSnapshot>) {
    let path = dir.join("holdfast.toml");
    std::fs::write(&path, CONFIG).unwrap();
    std::fs::write(dir.join("vips.toml"), "").unwrap();
    let config = Arc::new(config::parse(&path, CONFIG).expect("a valid config"));
    let started = Instant::now();
    let (published, published_rx) = watch::channel(Published::initial(config.clone(), started));
    let (view, requests) = View::new(published_rx);
    let view = Arc::new(view);
    let stability = Stability::new(crate::routes::stability_params(&config)).unwrap();
    let (_, shutdown) = watch::channel(false);
    let (stop, _) = watch::channel(false);
    let (probe_tx, probes) = tokio::sync::mpsc::unbounded_channel();
    let (accept_tx, accepted) = tokio::sync::mpsc::unbounded_channel();
    let (snap_tx, snapshots) = watch::channel(SourceSnapshot::default());
    let d = Daemon {
        opts: Options {
            config: path,
            withdraw_on_exit: false,
            state_dir: dir.join("state"),
        },
        started,
        config: config.clone(),
        config_error: None,
        node: "node-1".into(),
        router_id: Ipv4Addr::new(192, 0, 2, 2),
        node_labels: None,
        restart: restart::Restart::new(false, started, &config.peers),
        routes: crate::routes::Routes::new(config.clone(), stability, false, true),
        peers: BTreeMap::new(),
        published,
        file_settings: None,
        file_resync: None,
        bfd: None,
        kube: None,
        kube_config: None,
        runtime_config: watch::channel(config.clone()).0,
        interfaces_wanted: watch::channel(false).0,
        probe_tasks: BTreeMap::new(),
        probe_tx,
        routes_ready: watch::channel(false).0,
        resync: crate::routes::reconcile::Schedule::new(config.resync, started),
        reconcile_repairs: 0,
        listener: None,
        accept_tx,
        api: Api {
            addr: config.speaker.api,
            stop,
            task: tokio::spawn(async { Ok(()) }),
        },
        metrics: None,
        view: view.clone(),
        shutdown,
        config_stamp: None,
        config_reader: reload::FileReader::default(),
        bmp: crate::bmp::Hub::start(&[], "test"),
        handoff: None,
    };
    let signal = |kind| tokio::signal::unix::signal(kind).unwrap();
    use tokio::signal::unix::SignalKind;
    let inputs = Inputs {
        snapshots,
        probes,
        accepted,
        requests,
        // Signals the test never sends.
        sigterm: signal(SignalKind::user_defined1()),
        sigint: signal(SignalKind::user_defined1()),
        sighup: signal(SignalKind::user_defined2()),
        labels: None,
        config_watch: None,
        config_settled: None,
        chores: Chores::new(started),
        handoff: tokio::sync::mpsc::channel(1).1,
    };
    (d, inputs, view, snap_tx)
}

/// Runs `client` against the daemon's real main loop; the loop must not
/// stop first.
async fn with_loop<T>(
    mut d: Daemon,
    inputs: Inputs,
    client: impl std::future::Future<Output = T>,
) -> T {
    tokio::select! {
        stopped = d.drive(inputs) => panic!("the main loop stopped ({stopped:?})"),
        out = client => out,
    }
}

/// An answer, which must come well within the view's own wait.
async fn answered<T>(answer: crate::api::Answer<T>) -> Result<T, crate::api::Unavailable> {
    tokio::time::timeout(view::ANSWER_WAIT * 2, answer)
        .await
        .expect("the view gave up within its wait")
}

/// The answer is built when the request comes, from the loop's own values:
/// a drain's time left counts down between two requests while the loop
/// has nothing else to do (a copy made when the loop last handled an
/// input would show the same time twice), and a snapshot handed to the
/// loop shows in the next answer.
#[tokio::test]
async fn a_request_is_answered_from_the_state_at_that_moment() {
    let dir = tempfile::tempdir().unwrap();
    let (d, inputs, view, snap_tx) = daemon(dir.path());
    with_loop(d, inputs, async {
        let none = answered(view.status_page(RoutePage::NONE)).await.unwrap();
        assert_eq!(none.drain, None, "no drain yet");

        let drained = answered(view.drain(true)).await.unwrap().expect("a drain");
        assert_eq!(drained.state, "draining");
        let left = |s: &crate::report::status::Status| {
            let d = s.drain.as_ref().expect("the drain shows");
            assert_eq!(d.state, "draining");
            d.seconds_left.expect("time left")
        };
        let first = left(&answered(view.status_page(RoutePage::NONE)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let second = left(&answered(view.status_page(RoutePage::NONE)).await.unwrap());
        assert!(
            first - second >= 1.0,
            "the drain's time left went from {first:.3}s to {second:.3}s over 1.2 s: the answer was not built at the request"
        );
        let why = answered(view.explain("198.51.100.10".parse().unwrap()))
            .await
            .unwrap();
        assert!(
            why.reasons.iter().any(|r| r.contains("this node is draining")),
            "{why:?}"
        );

        // A VIP the source hands over shows once the loop has taken it.
        let vip: IpAddr = "198.51.100.10".parse().unwrap();
        let route = crate::model::Route::new(Arc::new(["public".to_string()].into()), None, None);
        snap_tx.send_replace(SourceSnapshot {
            vips: Arc::new([(vip, crate::model::Vip::of(route))].into_iter().collect()),
            healthy: true,
            synced: true,
            ..SourceSnapshot::default()
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let status = answered(view.status()).await.unwrap();
            if status.source.vips == 1 {
                assert!(status.source.synced);
                break;
            }
            assert!(Instant::now() < deadline, "the snapshot never showed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Undrained: the next answer says so.
        let undrained = answered(view.drain(false)).await.unwrap().expect("undrain");
        assert_eq!(undrained.state, "active");
        let status = answered(view.status_page(RoutePage::NONE)).await.unwrap();
        assert_eq!(status.drain, None);
    })
    .await;
}

/// A main loop that does not answer (busy, or stuck) costs a request the
/// view's wait and then a 503 that says why; one that is gone, a 503 at
/// once. Readiness never asks the loop.
#[tokio::test]
async fn a_loop_that_does_not_answer_is_a_503_after_a_bounded_wait() {
    let config = config::parse(Path::new("holdfast.toml"), CONFIG).expect("a valid config");
    let wait = Duration::from_millis(200);
    let (published_tx, published) = watch::channel(Published {
        config: Arc::new(config),
        started: Instant::now(),
        synced: false,
        source_error: None,
        peers: Vec::new(),
    });
    let (busy, requests) = View::new(published);
    let busy = busy.waiting(wait);
    // The loop never reads its requests: more of them than its queue holds
    // wait, and each gets its 503 in time.
    let began = Instant::now();
    let answers = futures::future::join_all(
        (0..view::REQUEST_QUEUE + 4).map(|_| busy.status_page(RoutePage::NONE)),
    );
    let answers = tokio::time::timeout(Duration::from_secs(5), answers)
        .await
        .expect("every request answered within 5 s; the view's wait is 200 ms");
    assert!(began.elapsed() >= wait);
    for a in answers {
        let why = a.expect_err("no answer from a loop that does not read").0;
        assert!(
            why.contains("did not answer within 0.2s") && why.contains("busy"),
            "{why}"
        );
    }
    // Through the API: a 503 with the reason.
    let req = hyper::Request::builder()
        .uri("/v1/status")
        .body(())
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(5), crate::api::respond(&busy, &req))
        .await
        .expect("the API answers within 5 s");
    assert_eq!(resp.status(), hyper::StatusCode::SERVICE_UNAVAILABLE);
    // /readyz is answered from the published value, loop or no loop.
    assert_eq!(
        busy.readiness(),
        Err("waiting for the source's first complete view".into())
    );
    published_tx.send_modify(|p| p.synced = true);
    assert_eq!(busy.readiness(), Ok(None));

    // The loop is gone (holdfast stopping): at once.
    drop(requests);
    let began = Instant::now();
    let why = answered(busy.explain("198.51.100.10".parse().unwrap()))
        .await
        .expect_err("no loop")
        .0;
    assert!(began.elapsed() < wait, "waited for a loop that is gone");
    assert!(why.contains("holdfast is stopping"), "{why}");
}
