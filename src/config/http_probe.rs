//! What an HTTP(S) probe (`probe = { url = "https://...", ca_file = ... }`)
//! is given: its URL, checked as the config is read, and its CA file,
//! read and parsed by the probe before each request (and by `holdfast
//! check` and the config load, which warn about one that cannot be used).
//!
//! The URL is parsed here rather than by a general URL library: a probe
//! needs a scheme (`http` or `https`), a host (an IPv4 address, a
//! bracketed IPv6 address or a DNS name), a port and the request target,
//! and every other form (user info, a fragment, a zone identifier, spaces)
//! is refused with a message that says why.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::read::{FileProblem, read_regular_file};

/// The longest URL accepted.
pub const MAX_URL_LEN: usize = 2048;

/// The largest CA file read: a system bundle of every public root is about
/// 220 KB.
pub const MAX_CA_FILE_LEN: u64 = 1024 * 1024;

/// The host of a probe URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlHost {
    /// An IPv4 address or a bracketed IPv6 address: connected to as it is,
    /// and a certificate must name it as an IP address SAN.
    Ip(IpAddr),
    /// A DNS name, resolved before each probe; sent as SNI and matched
    /// against the certificate's DNS names.
    Name(String),
}

impl fmt::Display for UrlHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlHost::Ip(IpAddr::V6(v6)) => write!(f, "[{v6}]"),
            UrlHost::Ip(IpAddr::V4(v4)) => write!(f, "{v4}"),
            UrlHost::Name(name) => f.write_str(name),
        }
    }
}

/// An `http://` or `https://` URL a probe GETs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    /// `https://`: the exchange is in TLS.
    pub https: bool,
    /// Where the probe connects, and the name its certificate must bear.
    pub host: UrlHost,
    /// The URL's port, or 80 / 443.
    pub port: u16,
    /// The request target: the path and query, `/` when the URL has none.
    pub target: String,
    /// The URL as the config writes it.
    text: String,
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl HttpUrl {
    /// The URL as the config writes it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The `Host` header's value (RFC 9110 §7.2): the host, and the port
    /// unless it is the scheme's default.
    pub fn host_header(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Parses a probe URL; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<HttpUrl, String> {
        let said = |why: String| format!("url \"{text}\" {why}");
        let err = |why: String| Err(said(why));
        if text.len() > MAX_URL_LEN {
            return Err(format!(
                "url is {} bytes long; a probe url is at most {MAX_URL_LEN}",
                text.len()
            ));
        }
        if let Some((at, c)) = text.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            return err(format!(
                "has {} at offset {at}; percent-encode it",
                match c {
                    ' ' => "a space".to_string(),
                    c if c.is_control() => format!("the control character {c:?}"),
                    c => format!("the character '{c}'"),
                }
            ));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return err(
                "has no scheme; write http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH"
                    .to_string(),
            );
        };
        let https = if scheme.eq_ignore_ascii_case("https") {
            true
        } else if scheme.eq_ignore_ascii_case("http") {
            false
        } else {
            return err(format!(
                "has scheme \"{scheme}\"; a probe url is http:// or https://"
            ));
        };
        if rest.contains('#') {
            return err(
                "has a fragment (#...), which is never sent to the server; remove it".to_string(),
            );
        }
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(end);
        if authority.contains('@') {
            return err(
                "has user info (USER@HOST); the probe sends no credentials: remove it".to_string(),
            );
        }
        let (host, port) = split_host_port(authority).map_err(said)?;
        let host = parse_host(host).map_err(said)?;
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(p) => parse_port(p).map_err(said)?,
        };
        let target = match target.chars().next() {
            None => "/".to_string(),
            Some('?') => format!("/{target}"),
            Some(_) => target.to_string(),
        };
        Ok(HttpUrl {
            https,
            host,
            port,
            target,
            text: text.to_string(),
        })
    }
}

