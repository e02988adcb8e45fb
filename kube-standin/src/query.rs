//! URL query strings as the API server reads them
//! (`application/x-www-form-urlencoded`: `+` is a space, `%XX` a byte).

/// Decoded `name=value` pairs in the order they appeared. kube-rs sends
/// queries that begin with `?&`; empty pieces are skipped.
pub(crate) fn parse(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| match piece.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(piece), String::new()),
        })
        .collect()
}

/// The last value given for `name`, as the Go API server takes it.
pub(crate) fn get<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Go's `strconv.ParseBool`, which the API server uses for `watch=` and
/// `allowWatchBookmarks=`.
pub(crate) fn truthy(value: Option<&str>) -> bool {
    matches!(value, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}

/// Percent-decoding; a malformed escape is kept as it stands.
pub(crate) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|c| hex_val(*c));
                let lo = bytes.get(i + 2).and_then(|c| hex_val(*c));
                if let (Some(hi), Some(lo)) = (hi, lo) {
                    out.push(hi << 4 | lo);
                    i += 3;
                } else {
                    out.push(b'%');
                    i += 1;
                }
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Lower-case hex of a string's bytes; used to make opaque continue tokens
/// that need no escaping in a URL.
pub(crate) fn hex_encode(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn hex_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let raw: Option<Vec<u8>> = bytes
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some(hex_val(*hi)? << 4 | hex_val(*lo)?),
            _ => None,
        })
        .collect();
    String::from_utf8(raw?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_rs_watch_query() {
        let q = "&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Dnode%2D1\
                 &labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&allowWatchBookmarks=true&resourceVersion=0";
        let pairs = parse(q);
        assert_eq!(get(&pairs, "watch"), Some("true"));
        assert_eq!(get(&pairs, "fieldSelector"), Some("metadata.name=node-1"));
        assert_eq!(get(&pairs, "labelSelector"), Some("app=web,tier in (a,b)"));
        assert_eq!(get(&pairs, "resourceVersion"), Some("0"));
        assert_eq!(get(&pairs, "limit"), None);
        assert!(truthy(get(&pairs, "allowWatchBookmarks")));
        assert!(!truthy(get(&pairs, "sendInitialEvents")));
    }

    #[test]
    fn malformed_escapes_survive() {
        assert_eq!(decode("a%zz%4"), "a%zz%4");
        assert_eq!(decode("%41%62"), "Ab");
    }

    #[test]
    fn hex_round_trip() {
        for s in ["", "default", "kube-system/x y"] {
            assert_eq!(hex_decode(&hex_encode(s)).as_deref(), Some(s));
        }
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
    }
}
