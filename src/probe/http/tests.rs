//! The HTTP exchange against servers on loopback that answer well, badly
//! or not at all. (HTTPS against real certificates: tests/http_probe.rs,
//! which makes a CA with openssl.)

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn url(text: &str) -> HttpUrl {
    HttpUrl::parse(text).expect("a probe url")
}

/// A server on 127.0.0.1 that reads one request, hands it to `answer` and
/// writes back what that returns; the request text comes back on the
/// returned channel.
async fn server<F>(answer: F) -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>)
where
    F: Fn(&str) -> Vec<u8> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let (tx, answer) = (tx.clone(), answer.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&request).into_owned();
                let reply = answer(&request);
                let _ = tx.send(request);
                let _ = s.write_all(&reply).await;
                // Held open a while: the probe must not wait for the end.
                tokio::time::sleep(Duration::from_secs(5)).await;
            });
        }
    });
    (port, rx)
}

async fn probe(u: &str, timeout: Duration) -> Result<(), String> {
    HttpProbe::new(url(u), None).probe(timeout).await
}

#[tokio::test]
async fn a_2xx_status_passes_and_the_request_is_a_plain_get() {
    let (port, mut requests) =
        server(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
    let u = format!("http://127.0.0.1:{port}/readyz?verbose");
    assert_eq!(probe(&u, Duration::from_secs(2)).await, Ok(()));
    let request = requests.recv().await.unwrap();
    assert_eq!(
        request,
        format!(
            "GET /readyz?verbose HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: holdfast/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let (port, _) = server(|_| b"HTTP/1.0 204\r\n\r\n".to_vec()).await;
    assert_eq!(
        probe(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).await,
        Ok(())
    );
}

#[tokio::test]
async fn any_other_status_fails_with_its_code() {
    for (reply, want) in [
        (
            &b"HTTP/1.1 503 Service Unavailable\r\n\r\n"[..],
            "HTTP 503 Service Unavailable",
        ),
        (b"HTTP/1.1 500\r\n\r\n", "HTTP 500"),
        (
            b"HTTP/1.1 301 Moved\r\nLocation: /x\r\n\r\n",
            "HTTP 301 Moved",
        ),
        (b"HTTP/1.1 404 Not\x01Found\r\n\r\n", "HTTP 404 Not?Found"),
        (
            b"HTTP/1.1 199 Odd\r\n\r\nHTTP/1.1 401 Unauthorized\r\n\r\n",
            "HTTP 401 Unauthorized",
        ),
    ] {
        let (port, _) = server(move |_| reply.to_vec()).await;
        assert_eq!(
            probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(2)).await,
            Err(want.to_string()),
            "{}",
            String::from_utf8_lossy(reply)
        );
    }
}

#[tokio::test]
async fn interim_responses_come_before_the_final_status() {
    let (port, _) = server(|_| {
        b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"
            .to_vec()
    })
    .await;
    assert_eq!(
        probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(2)).await,
        Ok(())
    );
}

#[tokio::test]
async fn answers_that_are_not_http_fail_with_what_they_were() {
    let cases: [(&[u8], &str); 4] = [
        (
            b"SSH-2.0-OpenSSH_9.6\r\n",
            "not an HTTP response: it begins \"SSH-2.0-OpenSSH_9.6\"",
        ),
        (
            b"HTTP/1.1 2000 OK\r\n\r\n",
            "not an HTTP response: it begins \"HTTP/1.1 2000 OK\"",
        ),
        (
            b"HTTP/1.1 20",
            "the server closed the connection in the status line",
        ),
        (b"", "the server closed the connection without answering"),
    ];
    for (reply, want) in cases {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(reply).await;
            // Closed at once.
        });
        assert_eq!(
            probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(2)).await,
            Err(want.to_string())
        );
    }
}

