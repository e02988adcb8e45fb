use std::path::Path;

use super::*;

fn config() -> Config {
    crate::config::parse(
        Path::new("/etc/holdfast/t.toml"),
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"file\"\npath = \"vips.toml\"\n\
         [[advertisement]]\nname = \"public\"\nvip_ranges = [\"198.51.100.0/24\"]\nallow_service_attributes = [\"communities\", \"med\"]\n\
         [[advertisement]]\nname = \"plain\"\n",
    )
    .expect("a valid config")
}

fn route(prefix: &str) -> RuntimeRoute {
    RuntimeRoute {
        prefix: prefix.into(),
        ..RuntimeRoute::default()
    }
}

#[test]
fn announce_checks_the_prefix_the_advertisement_and_its_attributes() {
    let c = config();
    let mut r = RuntimeRoutes::default();
    r.announce(
        &c,
        RuntimeRoute {
            communities: vec!["65001:7".into()],
            med: Some(5),
            ..route("198.51.100.0/25")
        },
    )
    .unwrap();
    let refused = |r: &mut RuntimeRoutes, route| r.announce(&c, route).unwrap_err();
    assert_eq!(
        refused(&mut r, route("198.51.100.1/24")),
        "198.51.100.1/24 has host bits set: did you mean 198.51.100.0/24?"
    );
    assert_eq!(
        refused(&mut r, route("203.0.113.0/24")),
        "203.0.113.0/24 is not within the vip_ranges of advertisement \"public\""
    );
    assert_eq!(
        refused(
            &mut r,
            RuntimeRoute {
                local_pref: Some(200),
                ..route("198.51.100.7")
            }
        ),
        "advertisement \"public\" does not let local-pref through: add \"local-pref\" to its allow_service_attributes"
    );
    assert_eq!(
        refused(
            &mut r,
            RuntimeRoute {
                advertisement: Some("nope".into()),
                ..route("198.51.100.7")
            }
        ),
        "no [[advertisement]] is named \"nope\""
    );
    assert!(refused(&mut r, route("banana")).contains("is not a prefix"));
    // The refused ones left nothing behind.
    assert_eq!(r.list().len(), 1);
    // An address is its host route; another advertisement has no ranges.
    r.announce(
        &c,
        RuntimeRoute {
            advertisement: Some("plain".into()),
            ..route("2001:db8::1")
        },
    )
    .unwrap();
    let prefixes: Vec<String> = r.list().into_iter().map(|r| r.prefix).collect();
    assert_eq!(prefixes, ["198.51.100.0/25", "2001:db8::1/128"]);
    assert_eq!(r.withdraw("198.51.100.0/25"), Ok(()));
    assert_eq!(
        r.withdraw("198.51.100.0/25"),
        Err("no runtime route for 198.51.100.0/25".into())
    );
}

#[test]
fn the_snapshot_has_host_routes_as_vips_and_others_as_prefixes_with_their_attributes() {
    let c = config();
    let mut r = RuntimeRoutes::default();
    r.announce(
        &c,
        RuntimeRoute {
            communities: vec!["65001:7".into()],
            ..route("198.51.100.0/25")
        },
    )
    .unwrap();
    r.announce(&c, route("198.51.100.200")).unwrap();
    let s = r.snapshot(&c, SourceId(1));
    assert!(s.healthy && s.synced);
    let vip = s.vips.get(&"198.51.100.200".parse().unwrap()).unwrap();
    assert_eq!(vip.route.source, SourceId(1));
    assert!(vip.route.advertisements.contains("public"));
    let p = &s.prefixes[&"198.51.100.0/25".parse().unwrap()];
    assert_eq!(
        p.route.attributes.as_ref().unwrap().communities,
        [65001 << 16 | 7]
    );
    assert_eq!(p.route.source, SourceId(1));
}

#[test]
fn a_route_the_config_no_longer_allows_is_left_out_and_explained() {
    let mut r = RuntimeRoutes::default();
    r.announce(&config(), route("198.51.100.9")).unwrap();
    // After a reload without the "public" advertisement's range...
    let narrower = crate::config::parse(
        Path::new("/etc/holdfast/t.toml"),
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n[[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n[source]\nkind = \"file\"\npath = \"vips.toml\"\n\
         [[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.0/24\"]\n",
    )
    .unwrap();
    let s = r.snapshot(&narrower, SourceId(1));
    assert!(s.vips.is_empty());
    let why = &s.excluded[&"198.51.100.9".parse().unwrap()];
    assert!(why[0].contains("not within the vip_ranges"), "{why:?}");
    // ...and kept: a later config may allow it again.
    assert_eq!(r.list().len(), 1);
}

#[test]
fn the_kept_file_round_trips_and_a_broken_one_is_moved_aside() {
    let dir = std::env::temp_dir().join(format!("holdfast-runtime-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(FILE_NAME);
    let c = config();
    let mut r = RuntimeRoutes::default();
    r.announce(
        &c,
        RuntimeRoute {
            med: Some(3),
            ..route("198.51.100.5")
        },
    )
    .unwrap();
    write_kept(&path, &r.to_json()).unwrap();
    assert_eq!(read_kept(&path).unwrap(), r);
    std::fs::write(&path, "{ not json").unwrap();
    let why = read_kept(&path).unwrap_err();
    assert!(why.contains("moved to"), "{why}");
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_to_string(path.with_extension("json.unreadable")).unwrap(),
        "{ not json"
    );
    // None kept: none.
    assert_eq!(read_kept(&path).unwrap(), RuntimeRoutes::default());
    std::fs::remove_dir_all(&dir).unwrap();
}
