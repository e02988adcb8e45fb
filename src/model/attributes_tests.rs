//! The per-Service attribute table, walked row by row: every row is
//! documented, parses its example, and changes what a peer receives. A new
//! row is checked here without a line of this file changing (but for a
//! counted attribute, which has no annotation to parse: see `value_of`).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use bgp_proto::{Context, Family};
use ipnet::IpNet;

use super::*;
use crate::model::Route;
use crate::speaker::{AdjRibOut, EncodeParams, NextHops, encode, peer_tables};

/// The Service's value of `row`'s attribute: its annotation's example,
/// parsed; for a counted attribute, a count.
fn value_of(row: &Row) -> ServiceAttributes {
    let mut value = ServiceAttributes::default();
    match &row.annotation {
        Some(a) => (a.parse)(a.example, &mut value).unwrap_or_else(|why| {
            panic!(
                "{}: its example {:?} does not parse: {why}",
                a.name, a.example
            )
        }),
        None if row.attribute == ServiceAttribute::LinkBandwidth => value.endpoints = Some(3),
        None => panic!(
            "{} has no annotation: give this test a value of it",
            row.name
        ),
    }
    value
}

/// An iBGP and an eBGP peer, and one advertisement `public` with `keys`.
fn config(keys: &str) -> crate::config::Config {
    let text = format!(
        "[speaker]\nasn = 65001\n\
         [[peer]]\nname = \"ibgp\"\naddress = \"192.0.2.1\"\nasn = 65001\n\
         [[peer]]\nname = \"ebgp\"\naddress = \"192.0.2.2\"\nasn = 65000\n\
         [source]\nkind = \"file\"\npath = \"vips.toml\"\n\
         [[advertisement]]\nname = \"public\"\n{keys}\n"
    );
    crate::config::parse(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
}

/// An advertisement with every row's key at its example, allowing every
/// annotation: each key's example must parse.
fn open_config() -> crate::config::Config {
    let mut keys: Vec<String> = TABLE
        .iter()
        .filter_map(|row| row.key.as_ref())
        .map(|k| format!("{} = {}", k.name, k.example))
        .collect();
    let names: Vec<String> = ServiceAttribute::annotated()
        .map(|(a, _)| format!("\"{}\"", a.as_str()))
        .collect();
    keys.push(format!("allow_service_attributes = [{}]", names.join(", ")));
    config(&keys.join("\n"))
}

/// The UPDATE each peer is sent for one route of `public` whose Service
/// asks for `service`, as octets, by peer name.
fn wire(
    config: &crate::config::Config,
    service: &ServiceAttributes,
) -> std::collections::BTreeMap<String, Vec<Vec<u8>>> {
    let ads: crate::model::Advertisements = Arc::new(BTreeSet::from(["public".to_string()]));
    let attributes = (!service.is_empty()).then(|| Arc::new(service.clone()));
    let route = Route::new(ads, Some("demo/web".into()), attributes);
    let prefix: IpNet = "198.51.100.10/32".parse().unwrap();
    let tables = peer_tables(config, [(&prefix, &route)].into_iter());
    tables
        .into_iter()
        .map(|(peer, table)| {
            let ibgp = peer == "ibgp";
            let ctx = Context {
                four_octet_as: true,
                ..Context::default()
            };
            let params = EncodeParams {
                local_asn: 65001,
                ibgp,
                ctx,
                next_hops: NextHops {
                    ipv4: Some(Ipv4Addr::new(192, 0, 2, 10)),
                    ..NextHops::default()
                },
            };
            let delta = AdjRibOut::default().diff(&Arc::new(table), &[Family::IPV4_UNICAST]);
            let (messages, skipped) = encode(&delta, &params);
            assert!(skipped.is_empty(), "{peer}: {skipped:?}");
            assert_eq!(messages.len(), 1, "{peer}: one UPDATE");
            (peer, messages)
        })
        .collect()
}

/// Each row sits at its attribute's place, and no name, annotation or key
/// is taken twice.
#[test]
fn the_rows_are_the_attributes_in_order_each_named_once() {
    let mut names = BTreeSet::new();
    let mut annotations = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for (i, row) in TABLE.iter().enumerate() {
        assert_eq!(row.attribute as usize, i, "{}", row.name);
        assert!(std::ptr::eq(row.attribute.row(), row));
        assert!(names.insert(row.name), "{} twice", row.name);
        if let Some(a) = &row.annotation {
            assert!(annotations.insert(a.name), "{} twice", a.name);
            assert_eq!(row.attribute.annotation(), Some(a.name));
        }
        if let Some(k) = &row.key {
            assert!(keys.insert(k.name), "{} twice", k.name);
        }
    }
}

/// Every row says how an operator or a Service sets it, and the reference
/// pages say so too: the annotation with its example
/// (docs/src/reference/annotations.md), its name among those
/// `allow_service_attributes` takes, its `[[advertisement]]` key in the
/// key reference (generated from the schema the config is read with).
#[test]
fn every_row_has_an_annotation_or_a_key_and_is_documented() {
    let annotations_page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/src/reference/annotations.md"
    ))
    .expect("the annotations reference");
    let reference = crate::config::schema::reference(&crate::docs::all_sections());
    let section = reference
        .split("\n## ")
        .find(|s| s.starts_with("`[[advertisement]]` ("))
        .expect("the [[advertisement]] section of the key reference");
    let key_line = |key: &str| {
        section
            .lines()
            .find(|l| l.starts_with(&format!("| `{key}` |")))
            .map(str::to_string)
    };
    let allow = key_line("allow_service_attributes").expect("allow_service_attributes");
    for row in &TABLE {
        assert!(
            row.annotation.is_some() || row.key.is_some(),
            "{}: neither an annotation nor a key sets it",
            row.name
        );
        if let Some(a) = &row.annotation {
            let line = annotations_page
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", a.name)))
                .unwrap_or_else(|| panic!("annotations.md has no row for {}", a.name));
            assert!(
                line.contains(&format!("\"{}\"", a.example)),
                "annotations.md does not show {}'s example \"{}\": {line}",
                a.name,
                a.example
            );
            assert!(
                allow.contains(&format!("`\"{}\"`", row.name)),
                "allow_service_attributes' meaning does not list \"{}\": {allow}",
                row.name
            );
        }
        if let Some(k) = &row.key {
            assert!(
                key_line(k.name).is_some(),
                "the [[advertisement]] key reference has no {}",
                k.name
            );
        }
    }
}

