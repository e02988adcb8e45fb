//! The protocol on the wire, read with a bare TCP socket: chunked watch
//! streams, the ERROR event for 410, abrupt and clean stream ends, Status
//! bodies, discovery. Plain `#[test]`s: the stand-in needs no runtime of
//! the caller's.

use k8s_openapi::api::core::v1::Service;
use kube_standin::{StandIn, fixtures};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The whole body (Content-Length or chunked).
    fn json(mut self) -> Value {
        let body = if let Some(len) = self.header("content-length") {
            let mut buf = vec![0; len.parse().expect("length")];
            self.reader.read_exact(&mut buf).expect("body");
            buf
        } else {
            let mut buf = Vec::new();
            while let Chunk::Data(d) = self.chunk() {
                buf.extend(d);
            }
            buf
        };
        serde_json::from_slice(&body).expect("JSON body")
    }

    /// The next chunk of a chunked body.
    fn chunk(&mut self) -> Chunk {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => return Chunk::Cut,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("no chunk within the read timeout")
            }
            Err(_) => return Chunk::Cut,
        }
        let size = usize::from_str_radix(line.trim(), 16).expect("chunk size line");
        if size == 0 {
            return Chunk::End;
        }
        let mut data = vec![0; size + 2];
        if self.reader.read_exact(&mut data).is_err() {
            return Chunk::Cut;
        }
        data.truncate(size);
        Chunk::Data(data)
    }

    /// The next watch event: one JSON line (the stand-in sends one per chunk).
    fn event(&mut self) -> Value {
        match self.chunk() {
            Chunk::Data(d) => {
                assert_eq!(d.last(), Some(&b'\n'), "events are newline-terminated");
                serde_json::from_slice(&d).expect("event JSON")
            }
            other => panic!("expected an event, got {other:?}"),
        }
    }
}

#[derive(Debug)]
enum Chunk {
    Data(Vec<u8>),
    /// The terminating zero-size chunk: a clean end.
    End,
    /// The connection closed without it.
    Cut,
}

fn request(
    standin: &StandIn,
    method: &str,
    target: &str,
    body: Option<(&str, &Value)>,
) -> Response {
    let mut stream = TcpStream::connect(standin.addr()).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: standin\r\nConnection: close\r\n");
    let payload = body.map(|(ct, v)| (ct, serde_json::to_vec(v).expect("json")));
    if let Some((ct, bytes)) = &payload {
        req.push_str(&format!(
            "Content-Type: {ct}\r\nContent-Length: {}\r\n",
            bytes.len()
        ));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("write");
    if let Some((_, bytes)) = &payload {
        stream.write_all(bytes).expect("write body");
    }
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).expect("status line");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("header");
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Response {
        status,
        headers,
        reader,
    }
}

fn get(standin: &StandIn, target: &str) -> Response {
    request(standin, "GET", target, None)
}

#[test]
fn watch_stream_is_chunked_json_lines_from_the_given_version() {
    let s = StandIn::start().expect("start");
    let before = s
        .create(&fixtures::load_balancer_service("default", "old", &[]))
        .expect("old");
    let rv = s.resource_version();
    s.create(&fixtures::load_balancer_service("default", "new", &[]))
        .expect("new");
    s.create(&fixtures::load_balancer_service("other", "elsewhere", &[]))
        .expect("other ns");

    let mut w = get(
        &s,
        &format!("/api/v1/namespaces/default/services?watch=1&resourceVersion={rv}"),
    );
    assert_eq!(w.status, 200);
    assert_eq!(w.header("transfer-encoding"), Some("chunked"));
    assert_eq!(w.header("content-type"), Some("application/json"));
    let added = w.event();
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["metadata"]["name"], "new");
    assert_eq!(added["object"]["kind"], "Service");

    s.patch_status::<Service>(
        Some("default"),
        "old",
        &json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.4"}]}}),
    )
    .expect("patch");
    let modified = w.event();
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(
        modified["object"]["metadata"]["uid"],
        json!(before.metadata.uid)
    );
    assert_eq!(
        modified["object"]["status"]["loadBalancer"]["ingress"][0]["ip"],
        "198.51.100.4"
    );

    let last = s.delete::<Service>(Some("default"), "old").expect("delete");
    let deleted = w.event();
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(
        deleted["object"]["metadata"]["resourceVersion"],
        json!(last.metadata.resource_version)
    );
    assert_eq!(
        deleted["object"]["metadata"]["resourceVersion"],
        json!(s.resource_version().to_string())
    );
}