/// `HOST[:PORT]`, `[V6][:PORT]`.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if authority.is_empty() {
        return Err("has no host".to_string());
    }
    if let Some(inner) = authority.strip_prefix('[') {
        let Some((v6, after)) = inner.split_once(']') else {
            return Err("has an IPv6 address without its closing ']'".to_string());
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| {
                format!("has \"{after}\" after the IPv6 address; expected :PORT")
            })?),
        };
        return Ok((&authority[..v6.len() + 2], port));
    }
    if authority.matches(':').count() > 1 {
        return Err(format!(
            "has host \"{authority}\"; an IPv6 address is written in brackets, its port after them: https://[2001:db8::1]:6443/"
        ));
    }
    Ok(match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

fn parse_host(host: &str) -> Result<UrlHost, String> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        if v6.contains('%') {
            return Err(format!(
                "has the IPv6 zone identifier in [{v6}]; zones are not supported: use a global or loopback address"
            ));
        }
        return v6
            .parse::<Ipv6Addr>()
            .map(|a| UrlHost::Ip(IpAddr::V6(a)))
            .map_err(|_| format!("has host [{v6}], which is not an IPv6 address"));
    }
    if host.is_empty() {
        return Err("has no host".to_string());
    }
    // A last label of digits only is an IPv4 address, or nothing: resolvers
    // read "1.2.3" and "127.1" as addresses, never as names.
    let last = host.rsplit('.').next().unwrap_or(host);
    if !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()) {
        return host
            .parse::<Ipv4Addr>()
            .map(|a| UrlHost::Ip(IpAddr::V4(a)))
            .map_err(|_| {
                format!("has host \"{host}\", which is not an IPv4 address (four decimal numbers 0..=255)")
            });
    }
    if let Some(why) = dns_name_problem(host) {
        return Err(format!(
            "has host \"{host}\", which is neither an IP address nor a DNS name: {why}"
        ));
    }
    Ok(UrlHost::Name(host.to_ascii_lowercase()))
}

/// Why `name` is not a DNS host name (RFC 1123 §2.1): labels of letters,
/// digits and hyphens, 1 to 63 characters, not starting or ending with a
/// hyphen; 253 characters in all.
fn dns_name_problem(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("longer than 253 characters".to_string());
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("it has an empty label".to_string());
        }
        if label.len() > 63 {
            return Some(format!(
                "its label \"{label}\" is longer than 63 characters"
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-'))
        {
            return Some(format!("'{c}' is not a letter, digit, '-' or '.'"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!("its label \"{label}\" starts or ends with '-'"));
        }
    }
    None
}

fn parse_port(port: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Err("has ':' but no port after it".to_string());
    }
    match port.parse::<u32>() {
        Ok(p @ 1..=65535) if port.bytes().all(|b| b.is_ascii_digit()) => Ok(p as u16),
        _ => Err(format!("has port \"{port}\"; a port is 1..=65535")),
    }
}

/// Reads a `ca_file`: a regular file of at most [`MAX_CA_FILE_LEN`]
/// bytes. Blocking: the probe calls it on tokio's blocking pool.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, String> {
    read_regular_file(path, MAX_CA_FILE_LEN).map_err(|problem| {
        let shown = path.display();
        match problem {
            FileProblem::Io(e) => format!("cannot read ca_file {shown}: {e}"),
            FileProblem::NotRegular(kind) => {
                format!("ca_file {shown} is {kind}, not a regular file")
            }
            FileProblem::TooLarge(_) => {
                format!("ca_file {shown} is larger than {MAX_CA_FILE_LEN} bytes")
            }
        }
    })
}