/// Every annotation parses its example into its own attribute alone (what
/// `clear` forgets, so a refusal forgets exactly it), shows it for
/// `explain`, and refuses a value that is none.
#[test]
fn every_annotation_parses_its_example_and_shows_it() {
    for row in &TABLE {
        let Some(a) = &row.annotation else { continue };
        let value = value_of(row);
        assert!(!value.is_empty(), "{}: the example sets nothing", a.name);
        let mut cleared = value.clone();
        (row.clear)(&mut cleared);
        assert!(
            cleared.is_empty(),
            "{}: clear leaves {cleared:?} of {value:?}",
            a.name
        );
        let shown = (a.show)(&value).unwrap_or_else(|| panic!("{}: not shown", a.name));
        assert_eq!(describe(&value), shown);
        assert_eq!((a.show)(&ServiceAttributes::default()), None, "{}", a.name);

        let mut refused = ServiceAttributes::default();
        let why = (a.parse)("not a value", &mut refused);
        assert!(why.is_err(), "{}: accepts \"not a value\"", a.name);
        assert!(refused.is_empty(), "{}: a refusal sets {refused:?}", a.name);
    }
}

/// Every row's value, under an advertisement that allows it, changes the
/// UPDATE of at least one peer (iBGP or eBGP: LOCAL_PREF goes to the
/// first only, a prepend to the second only), and under one that does not
/// allow it changes nothing.
#[test]
fn every_row_reaches_the_wire_where_allowed_and_only_there() {
    let open = open_config();
    let closed = config("");
    let none = wire(&open, &ServiceAttributes::default());
    assert_eq!(none.len(), 2);
    for row in &TABLE {
        let value = value_of(row);
        let with = wire(&open, &value);
        let changed: Vec<&String> = with
            .keys()
            .filter(|peer| with[*peer] != none[*peer])
            .collect();
        assert!(
            !changed.is_empty(),
            "{}: {value:?} changes no peer's UPDATE",
            row.name
        );
        assert_eq!(
            wire(&closed, &value),
            wire(&closed, &ServiceAttributes::default()),
            "{}: an advertisement that does not allow it sends it",
            row.name
        );
    }
}