#[test]
fn watch_without_version_starts_with_the_current_state() {
    let s = StandIn::start().expect("start");
    s.create(&fixtures::node("n1", "192.0.2.1", &[]))
        .expect("n1");
    s.create(&fixtures::node("n2", "192.0.2.2", &[]))
        .expect("n2");
    let mut w = get(
        &s,
        "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn2",
    );
    let first = w.event();
    assert_eq!(
        (
            first["type"].as_str(),
            first["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("n2"))
    );
    s.set_bookmark_interval(Duration::from_millis(100));
    // Without allowWatchBookmarks there are no bookmarks; the next event is n2's.
    s.patch::<k8s_openapi::api::core::v1::Node>(
        None,
        "n1",
        &json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .expect("patch n1");
    std::thread::sleep(Duration::from_millis(300));
    s.patch::<k8s_openapi::api::core::v1::Node>(
        None,
        "n2",
        &json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .expect("patch n2");
    let next = w.event();
    assert_eq!(
        (
            next["type"].as_str(),
            next["object"]["metadata"]["name"].as_str()
        ),
        (Some("MODIFIED"), Some("n2"))
    );
}

#[test]
fn bookmarks_and_the_initial_events_end_marker() {
    let s = StandIn::start().expect("start");
    s.set_bookmark_interval(Duration::from_millis(100));
    s.create(&fixtures::node("n1", "192.0.2.1", &[]))
        .expect("n1");
    let mut w = get(
        &s,
        "/api/v1/nodes?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
    );
    assert_eq!(w.event()["type"], "ADDED");
    let end = w.event();
    assert_eq!(end["type"], "BOOKMARK");
    assert_eq!(
        end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        end["object"]["metadata"]["resourceVersion"],
        s.resource_version().to_string()
    );
    let periodic = w.event();
    assert_eq!(periodic["type"], "BOOKMARK");
    assert_eq!(periodic["object"]["kind"], "Node");
    assert_eq!(periodic["object"]["apiVersion"], "v1");
    assert!(periodic["object"]["metadata"].get("annotations").is_none());
}

#[test]
fn compacted_version_gets_an_error_event_with_410() {
    let s = StandIn::start().expect("start");
    s.create(&fixtures::node("n1", "192.0.2.1", &[]))
        .expect("n1");
    let old = s.resource_version();
    let point = s.compact();
    assert!(point > old);
    let mut w = get(
        &s,
        &format!("/api/v1/nodes?watch=true&resourceVersion={old}"),
    );
    assert_eq!(w.status, 200);
    let err = w.event();
    assert_eq!(err["type"], "ERROR");
    assert_eq!(err["object"]["kind"], "Status");
    assert_eq!(err["object"]["code"], 410);
    assert_eq!(err["object"]["reason"], "Expired");
    assert_eq!(
        err["object"]["message"],
        format!("too old resource version: {old} ({point})")
    );
    assert!(
        matches!(w.chunk(), Chunk::End),
        "the stream ends after the error"
    );
    // From the compaction point on, watching works.
    let mut ok = get(
        &s,
        &format!("/api/v1/nodes?watch=true&resourceVersion={point}"),
    );
    s.create(&fixtures::node("n2", "192.0.2.2", &[]))
        .expect("n2");
    assert_eq!(ok.event()["object"]["metadata"]["name"], "n2");
}

#[test]
fn drop_cuts_streams_and_close_ends_them() {
    let s = StandIn::start().expect("start");
    let mut a = get(&s, "/api/v1/services?watch=true");
    wait(|| s.open_watches() == 1);
    s.drop_watches();
    assert!(
        matches!(a.chunk(), Chunk::Cut),
        "dropped: no terminating chunk"
    );
    wait(|| s.open_watches() == 0);
    let mut b = get(&s, "/api/v1/services?watch=true");
    wait(|| s.open_watches() == 1);
    s.close_watches();
    assert!(matches!(b.chunk(), Chunk::End), "closed: terminating chunk");
    wait(|| s.open_watches() == 0);
    let mut c = get(&s, "/api/v1/services?watch=true&timeoutSeconds=1");
    let started = Instant::now();
    assert!(
        matches!(c.chunk(), Chunk::End),
        "timeoutSeconds ends the stream cleanly"
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn errors_are_status_objects() {
    let s = StandIn::start().expect("start");
    let missing = get(&s, "/api/v1/namespaces/default/services/nope");
    assert_eq!(missing.status, 404);
    let body = missing.json();
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "NotFound");
    assert_eq!(body["message"], "services \"nope\" not found");

    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
    let created = request(
        &s,
        "POST",
        "/api/v1/namespaces/default/services",
        Some(("application/json", &svc)),
    );
    assert_eq!(created.status, 201);
    let created = created.json();
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["generation"], 1);
    let again = request(
        &s,
        "POST",
        "/api/v1/namespaces/default/services",
        Some(("application/json", &svc)),
    );
    assert_eq!(
        (again.status, again.json()["reason"].clone()),
        (409, json!("AlreadyExists"))
    );

    // Optimistic concurrency: a PUT with a stale resourceVersion conflicts.
    let mut stale = created.clone();
    s.patch::<Service>(
        Some("default"),
        "web",
        &json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .expect("bump");
    stale["spec"]["ports"][0]["port"] = json!(8080);
    let put = request(
        &s,
        "PUT",
        "/api/v1/namespaces/default/services/web",
        Some(("application/json", &stale)),
    );
    assert_eq!(
        (put.status, put.json()["reason"].clone()),
        (409, json!("Conflict"))
    );
    // Without it, the PUT wins and bumps generation; the status is left alone.
    stale["metadata"]
        .as_object_mut()
        .map(|m| m.remove("resourceVersion"));
    stale["status"] = json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}]}});
    let put = request(
        &s,
        "PUT",
        "/api/v1/namespaces/default/services/web",
        Some(("application/json", &stale)),
    );
    assert_eq!(put.status, 200);
    let put = put.json();
    assert_eq!(put["metadata"]["generation"], 2);
    assert!(put["status"].get("loadBalancer").is_none(), "{put}");
    // The status subresource changes the status only.
    let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}]}}, "spec": {"ports": []}});
    let st = request(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/services/web/status",
        Some(("application/merge-patch+json", &patch)),
    );
    assert_eq!(st.status, 200);
    let st = st.json();
    assert_eq!(
        st["status"]["loadBalancer"]["ingress"][0]["ip"],
        "198.51.100.1"
    );
    assert_eq!(st["spec"]["ports"][0]["port"], 8080);

    let bad = get(&s, "/api/v1/services?labelSelector=app+in+%28a");
    assert_eq!(bad.status, 400);
    let unknown = get(&s, "/api/v1/widgets");
    assert_eq!(unknown.status, 404);
    let bad_patch = request(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/services/web",
        Some(("text/plain", &json!({}))),
    );
    assert_eq!(bad_patch.status, 415);
}

