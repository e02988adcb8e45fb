//! The codec against bgpkit-parser and zettabgp, in one criterion run, on
//! the same real UPDATEs: ExaBGP's test vectors and the UPDATEs of the
//! mrtparse sample dumps (BIRD, Quagga, OpenBGPD).
//!
//! A message is in the corpus when bgp-proto decodes it and re-encodes it
//! byte for byte in its session's context, and both other crates decode it
//! without error in the same context; the rest (ADD-PATH sessions, what one
//! of the crates rejects) is counted and left out, so that every crate does
//! the same work. Decode: wire bytes (marker included) → the crate's
//! message value. Encode: that value → wire bytes.
//!
//! Writes `codec-corpus.json` (message and octet counts) into criterion's
//! output directory for the report.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use bgp_proto::{Context, Message, hex};
use bgpkit_parser::models::AsnLength;
use bgpkit_parser::parser::bgp::messages::parse_bgp_message;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use zettabgp::prelude::{BgpTransportMode, BgpUpdateMessage};
use zettabgp::{BgpMessage, BgpSessionParams};

/// One UPDATE and whether its session speaks 4-octet AS numbers.
struct Sample {
    bytes: Vec<u8>,
    asn4: bool,
}

fn corpora() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpora")
}

fn exabgp_updates() -> Vec<Sample> {
    let text = std::fs::read_to_string(corpora().join("exabgp-qa/vectors.jsonl"))
        .expect("the ExaBGP vectors at corpora/ in the repository");
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["kind"] != "message"
            || v["add_path_capability"]
                .as_str()
                .is_some_and(|s| s.contains("send"))
        {
            continue;
        }
        let Some(h) = v["hex"].as_str() else { continue };
        let Ok(bytes) = hex::decode(h) else { continue };
        if bytes.len() > 18 && bytes[18] == 2 {
            out.push(Sample {
                bytes,
                asn4: v["asn4"] != false,
            });
        }
    }
    out
}

/// The BGP messages of the BGP4MP records of one MRT dump (RFC 6396 §4.4),
/// ADD-PATH subtypes left out.
fn mrt_updates(path: &Path) -> Vec<Sample> {
    let data = std::fs::read(path).expect("an MRT dump");
    let mut out = Vec::new();
    let mut i = 0;
    while i + 12 <= data.len() {
        let ty = u16::from_be_bytes([data[i + 4], data[i + 5]]);
        let subtype = u16::from_be_bytes([data[i + 6], data[i + 7]]);
        let len =
            u32::from_be_bytes([data[i + 8], data[i + 9], data[i + 10], data[i + 11]]) as usize;
        if i + 12 + len > data.len() {
            break;
        }
        let mut body = &data[i + 12..i + 12 + len];
        i += 12 + len;
        match ty {
            16 => {}
            17 if body.len() >= 4 => body = &body[4..],
            _ => continue,
        }
        // MESSAGE (1, 6: 2-octet AS fields) and MESSAGE_AS4 (4, 7).
        let as_len = match subtype {
            1 | 6 => 2,
            4 | 7 => 4,
            _ => continue,
        };
        if body.len() < 2 * as_len + 4 {
            continue;
        }
        let afi = u16::from_be_bytes([body[2 * as_len + 2], body[2 * as_len + 3]]);
        let ip_len = if afi == 2 { 16 } else { 4 };
        let at = 2 * as_len + 4 + 2 * ip_len;
        if body.len() < at + 19 {
            continue;
        }
        let message = body[at..].to_vec();
        if message[18] == 2 {
            out.push(Sample {
                bytes: message,
                asn4: as_len == 4,
            });
        }
    }
    out
}

fn ctx(asn4: bool) -> Context {
    if asn4 {
        Context::default()
    } else {
        Context::two_octet_as()
    }
}

fn asn_len(asn4: bool) -> AsnLength {
    if asn4 {
        AsnLength::Bits32
    } else {
        AsnLength::Bits16
    }
}

fn zetta_params(asn4: bool) -> BgpSessionParams {
    let mut p = BgpSessionParams::new(
        65000,
        90,
        BgpTransportMode::IPv4,
        std::net::Ipv4Addr::new(192, 0, 2, 1),
        Vec::new(),
    );
    p.has_as32bit = asn4;
    p
}

fn zetta_decode(p: &BgpSessionParams, bytes: &[u8]) -> Option<BgpUpdateMessage> {
    let (kind, len) = p.decode_message_head(bytes).ok()?;
    if kind != zettabgp::prelude::BgpMessageType::Update || bytes.len() < 19 + len {
        return None;
    }
    let mut u = BgpUpdateMessage::new();
    u.decode_from(p, &bytes[19..19 + len]).ok()?;
    Some(u)
}

fn zetta_encode(p: &BgpSessionParams, u: &BgpUpdateMessage, buf: &mut [u8]) -> usize {
    let Ok(len) = u.encode_to(p, &mut buf[19..]) else {
        return 0;
    };
    p.prepare_message_buf(buf, zettabgp::prelude::BgpMessageType::Update, len)
        .unwrap_or(0)
}