/// The trust anchors of a `ca_file`'s contents: every PEM `CERTIFICATE`
/// block in it (other blocks, a key or text around them, are skipped).
/// An error when it holds none that can be used.
pub fn ca_roots(path: &Path, pem: &[u8]) -> Result<RootCertStore, String> {
    let shown = path.display();
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(pem) {
        match item {
            Ok(cert) => certs.push(cert),
            Err(e) => {
                use rustls::pki_types::pem::Error as Pem;
                let why = match e {
                    Pem::MissingSectionEnd { end_marker } => format!(
                        "no \"-----END {}-----\" line closes a block",
                        String::from_utf8_lossy(&end_marker)
                    ),
                    Pem::IllegalSectionStart { line } => format!(
                        "the line \"{}\" starts no valid block",
                        String::from_utf8_lossy(&line[..line.len().min(64)])
                    ),
                    other => other.to_string(),
                };
                return Err(format!("ca_file {shown} is not valid PEM: {why}"));
            }
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "ca_file {shown} holds no certificate (no -----BEGIN CERTIFICATE----- block)"
        ));
    }
    let mut roots = RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(format!(
            "ca_file {shown} holds {ignored} certificate{} but none that can be a trust anchor (not X.509 DER inside the PEM)",
            if ignored == 1 { "" } else { "s" }
        ));
    }
    Ok(roots)
}