#[test]
fn discovery_documents() {
    let s = StandIn::start().expect("start");
    let version = get(&s, "/version").json();
    assert_eq!(version["major"], "1");
    assert_eq!(get(&s, "/api").json()["versions"], json!(["v1"]));
    let groups = get(&s, "/apis").json();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(
        names.contains(&"discovery.k8s.io") && names.contains(&"events.k8s.io"),
        "{names:?}"
    );
    let core = get(&s, "/api/v1").json();
    let resources: Vec<&str> = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for r in [
        "services",
        "services/status",
        "nodes",
        "namespaces",
        "events",
    ] {
        assert!(resources.contains(&r), "{r} in {resources:?}");
    }
    let slices = get(&s, "/apis/discovery.k8s.io/v1").json();
    assert_eq!(slices["resources"][0]["name"], "endpointslices");
    assert_eq!(slices["resources"][0]["namespaced"], true);
}

#[test]
fn requests_are_logged() {
    let s = StandIn::start().expect("start");
    get(&s, "/api/v1/nodes?limit=5&labelSelector=rack%3Dr1").json();
    let log = s.requests();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].method, "GET");
    assert_eq!(log[0].path, "/api/v1/nodes");
    assert_eq!(log[0].query, "limit=5&labelSelector=rack%3Dr1");
    assert_eq!(log[0].param("labelSelector").as_deref(), Some("rack=r1"));
    assert!(!log[0].is_watch());
    s.clear_requests();
    assert!(s.requests().is_empty());
}

#[test]
fn refused_connections_get_no_answer() {
    let s = StandIn::start().expect("start");
    s.refuse();
    let mut stream = TcpStream::connect(s.addr()).expect("the listener still accepts");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let _ = stream.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = Vec::new();
    let n = stream.read_to_end(&mut buf).unwrap_or(0);
    assert_eq!(
        n,
        0,
        "closed without an answer: {:?}",
        String::from_utf8_lossy(&buf)
    );
    s.resume();
    assert_eq!(get(&s, "/version").status, 200);
}

fn wait(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "condition not met within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
