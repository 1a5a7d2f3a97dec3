use super::*;
use proptest::prelude::*;

fn random(seed: u8) -> [u8; 64] {
    let mut r = [0u8; 64];
    for (k, b) in r.iter_mut().enumerate() {
        *b = seed
            .wrapping_mul(31)
            .wrapping_add(k as u8)
            .wrapping_mul(151);
    }
    r
}

fn grants(list: &[&str]) -> Vec<Grant> {
    list.iter().map(|g| g.parse().unwrap()).collect()
}

#[test]
fn a_new_key_has_the_documented_shape() {
    let mut s = KeyStore::new();
    let k = s
        .add(
            "backup job",
            grants(&["logs=rw"]),
            &random(1),
            1_700_000_000,
        )
        .unwrap()
        .clone();
    assert_eq!(k.id.len(), 20);
    assert!(k.id.starts_with("PK"), "{}", k.id);
    assert!(k.id[2..]
        .bytes()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
    assert_eq!(k.secret.len(), 40);
    assert!(k
        .secret
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/'));
    assert_eq!(k.name, "backup job");
    assert_eq!(k.created_unix_s, 1_700_000_000);
    assert_eq!(s.get(&k.id), Some(&k));
    assert_eq!(s.keys().len(), 1);
}

#[test]
fn the_secret_is_the_base64_of_the_first_30_random_bytes() {
    // All zero bytes: base64 of 30 zero bytes is 40 'A's; the id's 18
    // characters are ID_ALPHABET[0] = 'A'.
    let mut s = KeyStore::new();
    let k = s.add("z", grants(&["*=r"]), &[0u8; 64], 0).unwrap().clone();
    assert_eq!(k.secret, "A".repeat(40));
    assert_eq!(k.id, format!("PK{}", "A".repeat(18)));
    // 0xff bytes: "/" in base64; 255 % 36 = 3 -> 'D'.
    let mut s = KeyStore::new();
    let k = s
        .add("f", grants(&["*=r"]), &[0xff; 64], 0)
        .unwrap()
        .clone();
    assert_eq!(k.secret, "/".repeat(40));
    assert_eq!(k.id, format!("PK{}", "D".repeat(18)));
}

#[test]
fn different_random_bytes_make_different_keys() {
    let mut s = KeyStore::new();
    let a = s.add("a", vec![], &random(1), 0).unwrap().clone();
    let b = s.add("b", vec![], &random(2), 0).unwrap().clone();
    assert_ne!(a.id, b.id);
    assert_ne!(a.secret, b.secret);
    // The same bytes again: the same id, refused rather than shadowing.
    let e = s.add("c", vec![], &random(1), 0).unwrap_err();
    assert!(
        matches!(e, KeysError::IdTaken(ref id) if *id == a.id),
        "{e}"
    );
    assert_eq!(s.len(), 2);
}

#[test]
fn grants_parse_and_print() {
    let g: Grant = "logs=rw".parse().unwrap();
    assert_eq!(
        g,
        Grant {
            bucket: "logs".into(),
            read: true,
            write: true
        }
    );
    assert_eq!(g.to_string(), "logs=rw");
    for s in ["logs=r", "logs=w", "*=rw", "*=r", "a.b-c=w", "abc=rw"] {
        assert_eq!(s.parse::<Grant>().unwrap().to_string(), s);
    }
    for bad in [
        "logs", "logs=", "logs=x", "logs=rwx", "logs=R", "=rw", "ab=rw", "Logs=rw", "-logs=rw",
        "logs-=rw", "lo_gs=rw", "lo gs=rw", "**=rw", "a=b=rw",
    ] {
        let e = bad.parse::<Grant>().unwrap_err();
        assert!(matches!(e, KeysError::BadGrant { .. }), "{bad}: {e}");
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
    let long = format!("{}=r", "a".repeat(64));
    assert!(long.parse::<Grant>().is_err());
    let max = format!("{}=r", "a".repeat(63));
    assert!(max.parse::<Grant>().is_ok());
}

#[test]
fn may_and_sees_follow_the_grants() {
    let mut s = KeyStore::new();
    let k = s
        .add("k", grants(&["logs=rw", "pub=r", "drop=w"]), &random(3), 0)
        .unwrap()
        .clone();
    assert!(k.may("logs", Access::Read) && k.may("logs", Access::Write));
    assert!(k.may("pub", Access::Read) && !k.may("pub", Access::Write));
    assert!(!k.may("drop", Access::Read) && k.may("drop", Access::Write));
    assert!(!k.may("other", Access::Read) && !k.may("other", Access::Write));
    assert!(k.sees("logs") && k.sees("pub") && k.sees("drop"));
    assert!(!k.sees("other"));
    // A bucket literally named like a prefix of a granted one is not it.
    assert!(!k.may("log", Access::Read));

    let all = s
        .add("all", grants(&["*=r", "logs=w"]), &random(4), 0)
        .unwrap()
        .clone();
    assert!(all.may("anything", Access::Read));
    assert!(!all.may("anything", Access::Write));
    assert!(all.may("logs", Access::Write) && all.may("logs", Access::Read));
    assert!(all.sees("anything"));

    let none = s.add("none", vec![], &random(5), 0).unwrap().clone();
    assert!(!none.may("logs", Access::Read) && !none.sees("logs"));
}

#[test]
fn encode_then_decode_is_the_same_store() {
    let mut s = KeyStore::new();
    s.add(
        "a \"quoted\" \\ name ✓",
        grants(&["logs=rw"]),
        &random(1),
        -5,
    )
    .unwrap();
    s.add("b", grants(&["*=r", "x.y-z=w"]), &random(2), i64::MAX)
        .unwrap();
    let blob = s.encode();
    let v: serde_json::Value = serde_json::from_slice(&blob).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["keys"][1]["grants"][0], "*=r");
    assert_eq!(KeyStore::decode(&blob).unwrap(), s);
    assert_eq!(
        KeyStore::decode(&KeyStore::new().encode()).unwrap(),
        KeyStore::new()
    );
}

#[test]
fn remove_takes_the_key_out() {
    let mut s = KeyStore::new();
    let a = s.add("a", vec![], &random(1), 0).unwrap().id.clone();
    let b = s.add("b", vec![], &random(2), 0).unwrap().id.clone();
    assert_eq!(s.remove(&a).unwrap().name, "a");
    assert!(s.get(&a).is_none());
    assert_eq!(s.keys()[0].id, b);
    let e = s.remove(&a).unwrap_err();
    assert!(matches!(e, KeysError::NoSuchKey(_)), "{e}");
    assert!(e.to_string().contains(&a), "{e}");
}

#[test]
fn bad_names_and_grant_lists_are_refused() {
    let mut s = KeyStore::new();
    for bad in [
        "",
        "   ",
        "tab\there",
        "nl\n",
        &"n".repeat(MAX_NAME_BYTES + 1),
    ] {
        let e = s.add(bad, vec![], &random(1), 0).unwrap_err();
        assert!(matches!(e, KeysError::BadName { .. }), "{bad:?}: {e}");
    }
    assert!(s
        .add(&"n".repeat(MAX_NAME_BYTES), vec![], &random(1), 0)
        .is_ok());
    let e = s
        .add("d", grants(&["logs=r", "logs=w"]), &random(2), 0)
        .unwrap_err();
    assert!(matches!(e, KeysError::DuplicateGrant(_)), "{e}");
    let many: Vec<Grant> = (0..=MAX_GRANTS)
        .map(|k| format!("bucket{k:03}=r").parse().unwrap())
        .collect();
    let e = s.add("m", many, &random(3), 0).unwrap_err();
    assert!(matches!(e, KeysError::TooManyGrants { .. }), "{e}");
    // A grant built by hand that gives nothing is refused too.
    let nothing = Grant {
        bucket: "logs".into(),
        read: false,
        write: false,
    };
    let e = s.add("g", vec![nothing], &random(4), 0).unwrap_err();
    assert!(matches!(e, KeysError::BadGrant { .. }), "{e}");
    assert_eq!(s.len(), 1);
}

/// The largest store the bounds allow: MAX_KEYS keys, each with
/// MAX_GRANTS grants on 63-character buckets and a name of quotes (each
/// escaped in JSON), with the longest timestamps.
fn largest_store() -> KeyStore {
    let mut s = KeyStore::new();
    for k in 0..MAX_KEYS {
        let gs: Vec<Grant> = (0..MAX_GRANTS)
            .map(|g| {
                let b = format!("{k:02}{g:02}{}", "b".repeat(59));
                format!("{b}=rw").parse().unwrap()
            })
            .collect();
        let name = "\"".repeat(MAX_NAME_BYTES);
        s.add(&name, gs, &random(k as u8), i64::MIN).unwrap();
    }
    s
}

#[test]
fn the_largest_store_fits_the_blob_bound() {
    let s = largest_store();
    let blob = s.encode();
    assert!(
        blob.len() <= MAX_BLOB_BYTES,
        "{} bytes > {MAX_BLOB_BYTES}",
        blob.len()
    );
    assert_eq!(KeyStore::decode(&blob).unwrap(), s);
    let mut s = s;
    let e = s.add("one more", vec![], &random(200), 0).unwrap_err();
    assert!(matches!(e, KeysError::Full { max: MAX_KEYS }), "{e}");
}

#[test]
fn decode_refuses_what_add_would_not_make() {
    let good = |k: serde_json::Value| serde_json::json!({"version": 1, "keys": [k]});
    let key = serde_json::json!({
        "id": "PKAAAAAAAAAAAAAAAAAA", "secret": "A".repeat(40), "name": "n",
        "grants": ["logs=rw"], "created_unix_s": 0
    });
    assert!(KeyStore::decode(good(key.clone()).to_string().as_bytes()).is_ok());
    let with = |f: &str, v: serde_json::Value| {
        let mut k = key.clone();
        k[f] = v;
        good(k).to_string()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            with("id", "AKAAAAAAAAAAAAAAAAAA".into()),
            "not an access key id",
        ),
        (
            with("id", "PKaaaaaaaaaaaaaaaaaa".into()),
            "not an access key id",
        ),
        (with("id", "PKAAAA".into()), "not an access key id"),
        (with("secret", "short".into()), "secret"),
        (with("secret", "A".repeat(39).to_string().into()), "secret"),
        (
            with("secret", format!("{}-", "A".repeat(39)).into()),
            "secret",
        ),
        (with("name", "".into()), "bad key name"),
        (with("grants", serde_json::json!(["logs"])), "bad grant"),
        (
            with("grants", serde_json::json!(["abc=r", "abc=w"])),
            "twice",
        ),
        (
            with("created_unix_s", "now".into()),
            "not what pktfs writes",
        ),
        (with("extra", 1.into()), "not what pktfs writes"),
        (
            serde_json::json!({"version": 1, "keys": [key.clone(), key.clone()]}).to_string(),
            "appears twice",
        ),
        (
            serde_json::json!({"version": 3, "keys": []}).to_string(),
            "version 3",
        ),
        (
            serde_json::json!({"version": 3, "whatever": true}).to_string(),
            "version 3",
        ),
        (
            serde_json::json!({"keys": []}).to_string(),
            "not what pktfs writes",
        ),
        (
            serde_json::json!({"version": 1, "keys": [], "more": 1}).to_string(),
            "not what pktfs writes",
        ),
        ("".into(), "not what pktfs writes"),
        ("[]".into(), "not what pktfs writes"),
        ("{\"version\":1,\"keys\":[".into(), "not what pktfs writes"),
    ];
    for (blob, want) in cases {
        let e = KeyStore::decode(blob.as_bytes()).unwrap_err();
        assert!(e.to_string().contains(want), "{blob}: {e}");
    }
    // Over MAX_KEYS keys, each valid.
    let keys: Vec<serde_json::Value> = (0..=MAX_KEYS)
        .map(|n| {
            let mut k = key.clone();
            k["id"] = format!("PK{:018}", n).into();
            k
        })
        .collect();
    let blob = serde_json::json!({"version": 1, "keys": keys}).to_string();
    let e = KeyStore::decode(blob.as_bytes()).unwrap_err();
    assert!(matches!(e, KeysError::TooManyKeys { .. }), "{e}");
}

#[test]
fn an_oversized_blob_is_refused_before_it_is_parsed() {
    let mut blob = vec![b' '; MAX_BLOB_BYTES + 1];
    let e = KeyStore::decode(&blob).unwrap_err();
    assert!(matches!(e, KeysError::TooBig { .. }), "{e}");
    // Deep nesting within the bound is an error (serde_json's recursion
    // limit), not a stack overflow.
    blob = [vec![b'['; 30_000], vec![b']'; 30_000]].concat();
    assert!(KeyStore::decode(&blob).is_err());
    blob = [
        b"{\"version\":1,\"keys\":".to_vec(),
        vec![b'['; 30_000],
        vec![b']'; 30_000],
        b"}".to_vec(),
    ]
    .concat();
    assert!(KeyStore::decode(&blob).is_err());
}

#[test]
fn debug_does_not_show_the_secret() {
    let mut s = KeyStore::new();
    let k = s.add("a", vec![], &random(9), 0).unwrap().clone();
    let d = format!("{k:?} {s:?}");
    assert!(!d.contains(&k.secret), "{d}");
    assert!(d.contains(&k.id), "{d}");
}

fn arb_grant() -> impl Strategy<Value = Grant> {
    (
        prop_oneof![Just("*".to_string()), "[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"],
        0u8..3,
    )
        .prop_map(|(bucket, r)| Grant {
            bucket,
            read: r != 1,
            write: r != 0,
        })
}

proptest! {
    /// Any text: a grant that prints back as itself, or a BadGrant error.
    #[test]
    fn grant_parse_is_exact_or_an_error(s in "\\PC{0,80}") {
        match s.parse::<Grant>() {
            Ok(g) => prop_assert_eq!(g.to_string(), s),
            Err(e) => prop_assert!(matches!(e, KeysError::BadGrant { .. }), "{}", e),
        }
    }

    #[test]
    fn decode_never_panics_on_any_bytes(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = KeyStore::decode(&b);
    }

    /// Mutations of a real blob: every byte changed, dropped or cut is an
    /// error or a store that encodes to a valid blob again.
    #[test]
    fn decode_of_a_damaged_blob_is_an_error_or_valid(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        how in 0u8..3,
    ) {
        let mut s = KeyStore::new();
        s.add("name", vec!["logs=rw".parse().unwrap(), "*=r".parse().unwrap()], &random(1), 7).unwrap();
        s.add("other", vec![], &random(2), 8).unwrap();
        let mut blob = s.encode();
        let i = at.index(blob.len());
        match how {
            0 => blob[i] = byte,
            1 => { blob.remove(i); }
            _ => blob.truncate(i),
        }
        if let Ok(d) = KeyStore::decode(&blob) {
            prop_assert_eq!(KeyStore::decode(&d.encode()).unwrap(), d);
        }
    }

    #[test]
    fn any_store_add_makes_round_trips(
        keys in proptest::collection::vec(
            ("[^\\p{Cc}]{1,20}", proptest::collection::vec(arb_grant(), 0..4), any::<[u8; 32]>(), any::<i64>()),
            0..8,
        )
    ) {
        let mut s = KeyStore::new();
        for (name, grants, r, t) in keys {
            let mut random = [0u8; 64];
            random[..32].copy_from_slice(&r);
            random[32..].copy_from_slice(&r);
            let _ = s.add(&name, grants, &random, t);
        }
        let d = KeyStore::decode(&s.encode()).unwrap();
        prop_assert_eq!(d, s);
    }
}

#[test]
fn import_brings_a_key_as_it_is_and_refuses_what_decode_would() {
    let mut a = KeyStore::new();
    let made = a
        .add("up", grants(&["*=rw"]), &random(7), 5)
        .unwrap()
        .clone();
    let mut b = KeyStore::new();
    b.add("other", grants(&["logs=r"]), &random(8), 6).unwrap();
    let got = b.import(made.clone()).unwrap().clone();
    assert_eq!(got, made, "id, secret, name, grants and time kept");
    assert_eq!(b.get(&made.id), Some(&made));
    // Twice: the id is taken.
    assert!(matches!(b.import(made.clone()), Err(KeysError::IdTaken(id)) if id == made.id));
    // What a damaged store would hold is refused here too.
    let mut bad = made.clone();
    bad.id = "PKlower000000000000".into();
    assert!(matches!(b.import(bad), Err(KeysError::BadId(_))));
    let mut bad = made.clone();
    bad.id = "PK0000000000000000A1".into();
    bad.secret = "short".into();
    assert!(matches!(b.import(bad), Err(KeysError::BadSecret { .. })));
    let mut bad = made.clone();
    bad.id = "PK0000000000000000A2".into();
    bad.name = String::new();
    assert!(matches!(b.import(bad), Err(KeysError::BadName { .. })));
    // The store still round-trips.
    assert_eq!(KeyStore::decode(&b.encode()).unwrap(), b);
    // A full store takes no more.
    let mut full = largest_store();
    let mut more = made.clone();
    more.id = "PK0000000000000000A3".into();
    assert!(matches!(full.import(more), Err(KeysError::Full { .. })));
}

#[test]
fn owners_reach_their_buckets_and_creating_needs_the_right() {
    let mut s = KeyStore::new();
    let id = s
        .add("maker", grants(&["logs=r"]), &random(11), 0)
        .unwrap()
        .id
        .clone();
    assert!(!s.get(&id).unwrap().create_buckets);
    let k = s.get(&id).unwrap().clone();
    assert!(!k.may_create("new-bucket"));
    assert!(!k.owns(Some("PKSOMEONEELSE0000000")) && !k.may("mine", Access::Read));
    assert!(k.owns(Some(&id)));
    assert!(!k.owns(None) && !k.sees("mine"));
    assert!(k.may("logs", Access::Read) && !k.may("logs", Access::Write));
    let k = s.set_create_buckets(&id, true).unwrap().clone();
    assert!(k.may_create("new-bucket"));
    // A store with such a key is version 2 and round-trips; without one,
    // version 1 as before.
    let blob = s.encode();
    assert!(
        String::from_utf8_lossy(&blob).starts_with("{\"version\":2"),
        "{blob:?}"
    );
    assert_eq!(KeyStore::decode(&blob).unwrap(), s);
    s.set_create_buckets(&id, false).unwrap();
    let blob = s.encode();
    assert!(String::from_utf8_lossy(&blob).starts_with("{\"version\":1"));
    assert!(!String::from_utf8_lossy(&blob).contains("create_buckets"));
    // Version 1 with the field is not what any pktfs wrote.
    let odd = String::from_utf8_lossy(&blob).replacen(
        "\"created_unix_s\"",
        "\"create_buckets\":true,\"created_unix_s\"",
        1,
    );
    assert!(matches!(
        KeyStore::decode(odd.as_bytes()),
        Err(KeysError::Malformed(_))
    ));
    assert!(matches!(
        KeyStore::decode(br#"{"version":3,"keys":[]}"#),
        Err(KeysError::UnknownVersion(3))
    ));
    assert!(matches!(
        s.set_create_buckets("PKNOSUCHKEY000000000", true),
        Err(KeysError::NoSuchKey(_))
    ));
}

#[test]
fn set_grant_replaces_adds_and_takes_away() {
    let mut s = KeyStore::new();
    let id = s
        .add("k", grants(&["logs=r", "*=r"]), &random(12), 0)
        .unwrap()
        .id
        .clone();
    let k = s.set_grant(&id, "logs=rw".parse().unwrap()).unwrap();
    assert_eq!(k.grants, grants(&["*=r", "logs=rw"]));
    let k = s.set_grant(&id, "new-one=w".parse().unwrap()).unwrap();
    assert_eq!(k.grants.len(), 3);
    let none = Grant {
        bucket: "*".into(),
        read: false,
        write: false,
    };
    let k = s.set_grant(&id, none).unwrap();
    assert_eq!(k.grants, grants(&["logs=rw", "new-one=w"]));
    // Past the bound: refused, nothing changed.
    for n in 0..MAX_GRANTS - 2 {
        s.set_grant(&id, format!("b{n:03}=r").parse().unwrap())
            .unwrap();
    }
    let e = s.set_grant(&id, "one-more=r".parse().unwrap()).unwrap_err();
    assert!(matches!(e, KeysError::TooManyGrants { .. }), "{e}");
    assert_eq!(s.get(&id).unwrap().grants.len(), MAX_GRANTS);
}