fn corpus() -> (Vec<Sample>, Refused) {
    let mut all = exabgp_updates();
    let dir = corpora().join("mrtparse-samples/samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the mrtparse samples")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_none_or(|e| e != "conf"))
        .collect();
    files.sort();
    for f in files {
        all.extend(mrt_updates(&f));
    }
    let total = all.len();
    // zettabgp panics on some real UPDATEs (an index out of bounds in its
    // MP_REACH decoder): catch it, count it, leave the message out.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut refused = Refused::default();
    let kept: Vec<Sample> = all
        .into_iter()
        .filter(|s| {
            let c = ctx(s.asn4);
            let ours = Message::decode(&s.bytes, &c)
                .ok()
                .and_then(|m| m.encode(&c).ok())
                .is_some_and(|b| b == s.bytes);
            // Some(true): decoded; Some(false): an error; None: a panic.
            let bgpkit = std::panic::catch_unwind(|| {
                let mut b = Bytes::copy_from_slice(&s.bytes);
                parse_bgp_message(&mut b, false, &asn_len(s.asn4)).is_ok()
            })
            .ok();
            // zettabgp must also encode what it decoded (it panics on some
            // attributes it decodes): every crate gets the same messages
            // for both operations.
            let zetta = std::panic::catch_unwind(|| {
                let p = zetta_params(s.asn4);
                let mut buf = vec![0u8; 65536];
                zetta_decode(&p, &s.bytes).is_some_and(|u| zetta_encode(&p, &u, &mut buf) > 0)
            })
            .ok();
            refused.bgp_proto += u64::from(!ours);
            refused.bgpkit += u64::from(bgpkit != Some(true));
            refused.bgpkit_panics += u64::from(bgpkit.is_none());
            refused.zettabgp += u64::from(zetta != Some(true));
            refused.zettabgp_panics += u64::from(zetta.is_none());
            ours && bgpkit == Some(true) && zetta == Some(true)
        })
        .collect();
    std::panic::set_hook(hook);
    refused.total = (total - kept.len()) as u64;
    (kept, refused)
}

/// Messages left out of the corpus, and which crate refused them.
#[derive(Default, Debug)]
struct Refused {
    total: u64,
    bgp_proto: u64,
    bgpkit: u64,
    bgpkit_panics: u64,
    zettabgp: u64,
    zettabgp_panics: u64,
}

fn bench(c: &mut Criterion) {
    let (samples, refused) = corpus();
    let octets: usize = samples.iter().map(|s| s.bytes.len()).sum();
    eprintln!(
        "corpus: {} UPDATEs, {octets} octets, left out: {refused:?}",
        samples.len()
    );
    let out_dir = PathBuf::from(std::env::var("CRITERION_HOME").unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/criterion")
            .display()
            .to_string()
    }));
    std::fs::create_dir_all(&out_dir).expect("criterion's directory");
    std::fs::write(
        out_dir.join("codec-corpus.json"),
        serde_json::json!({
            "messages": samples.len(),
            "bytes": octets,
            "excluded": refused.total,
            "refused_by": {
                "bgp-proto": refused.bgp_proto,
                "bgpkit-parser": refused.bgpkit,
                "bgpkit-parser panics": refused.bgpkit_panics,
                "zettabgp": refused.zettabgp,
                "zettabgp panics": refused.zettabgp_panics,
            },
        })
        .to_string(),
    )
    .expect("write codec-corpus.json");

    let contexts: Vec<Context> = samples.iter().map(|s| ctx(s.asn4)).collect();
    let asn_lens: Vec<AsnLength> = samples.iter().map(|s| asn_len(s.asn4)).collect();
    let zparams: Vec<BgpSessionParams> = samples.iter().map(|s| zetta_params(s.asn4)).collect();
    let shared: Vec<Bytes> = samples
        .iter()
        .map(|s| Bytes::copy_from_slice(&s.bytes))
        .collect();

    let mut g = c.benchmark_group("codec");
    g.throughput(Throughput::Bytes(octets as u64));

    g.bench_function(BenchmarkId::new("decode", "bgp-proto"), |b| {
        b.iter(|| {
            for (s, c) in samples.iter().zip(&contexts) {
                black_box(Message::decode(black_box(&s.bytes), c).unwrap());
            }
        })
    });
    g.bench_function(BenchmarkId::new("decode", "bgpkit-parser"), |b| {
        b.iter(|| {
            for (bytes, a) in shared.iter().zip(&asn_lens) {
                // A Bytes clone is a reference count, not a copy.
                let mut input = black_box(bytes.clone());
                black_box(parse_bgp_message(&mut input, false, a).unwrap());
            }
        })
    });
    g.bench_function(BenchmarkId::new("decode", "zettabgp"), |b| {
        b.iter(|| {
            for (s, p) in samples.iter().zip(&zparams) {
                black_box(zetta_decode(p, black_box(&s.bytes)).unwrap());
            }
        })
    });

    let ours: Vec<Message> = samples
        .iter()
        .zip(&contexts)
        .map(|(s, c)| Message::decode(&s.bytes, c).unwrap())
        .collect();
    let theirs: Vec<_> = shared
        .iter()
        .zip(&asn_lens)
        .map(|(b, a)| parse_bgp_message(&mut b.clone(), false, a).unwrap())
        .collect();
    let zetta: Vec<BgpUpdateMessage> = samples
        .iter()
        .zip(&zparams)
        .map(|(s, p)| zetta_decode(p, &s.bytes).unwrap())
        .collect();

    g.bench_function(BenchmarkId::new("encode", "bgp-proto"), |b| {
        let mut out = Vec::with_capacity(8192);
        b.iter(|| {
            for (m, c) in ours.iter().zip(&contexts) {
                out.clear();
                m.encode_into(c, &mut out).unwrap();
                black_box(&out);
            }
        })
    });
    g.bench_function(BenchmarkId::new("encode", "bgpkit-parser"), |b| {
        b.iter(|| {
            for (m, a) in theirs.iter().zip(&asn_lens) {
                black_box(m.encode(*a));
            }
        })
    });
    g.bench_function(BenchmarkId::new("encode", "zettabgp"), |b| {
        let mut buf = vec![0u8; 65536];
        b.iter(|| {
            for (m, p) in zetta.iter().zip(&zparams) {
                black_box(zetta_encode(p, m, &mut buf));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
