use std::sync::Mutex;

use http_body_util::BodyExt;

use super::*;

/// A stand-in for the daemon's state: fixed answers, and switches to make
/// the view panic or give no answer.
struct View {
    ready: Mutex<Result<(), String>>,
    panics: bool,
    /// The daemon did not answer (its answers are this error).
    unavailable: Option<Unavailable>,
    /// Drain calls seen (`true`: drain); an undrain is refused.
    drains: Mutex<Vec<bool>>,
    /// `speaker.api_token_file`'s token.
    token: Option<Vec<u8>>,
}

impl View {
    /// `value`, or the error the view is set to give.
    fn give<T: Send + 'static>(&self, value: T) -> Answer<T> {
        match &self.unavailable {
            Some(why) => Box::pin(std::future::ready(Err(why.clone()))),
            None => answer(value),
        }
    }
}

impl StateView for View {
    fn status(&self) -> Answer<Status> {
        if self.panics {
            panic!("a bug in the daemon");
        }
        self.give(Status {
            node: "worker-1".into(),
            asn: 65001,
            ..Default::default()
        })
    }
    fn explain(&self, vip: IpAddr) -> Answer<Explanation> {
        self.give(Explanation {
            vip: vip.to_string(),
            advertised: vip.is_ipv4(),
            ..Default::default()
        })
    }
    fn ready(&self) -> Result<(), String> {
        self.ready.lock().unwrap().clone()
    }
    fn drain(&self, on: bool) -> Answer<Result<crate::report::status::DrainStatus, String>> {
        self.drains.lock().unwrap().push(on);
        if !on {
            return self.give(Err("shutting down".into()));
        }
        self.give(Ok(crate::report::status::DrainStatus {
            state: "draining".into(),
            seconds_left: Some(15.0),
            exiting: false,
        }))
    }
    fn api_token(&self) -> Option<Vec<u8>> {
        self.token.clone()
    }
}

fn view() -> View {
    View {
        ready: Mutex::new(Ok(())),
        panics: false,
        unavailable: None,
        drains: Mutex::new(Vec::new()),
        token: None,
    }
}

/// Runs a future to its end (a response, its body).
fn now<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

fn call(view: &View, method: &str, uri: &str) -> (StatusCode, String, String) {
    call_on(Surface::Full, view, method, uri, None)
}

/// A request on `surface`, with this `Authorization` header if any.
fn call_on(
    surface: Surface,
    view: &View,
    method: &str,
    uri: &str,
    authorization: Option<&str>,
) -> (StatusCode, String, String) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(a) = authorization {
        req = req.header(AUTHORIZATION, a);
    }
    let req = req.body(()).unwrap();
    let resp = now(respond_on(surface, view, &req));
    let status = resp.status();
    let ctype = resp
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = now(resp.into_body().collect()).unwrap().to_bytes();
    (status, ctype, String::from_utf8(bytes.to_vec()).unwrap())
}