/// A server that sends a status line without end, or interim responses
/// without end: the probe stops reading at its bounds, long before the
/// timeout.
#[tokio::test]
async fn endless_answers_are_cut_off() {
    for (chunk, want) in [
        (
            &b"HTTP/1.1 200 OKOKOKOKOKOKOKOKOKOKOKOK"[..],
            "the server's status line is longer than 1024 bytes".to_string(),
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\n",
            format!("no final status line in the first {HEAD_MAX} bytes of the answer"),
        ),
        (
            b"HTTP/1.1 100 Continue\r\nX-Header: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "the server's header line is longer than 1024 bytes".to_string(),
        ),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = sent.clone();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            // The status line's start once, then its continuation forever.
            let _ = s.write_all(chunk).await;
            let filler = if chunk.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n") {
                chunk.to_vec()
            } else {
                b"OKOKOKOKOKOKOKOK".to_vec()
            };
            while s.write_all(&filler).await.is_ok() {
                counted.fetch_add(filler.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        let started = Instant::now();
        assert_eq!(
            probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(5)).await,
            Err(want)
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}

/// A server that accepts and never answers fails the probe when its
/// timeout is up, saying where it waited.
#[tokio::test]
async fn a_silent_server_fails_when_the_timeout_is_up() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (s, _) = listener.accept().await.unwrap();
            held.push(s);
        }
    });
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(3),
        probe(
            &format!("http://127.0.0.1:{port}/"),
            Duration::from_millis(300),
        ),
    )
    .await
    .expect("the probe ends by its own timeout");
    let took = started.elapsed();
    assert_eq!(
        r,
        Err("timed out after 300ms waiting for the status line".to_string())
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(800),
        "{took:?}"
    );
    // The TLS handshake is under the same timeout.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    // Any certificate will do: the handshake never starts.
    std::fs::write(&ca, TEST_CA).unwrap();
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(3),
        HttpProbe::new(url(&format!("https://127.0.0.1:{port}/")), Some(ca))
            .probe(Duration::from_millis(300)),
    )
    .await
    .expect("the probe ends by its own timeout");
    assert_eq!(
        r,
        Err("timed out after 300ms in the TLS handshake".to_string())
    );
    assert!(started.elapsed() < Duration::from_millis(800));
}

#[tokio::test]
async fn a_closed_port_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    assert_eq!(
        probe(&format!("http://127.0.0.1:{port}/"), Duration::from_secs(1)).await,
        Err(format!("connect to 127.0.0.1:{port}: refused"))
    );
}

/// A CA file that cannot be used fails each probe with the reason, and
/// one that appears later is used from the next probe on.
#[tokio::test]
async fn an_unusable_ca_file_fails_the_probe_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut p = HttpProbe::new(
        url(&format!("https://127.0.0.1:{port}/readyz")),
        Some(ca.clone()),
    );
    let r = p.probe(Duration::from_secs(1)).await.unwrap_err();
    assert!(
        r.starts_with(&format!("cannot read ca_file {}: ", ca.display())),
        "{r}"
    );
    std::fs::write(&ca, "not a certificate\n").unwrap();
    assert_eq!(
        p.probe(Duration::from_secs(1)).await,
        Err(format!(
            "ca_file {} holds no certificate (no -----BEGIN CERTIFICATE----- block)",
            ca.display()
        ))
    );
    // A usable one: the probe goes on to connect (and the server, which
    // speaks no TLS, fails the handshake).
    std::fs::write(&ca, TEST_CA).unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf).await;
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    });
    let r = p.probe(Duration::from_secs(1)).await.unwrap_err();
    assert!(r.starts_with("TLS"), "{r}");
}

#[test]
fn status_lines_are_read_as_rfc_9112_writes_them() {
    assert_eq!(status(b"HTTP/1.1 200 OK"), Ok((200, Some("OK".into()))));
    assert_eq!(status(b"HTTP/1.1 200 "), Ok((200, None)));
    assert_eq!(status(b"HTTP/1.0 503"), Ok((503, None)));
    assert_eq!(
        status(b"HTTP/2.0 429 Too Many Requests"),
        Ok((429, Some("Too Many Requests".into())))
    );
    for bad in [
        &b"HTTP/1.1 20 OK"[..],
        b"HTTP/1.1 2000",
        b"HTTP/1.1200 OK",
        b"HTTP/11 200 OK",
        b"http/1.1 200 OK",
        b"",
    ] {
        assert!(status(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}

/// A self-signed CA certificate (`openssl req -x509`), for tests that need
/// a CA file that parses; no test connects with it.
const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBjDCCATOgAwIBAgIUXnbUL5UHiCNpZJbVUFl1RZUpFH4wCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQaG9sZGZhc3QgdGVzdCBDQTAgFw0yNjEyMDcxNzIwMjlaGA8y
MTI2MTExMzE3MjAyOVowGzEZMBcGA1UEAwwQaG9sZGZhc3QgdGVzdCBDQTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABNLYp0CwUkRn+Vpq/cDyS1HymCcBoK1vpvxf
H+79HWyUuLiHuI0Xu7XjUY2oScChSICPgGG/IpYGiUUHqQrs4SCjUzBRMB0GA1Ud
DgQWBBSIFOm7bE6JOPnbRVoDSTc3+hDEHzAfBgNVHSMEGDAWgBSIFOm7bE6JOPnb
RVoDSTc3+hDEHzAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIBbN
4HNr82bvZ6KwepvgdhjXf00y+EJJLO7mnN0aHsulAiBIhWq0wieGflAVW+Hm60DY
d11i0u5IMlJeBJ8cGK27kw==
-----END CERTIFICATE-----
";