/// Reads and parses a `ca_file`: what `holdfast check` and the config load
/// warn about, and what the probe fails with.
pub fn load_ca_file(path: &Path) -> Result<RootCertStore, String> {
    ca_roots(path, &read_ca_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> HttpUrl {
        HttpUrl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn bad(text: &str) -> String {
        match HttpUrl::parse(text) {
            Ok(u) => panic!("{text} was accepted: {u:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn urls_name_scheme_host_port_and_target() {
        let u = ok("https://127.0.0.1:6443/readyz");
        assert!(u.https);
        assert_eq!(u.host, UrlHost::Ip("127.0.0.1".parse().unwrap()));
        assert_eq!((u.port, u.target.as_str()), (6443, "/readyz"));
        assert_eq!(u.host_header(), "127.0.0.1:6443");
        assert_eq!(u.to_string(), "https://127.0.0.1:6443/readyz");

        let u = ok("http://[::1]/healthz?verbose");
        assert!(!u.https);
        assert_eq!(u.host, UrlHost::Ip("::1".parse().unwrap()));
        assert_eq!((u.port, u.target.as_str()), (80, "/healthz?verbose"));
        assert_eq!(u.host_header(), "[::1]");

        let u = ok("HTTPS://Api.Example.com");
        assert!(u.https);
        assert_eq!(u.host, UrlHost::Name("api.example.com".into()));
        assert_eq!((u.port, u.target.as_str()), (443, "/"));
        assert_eq!(u.host_header(), "api.example.com");

        let u = ok("https://[2001:db8::7]:8443?x=1");
        assert_eq!(u.target, "/?x=1");
        assert_eq!(u.host_header(), "[2001:db8::7]:8443");
        assert_eq!(ok("http://localhost:80/").host_header(), "localhost");
        assert_eq!(ok("https://kube-apiserver.local:443/x").port, 443);
    }

    #[test]
    fn urls_that_cannot_be_probed_say_why() {
        let cases = [
            (
                "127.0.0.1:6443/readyz",
                "url \"127.0.0.1:6443/readyz\" has no scheme; write http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH",
            ),
            (
                "ftp://192.0.2.1/",
                "url \"ftp://192.0.2.1/\" has scheme \"ftp\"; a probe url is http:// or https://",
            ),
            ("https:///readyz", "url \"https:///readyz\" has no host"),
            ("https://:443/", "url \"https://:443/\" has no host"),
            (
                "https://user:pw@127.0.0.1/",
                "url \"https://user:pw@127.0.0.1/\" has user info (USER@HOST); the probe sends no credentials: remove it",
            ),
            (
                "https://127.0.0.1/readyz#x",
                "url \"https://127.0.0.1/readyz#x\" has a fragment (#...), which is never sent to the server; remove it",
            ),
            (
                "https://127.0.0.1:0/",
                "url \"https://127.0.0.1:0/\" has port \"0\"; a port is 1..=65535",
            ),
            (
                "https://127.0.0.1:65536/",
                "url \"https://127.0.0.1:65536/\" has port \"65536\"; a port is 1..=65535",
            ),
            (
                "https://127.0.0.1:+1/",
                "url \"https://127.0.0.1:+1/\" has port \"+1\"; a port is 1..=65535",
            ),
            (
                "https://127.0.0.1:/",
                "url \"https://127.0.0.1:/\" has ':' but no port after it",
            ),
            (
                "https://256.0.0.1/",
                "url \"https://256.0.0.1/\" has host \"256.0.0.1\", which is not an IPv4 address (four decimal numbers 0..=255)",
            ),
            (
                "https://127.1/",
                "url \"https://127.1/\" has host \"127.1\", which is not an IPv4 address (four decimal numbers 0..=255)",
            ),
            (
                "https://::1/",
                "url \"https://::1/\" has host \"::1\"; an IPv6 address is written in brackets, its port after them: https://[2001:db8::1]:6443/",
            ),
            (
                "https://[::1/",
                "url \"https://[::1/\" has an IPv6 address without its closing ']'",
            ),
            (
                "https://[::g]/",
                "url \"https://[::g]/\" has host [::g], which is not an IPv6 address",
            ),
            (
                "https://[fe80::1%25eth0]/",
                "url \"https://[fe80::1%25eth0]/\" has the IPv6 zone identifier in [fe80::1%25eth0]; zones are not supported: use a global or loopback address",
            ),
            (
                "https://[::1]x/",
                "url \"https://[::1]x/\" has \"x\" after the IPv6 address; expected :PORT",
            ),
            (
                "https://api_server/",
                "url \"https://api_server/\" has host \"api_server\", which is neither an IP address nor a DNS name: '_' is not a letter, digit, '-' or '.'",
            ),
            (
                "https://-api/",
                "url \"https://-api/\" has host \"-api\", which is neither an IP address nor a DNS name: its label \"-api\" starts or ends with '-'",
            ),
            (
                "https://a..b/",
                "url \"https://a..b/\" has host \"a..b\", which is neither an IP address nor a DNS name: it has an empty label",
            ),
            (
                "https://127.0.0.1/ready z",
                "url \"https://127.0.0.1/ready z\" has a space at offset 23; percent-encode it",
            ),
            (
                "https://127.0.0.1/réady",
                "url \"https://127.0.0.1/réady\" has the character 'é' at offset 19; percent-encode it",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(bad(text), want, "{text}");
        }
        let long = format!("https://127.0.0.1/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(
            bad(&long),
            format!(
                "url is {} bytes long; a probe url is at most 2048",
                long.len()
            )
        );
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.crt");
        let e = load_ca_file(&missing).unwrap_err();
        assert!(
            e.starts_with(&format!("cannot read ca_file {}: ", missing.display())),
            "{e}"
        );
        assert_eq!(
            load_ca_file(dir.path()).unwrap_err(),
            format!(
                "ca_file {} is a directory, not a regular file",
                dir.path().display()
            )
        );
        let key_only = dir.path().join("key.pem");
        std::fs::write(
            &key_only,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        assert_eq!(
            load_ca_file(&key_only).unwrap_err(),
            format!(
                "ca_file {} holds no certificate (no -----BEGIN CERTIFICATE----- block)",
                key_only.display()
            )
        );
        let cut = dir.path().join("cut.pem");
        std::fs::write(&cut, "-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap();
        assert_eq!(
            load_ca_file(&cut).unwrap_err(),
            format!(
                "ca_file {} is not valid PEM: no \"-----END CERTIFICATE-----\" line closes a block",
                cut.display()
            )
        );
        let junk = dir.path().join("junk.pem");
        std::fs::write(
            &junk,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert_eq!(
            load_ca_file(&junk).unwrap_err(),
            format!(
                "ca_file {} holds 1 certificate but none that can be a trust anchor (not X.509 DER inside the PEM)",
                junk.display()
            )
        );
    }
}
