//! Hex helpers for tests, corpora and `holdfast decode`.

/// Decodes hex, ignoring whitespace and ':' separators (ExaBGP's corpora
/// put colons between fields).
pub fn decode(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16);
            let lo = (pair[1] as char).to_digit(16);
            match (hi, lo) {
                (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
                _ => Err(format!(
                    "not a hex digit in {:?}",
                    String::from_utf8_lossy(pair)
                )),
            }
        })
        .collect()
}

/// Lower-case hex with no separators.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_separators() {
        assert_eq!(super::decode("ff:FF 0a").unwrap(), vec![0xff, 0xff, 0x0a]);
        assert_eq!(super::encode(&[0xde, 0xad, 0x01]), "dead01");
        assert!(super::decode("abc").is_err());
        assert!(super::decode("zz").is_err());
    }
}