#[test]
fn each_endpoint_answers() {
    let v = view();
    let (s, t, b) = call(&v, "GET", "/metrics");
    assert_eq!(
        (s, t.as_str()),
        (StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(b.contains("holdfast_uptime_seconds 0\n"), "{b}");

    assert_eq!(call(&v, "GET", "/healthz").2, "ok\n");
    assert_eq!(call(&v, "GET", "/readyz").0, StatusCode::OK);

    let (s, t, b) = call(&v, "GET", "/v1/status?verbose=1");
    assert_eq!((s, t.as_str()), (StatusCode::OK, "application/json"));
    let status: Status = serde_json::from_str(&b).unwrap();
    assert_eq!((status.node.as_str(), status.asn), ("worker-1", 65001));

    for (uri, vip) in [
        ("/v1/explain/198.51.100.10", "198.51.100.10"),
        ("/v1/explain/198.51.100.10%2F32", "198.51.100.10"),
        ("/v1/explain/198.51.100.10/32", "198.51.100.10"),
        ("/v1/explain/2001:db8::10", "2001:db8::10"),
        ("/v1/explain/2001%3Adb8%3A%3A10/128", "2001:db8::10"),
    ] {
        let (s, _, b) = call(&v, "GET", uri);
        assert_eq!(s, StatusCode::OK, "{uri}: {b}");
        let e: Explanation = serde_json::from_str(&b).unwrap();
        assert_eq!(e.vip, vip, "{uri}");
    }
}

#[test]
fn errors_are_statuses_with_reasons() {
    let v = view();
    for uri in ["/", "/metric", "/v1/status/x", "/v1/explain", "/v2/status"] {
        let (s, t, b) = call(&v, "GET", uri);
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(t, "application/json");
        assert!(b.contains("no such endpoint"), "{b}");
    }
    for uri in [
        "/v1/explain/",
        "/v1/explain/not-an-ip",
        "/v1/explain/198.51.100.0/24",
        "/v1/explain/2001:db8::/64",
        "/v1/explain/198.51.100.10/128",
        "/v1/explain/198.51.100.10%zz",
        "/v1/explain/%ff%fe",
        "/v1/explain/1.2.3.4/32/x",
    ] {
        let (s, t, b) = call(&v, "GET", uri);
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(t, "application/json");
        let err: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert!(err["error"].as_str().is_some_and(|e| !e.is_empty()), "{b}");
    }
    for (method, uri) in [
        ("POST", "/metrics"),
        ("PUT", "/v1/status"),
        ("DELETE", "/v1/explain/198.51.100.10"),
        ("OPTIONS", "/healthz"),
    ] {
        let req = Request::builder().method(method).uri(uri).body(()).unwrap();
        let resp = now(respond(&v, &req));
        assert_eq!(
            resp.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {uri}"
        );
        assert_eq!(resp.headers().get(ALLOW).unwrap(), "GET, HEAD");
    }
    // HEAD is GET without the body (hyper leaves the body out on the wire).
    assert_eq!(call(&v, "HEAD", "/healthz").0, StatusCode::OK);

    *v.ready.lock().unwrap() = Err("the kubernetes source has not synced".into());
    let (s, _, b) = call(&v, "GET", "/readyz");
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(b, "not ready: the kubernetes source has not synced\n");
    assert_eq!(
        call(&v, "GET", "/healthz").0,
        StatusCode::OK,
        "alive though not ready"
    );
}

#[test]
fn a_panicking_view_costs_a_500_not_the_server() {
    let v = View {
        panics: true,
        ..view()
    };
    for uri in ["/metrics", "/v1/status"] {
        let (s, _, b) = call(&v, "GET", uri);
        assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{uri}");
        assert!(b.contains("panicked"), "{b}");
    }
    assert_eq!(call(&v, "GET", "/healthz").0, StatusCode::OK);
}

/// When the daemon gives no answer (its main loop did not answer in time,
/// or it is stopping), every endpoint that asks it is a 503 with the
/// daemon's reason; health and readiness do not ask it and answer as ever.
#[test]
fn no_answer_from_the_daemon_is_a_503_with_the_reason() {
    let why = "holdfast did not answer within 3.0s: its main loop is busy";
    let v = View {
        unavailable: Some(Unavailable(why.into())),
        ..view()
    };
    for (method, uri) in [
        ("GET", "/metrics"),
        ("GET", "/v1/status"),
        ("GET", "/v1/explain/198.51.100.10"),
        ("POST", "/v1/drain"),
    ] {
        let (s, t, b) = call_on(Surface::Local, &v, method, uri, None);
        assert_eq!(
            (s, t.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "application/json"),
            "{method} {uri}"
        );
        let error: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(error["error"], why, "{method} {uri}");
    }
    assert_eq!(call(&v, "GET", "/healthz").0, StatusCode::OK);
    assert_eq!(call(&v, "GET", "/readyz").0, StatusCode::OK);
}

#[test]
fn vips_parse_as_addresses_or_host_prefixes() {
    assert_eq!(
        parse_vip("198.51.100.10"),
        Ok("198.51.100.10".parse().unwrap())
    );
    assert_eq!(
        parse_vip("2001:db8::10/128"),
        Ok("2001:db8::10".parse().unwrap())
    );
    assert_eq!(
        parse_vip("web").unwrap_err(),
        "\"web\" is not an IP address"
    );
    assert_eq!(
        parse_vip("198.51.100.0/24").unwrap_err(),
        "\"198.51.100.0/24\" is a prefix, not a VIP: give an address (or it as /32)"
    );
    assert!(parse_vip("").is_err());
    assert!(parse_vip("%").is_err());
    assert!(parse_vip("%+1").is_err());
    assert!(parse_vip("%é1").is_err());
}

/// A view with `n` routes.
struct Routes(usize);

impl StateView for Routes {
    fn status(&self) -> Answer<Status> {
        answer(Status {
            routes: (0..self.0)
                .map(|i| crate::report::status::RouteStatus {
                    prefix: format!("198.18.{}.{}/32", i / 256, i % 256),
                    state: "advertised".into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }
    fn explain(&self, _: IpAddr) -> Answer<Explanation> {
        answer(Explanation::default())
    }
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }
}

fn get_status(view: &dyn StateView, uri: &str) -> (StatusCode, String) {
    let req = Request::builder().uri(uri).body(()).unwrap();
    let resp = now(respond(view, &req));
    let status = resp.status();
    let bytes = now(resp.into_body().collect()).unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[test]
fn status_lists_one_page_of_routes_and_says_where_it_lies() {
    let view = Routes(2500);
    let page = |uri: &str| {
        let (code, body) = get_status(&view, uri);
        assert_eq!(code, StatusCode::OK, "{uri}: {body}");
        let s: Status = serde_json::from_str(&body).unwrap();
        (
            s.routes.first().map(|r| r.prefix.clone()),
            s.routes.len(),
            s.routes_total,
            s.routes_offset,
            s.routes_truncated,
        )
    };
    let first = Some("198.18.0.0/32".to_string());
    assert_eq!(
        page("/v1/status"),
        (
            first.clone(),
            ROUTE_PAGE_MAX,
            Some(2500),
            Some(0),
            Some(1500)
        )
    );
    assert_eq!(
        page("/v1/status?offset=2000&limit=1000"),
        (
            Some("198.18.7.208/32".into()),
            500,
            Some(2500),
            Some(2000),
            Some(0)
        )
    );
    assert_eq!(
        page("/v1/status?limit=10&x=y"),
        (first, 10, Some(2500), Some(0), Some(2490))
    );
    assert_eq!(
        page("/v1/status?offset=9999"),
        (None, 0, Some(2500), Some(2500), Some(0))
    );
    for (uri, why) in [
        (
            "/v1/status?limit=1001",
            "limit must be at most 1000, got 1001; page with offset",
        ),
        (
            "/v1/status?offset=-1",
            "offset must be a whole number, got \"-1\"",
        ),
    ] {
        let (code, body) = get_status(&view, uri);
        assert_eq!(code, StatusCode::BAD_REQUEST, "{uri}");
        let error: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"], why, "{uri}");
    }
    // A list that fits is the whole list, without paging fields.
    let (_, body) = get_status(&Routes(3), "/v1/status");
    assert!(!body.contains("routes_total"), "{body}");
    assert_eq!(
        serde_json::from_str::<Status>(&body).unwrap().routes.len(),
        3
    );
}

#[test]
fn the_health_lane_answers_health_checks_only() {
    let v = view();
    let lane = |uri: &str| {
        let req = Request::builder().uri(uri).body(()).unwrap();
        now(respond_health_only(Surface::Full, &v, &req)).status()
    };
    assert_eq!(lane("/healthz"), StatusCode::OK);
    assert_eq!(lane("/readyz"), StatusCode::OK);
    assert_eq!(lane("/v1/status"), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(lane("/metrics"), StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn drain_and_undrain_take_post_only() {
    let v = view();
    let local = |method, uri| call_on(Surface::Local, &v, method, uri, None);
    let (s, t, b) = local("POST", "/v1/drain");
    assert_eq!((s, t.as_str()), (StatusCode::OK, "application/json"));
    let d: crate::report::status::DrainStatus = serde_json::from_str(&b).unwrap();
    assert_eq!((d.state.as_str(), d.seconds_left), ("draining", Some(15.0)));
    // A refusal is a conflict with the daemon's state, with the reason.
    let (s, _, b) = local("POST", "/v1/undrain");
    assert_eq!(s, StatusCode::CONFLICT);
    assert!(b.contains("shutting down"), "{b}");
    // Reading must never drain: GET and HEAD are refused, and the view is
    // not called for them.
    for method in ["GET", "HEAD", "PUT"] {
        let req = Request::builder()
            .method(method)
            .uri("/v1/drain")
            .body(())
            .unwrap();
        let resp = now(respond_on(Surface::Local, &v, &req));
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(resp.headers().get(ALLOW).unwrap(), "POST");
    }
    // And POST on a read endpoint stays refused.
    assert_eq!(
        call(&v, "POST", "/v1/status").0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(*v.drains.lock().unwrap(), vec![true, false]);
}

/// A health check arriving while every slot of its client is taken (a
/// burst of reconnections fills the lanes for a moment) waits for one to
/// free instead of being closed at once.
#[tokio::test]
async fn a_connection_that_finds_every_slot_taken_waits_for_one() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let view: Arc<dyn StateView> = Arc::new(view());
    tokio::spawn(serve_surface(
        listener,
        view,
        std::future::pending(),
        Surface::Full,
    ));
    // This client's share of the general lane, then the whole health lane:
    // connections that send nothing (they hold their slots until the
    // header read timeouts, seconds away).
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS_PER_CLIENT + HEALTH_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let probe = tokio::spawn(async move {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).await?;
        Ok::<_, io::Error>(answer)
    });
    // One health-lane connection goes well within SLOT_WAIT.
    tokio::time::sleep(SLOT_WAIT / 5).await;
    drop(held.pop());
    let answer = tokio::time::timeout(Duration::from_secs(5), probe)
        .await
        .expect("the health check is answered or closed within 5 s")
        .unwrap();
    match answer {
        Ok(a) => assert!(a.starts_with("HTTP/1.1 200"), "{a}"),
        Err(e) => panic!("the health check was closed instead of waiting for a slot: {e}"),
    }
}

/// Over TCP, without a configured token, the state-changing endpoints are
/// refused (403, pointing at the socket) and the daemon is never asked;
/// the read-only ones answer as ever. On the metrics listener they do not
/// exist.
#[test]
fn tcp_without_a_token_refuses_to_drain() {
    let v = view();
    for path in ["/v1/drain", "/v1/undrain"] {
        let (s, t, b) = call(&v, "POST", path);
        assert_eq!((s, t.as_str()), (StatusCode::FORBIDDEN, "application/json"));
        assert!(
            b.contains("not served over TCP without a token")
                && b.contains("/run/holdfast/api.sock")
                && b.contains("speaker.api_token_file"),
            "{b}"
        );
        // Whatever is sent: there is no token to match.
        let (s, _, _) = call_on(
            Surface::Full,
            &v,
            "POST",
            path,
            Some("Bearer anything-at-all-16"),
        );
        assert_eq!(s, StatusCode::FORBIDDEN);
        let (s, _, _) = call_on(Surface::MetricsOnly, &v, "POST", path, None);
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    assert_eq!(call(&v, "GET", "/v1/status").0, StatusCode::OK);
    assert!(
        v.drains.lock().unwrap().is_empty(),
        "the view was asked to drain"
    );
}

/// With `speaker.api_token_file`: no token or a wrong one is 401 with the
/// challenge (RFC 6750 §3) and changes nothing; the right one drains.
#[test]
fn tcp_with_a_token_drains_only_with_it() {
    const TOKEN: &str = "c2VjcmV0LXRva2VuLTE2Yg==";
    let v = View {
        token: Some(TOKEN.as_bytes().to_vec()),
        ..view()
    };
    let challenge = |authorization: Option<&str>| {
        let mut req = Request::builder().method("POST").uri("/v1/drain");
        if let Some(a) = authorization {
            req = req.header(AUTHORIZATION, a);
        }
        let resp = now(respond_on(Surface::Full, &v, &req.body(()).unwrap()));
        (
            resp.status(),
            resp.headers()
                .get(WWW_AUTHENTICATE)
                .map(|h| h.to_str().unwrap().to_string()),
        )
    };
    assert_eq!(
        challenge(None),
        (
            StatusCode::UNAUTHORIZED,
            Some("Bearer realm=\"holdfast\"".into())
        )
    );
    let invalid = (
        StatusCode::UNAUTHORIZED,
        Some("Bearer realm=\"holdfast\", error=\"invalid_token\"".into()),
    );
    for wrong in [
        "Bearer c2VjcmV0LXRva2VuLTE2Yg=",
        "Bearer c2VjcmV0LXRva2VuLTE2Yg==x",
        "Bearer C2VjcmV0LXRva2VuLTE2Yg==",
        "Basic c2VjcmV0LXRva2VuLTE2Yg==",
        "Bearer",
        "Bearer ",
        "c2VjcmV0LXRva2VuLTE2Yg==",
    ] {
        assert_eq!(challenge(Some(wrong)), invalid, "{wrong}");
    }
    assert!(v.drains.lock().unwrap().is_empty(), "a wrong token drained");
    for right in [format!("Bearer {TOKEN}"), format!("bearer  {TOKEN} ")] {
        let (s, _, b) = call_on(Surface::Full, &v, "POST", "/v1/drain", Some(&right));
        assert_eq!(s, StatusCode::OK, "{right}: {b}");
    }
    assert_eq!(*v.drains.lock().unwrap(), vec![true, true]);
}

#[test]
fn the_token_comparison_is_exact() {
    assert!(same_token(b"abcdefghijklmnop", b"abcdefghijklmnop"));
    assert!(!same_token(b"abcdefghijklmnoq", b"abcdefghijklmnop"));
    assert!(!same_token(b"abcdefghijklmno", b"abcdefghijklmnop"));
    assert!(!same_token(b"", b"abcdefghijklmnop"));
    assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
    assert_eq!(bearer(b"BEARER   abc  "), Some(&b"abc"[..]));
    assert_eq!(bearer(b"Bearerabc"), None);
    assert_eq!(bearer(b"Bearer "), None);
    assert_eq!(bearer(b"Basic abc"), None);
}

/// The Unix socket serves the same API, the drain endpoints without a
/// token: a real server on a real socket.
#[tokio::test]
async fn the_local_socket_serves_drain_without_a_token() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let (listener, claim) = local::claim(dir.path()).unwrap();
    let v = Arc::new(view());
    let view: Arc<dyn StateView> = v.clone();
    tokio::spawn(serve_local(listener, view, std::future::pending()));
    let mut s = tokio::net::UnixStream::connect(claim.socket())
        .await
        .unwrap();
    s.write_all(
        b"POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(*v.drains.lock().unwrap(), vec![true]);
}
