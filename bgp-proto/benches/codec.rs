//! Decode and encode throughput over the real UPDATEs of the corpora
//! (ExaBGP's vectors and the mrtparse dumps), plus a bulk UPDATE of 800
//! /32s like the ones holdfast sends. `cargo bench -p bgp-proto`.

use std::hint::black_box;
use std::path::PathBuf;

use bgp_proto::{
    AsPath, AttrValue, Context, Family, Message, Nlri, Origin, PathAttribute, hex, pack,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn corpus_updates() -> Vec<(Vec<u8>, Context)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpora");
    let text = std::fs::read_to_string(root.join("exabgp-qa/vectors.jsonl"))
        .expect("corpora at corpora/ in the repository");
    let mut out = Vec::new();
    for line in text.lines() {
        // The vectors are one JSON object per line; only "hex" and the
        // two context hints are needed, so avoid a JSON dependency here.
        let Some(h) = line
            .split("\"hex\": \"")
            .nth(1)
            .and_then(|s| s.split('"').next())
        else {
            continue;
        };
        if !line.contains("\"kind\": \"message\"")
            || line.contains("\"add_path_capability\": \"send")
        {
            continue;
        }
        let ctx = if line.contains("\"asn4\": false") {
            Context::two_octet_as()
        } else {
            Context::default()
        };
        let bytes = hex::decode(h).unwrap();
        if bytes[18] == 2 {
            out.push((bytes, ctx));
        }
    }
    out
}

fn bulk_update() -> Vec<u8> {
    let attrs = vec![
        PathAttribute::new(AttrValue::Origin(Origin::Igp)),
        PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65001]))),
        PathAttribute::new(AttrValue::Communities(vec!["65001:100".parse().unwrap()])),
    ];
    let prefixes: Vec<Nlri> = (0..800u32)
        .map(|i| {
            Nlri::new(
                format!("198.18.{}.{}/32", i / 256, i % 256)
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    let (u, _) = pack::announcements(
        &Context::default(),
        Family::IPV4_UNICAST,
        &attrs,
        &["192.0.2.2".parse().unwrap()],
        &prefixes,
    );
    Message::Update(u[0].clone())
        .encode(&Context::default())
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let updates = corpus_updates();
    let bytes: usize = updates.iter().map(|(b, _)| b.len()).sum();
    let decoded: Vec<(Message, Context)> = updates
        .iter()
        .map(|(b, c)| (Message::decode(b, c).unwrap(), *c))
        .collect();

    let mut g = c.benchmark_group("corpus-updates");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("decode", |b| {
        b.iter(|| {
            for (m, ctx) in &updates {
                black_box(Message::decode(black_box(m), ctx).unwrap());
            }
        })
    });
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(8192);
        b.iter(|| {
            for (m, ctx) in &decoded {
                out.clear();
                m.encode_into(ctx, &mut out).unwrap();
                black_box(&out);
            }
        })
    });
    g.finish();

    let bulk = bulk_update();
    let msg = Message::decode(&bulk, &Context::default()).unwrap();
    let mut g = c.benchmark_group("bulk-800x32");
    g.throughput(Throughput::Bytes(bulk.len() as u64));
    g.bench_function("decode", |b| {
        b.iter(|| black_box(Message::decode(black_box(&bulk), &Context::default()).unwrap()))
    });
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(8192);
        b.iter(|| {
            out.clear();
            msg.encode_into(&Context::default(), &mut out).unwrap();
            black_box(&out);
        })
    });
    g.finish();
    eprintln!("corpus: {} UPDATEs, {} octets", updates.len(), bytes);
}

criterion_group!(benches, bench);
criterion_main!(benches);
