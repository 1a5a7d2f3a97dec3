//! Bucket owners: a key that may create buckets owns what it makes and
//! reaches it without a grant; other keys reach it only by grant, cannot
//! take its name, and do not see it listed. ListBuckets pages, the owner
//! in listings, and ListObjectVersions' one `null` version per object.

use pktfs_s3::keys::{Grant, KeyStore};
use pktfs_s3::sigv4::Signer;

use super::{code, ok, s3_config, xml_field, Response, REGION};
use crate::net_common::server;

struct Owners {
    s3: super::S3,
    alice: Signer,
    alice_id: String,
    bob: Signer,
    carol: Signer,
    plain: Signer,
}

fn all(r: &Response, name: &str) -> Vec<String> {
    let b = String::from_utf8_lossy(&r.body).into_owned();
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(s) = b[at..].find(&open) {
        let s = at + s + open.len();
        let e = s + b[s..].find(&close).expect("closed");
        out.push(b[s..e].to_string());
        at = e;
    }
    out
}

/// alice and bob may create buckets; carol reads `alice-b` by grant;
/// plain has a grant on nothing.
fn owners() -> Owners {
    let srv = server(256 << 20, s3_config);
    let mut ks = KeyStore::default();
    let now = super::now_s();
    let mut key = |name: &str, grants: Vec<Grant>, seed: u8, create: bool| {
        let k = ks.add(name, grants, &[seed; 64], now).unwrap().clone();
        if create {
            ks.set_create_buckets(&k.id, true).unwrap();
        }
        (Signer::new(&k.id, &k.secret, REGION), k.id)
    };
    let (alice, alice_id) = key("alice", vec![], 1, true);
    let (bob, _) = key("bob", vec![], 2, true);
    let (carol, _) = key("carol", vec!["alice-b=r".parse().unwrap()], 3, false);
    let (plain, _) = key("plain", vec![], 4, false);
    let (rw, _) = key("rw", vec!["*=rw".parse().unwrap()], 5, false);
    let (ro, _) = key("ro", vec!["*=r".parse().unwrap()], 6, false);
    srv.vol.set_s3_keys_blob(Some(&ks.encode())).unwrap();
    let addr = srv.svc.as_ref().unwrap().s3_addr().expect("an S3 listener");
    Owners {
        s3: super::S3 { srv, addr, rw, ro },
        alice,
        alice_id,
        bob,
        carol,
        plain,
    }
}

#[test]
fn a_key_owns_what_it_makes_and_others_reach_it_only_by_grant() {
    let o = owners();
    let s = &o.s3;
    ok(&s.req(&o.alice, "PUT", "/alice-b", "", b""));
    // The name is taken: another key's bucket, or the owner's own.
    let r = s.req(&o.bob, "PUT", "/alice-b", "", b"");
    assert_eq!((r.status, code(&r)), (409, "BucketAlreadyExists".into()));
    ok(&s.req(&o.alice, "PUT", "/alice-b", "", b""));
    // A key that may create buckets is told a bucket does not exist (it
    // could learn it from CreateBucket); any other key is not.
    let r = s.req(&o.bob, "GET", "/nobody-b", "", b"");
    assert_eq!((r.status, code(&r)), (404, "NoSuchBucket".into()));
    let r = s.req(&o.plain, "GET", "/nobody-b", "", b"");
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".into()));
    // A key with no right to create gets AccessDenied, and nothing is made.
    let r = s.req(&o.plain, "PUT", "/plain-b", "", b"");
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".into()));
    assert_eq!(s.req(&s.ro, "HEAD", "/plain-b", "", b"").status, 404);

    ok(&s.req(&o.alice, "PUT", "/alice-b/k", "", b"alice's"));
    assert_eq!(
        s.req(&o.alice, "GET", "/alice-b/k", "", b"").body,
        b"alice's"
    );
    for (who, method) in [(&o.bob, "GET"), (&o.bob, "PUT"), (&o.plain, "GET")] {
        let r = s.req(who, method, "/alice-b/k", "", b"x");
        assert_eq!(
            (r.status, code(&r)),
            (403, "AccessDenied".into()),
            "{method}"
        );
    }
    // carol's read grant reaches it; it gives no write.
    assert_eq!(
        s.req(&o.carol, "GET", "/alice-b/k", "", b"").body,
        b"alice's"
    );
    let r = s.req(&o.carol, "PUT", "/alice-b/k", "", b"carol's");
    assert_eq!(r.status, 403);
    assert_eq!(
        s.req(&o.alice, "GET", "/alice-b/k", "", b"").body,
        b"alice's"
    );
    // bob cannot copy out of it either.
    ok(&s.req(&o.bob, "PUT", "/bob-b", "", b""));
    let r = s.req_with(
        &o.bob,
        "PUT",
        "/bob-b/copy",
        "",
        &[("x-amz-copy-source", "/alice-b/k")],
        b"",
    );
    assert_eq!((r.status, code(&r)), (403, "AccessDenied".into()));

    // ListBuckets: each key sees what it owns or has a grant on.
    let names = |who: &Signer| all(&s.req(who, "GET", "/", "", b""), "Name");
    assert_eq!(names(&o.alice), ["alice-b"]);
    assert_eq!(names(&o.bob), ["bob-b"]);
    assert_eq!(names(&o.carol), ["alice-b"]);
    assert!(names(&o.plain).is_empty());
    let r = s.req(&o.alice, "GET", "/", "", b"");
    assert_eq!(xml_field(&r, "ID").as_deref(), Some(o.alice_id.as_str()));
    assert_eq!(xml_field(&r, "DisplayName").as_deref(), Some("alice"));

    // The owner survives the server's restart (it is in the image).
    let mut s3 = o.s3;
    s3.free_at_rest();
    let r = s3.req(&o.bob, "GET", "/alice-b/k", "", b"");
    assert_eq!(r.status, 403);
    assert_eq!(
        s3.req(&o.alice, "GET", "/alice-b/k", "", b"").body,
        b"alice's"
    );
}

#[test]
fn list_buckets_pages_and_listings_name_the_owner() {
    let o = owners();
    let s = &o.s3;
    for b in ["p-1", "p-2", "p-3", "q-1"] {
        ok(&s.req(&o.alice, "PUT", &format!("/{b}"), "", b""));
    }
    let r = s.req(&o.alice, "GET", "/", "max-buckets=2", b"");
    ok(&r);
    assert_eq!(all(&r, "Name"), ["p-1", "p-2"]);
    let token = xml_field(&r, "ContinuationToken").expect("a token: more follow");
    let q = format!("continuation-token={token}&max-buckets=2");
    let r = s.req(&o.alice, "GET", "/", &q, b"");
    assert_eq!(all(&r, "Name"), ["p-3", "q-1"]);
    assert_eq!(xml_field(&r, "ContinuationToken"), None, "the last page");
    let r = s.req(&o.alice, "GET", "/", "prefix=q", b"");
    assert_eq!(all(&r, "Name"), ["q-1"]);
    assert_eq!(xml_field(&r, "Prefix").as_deref(), Some("q"));
    for bad in ["max-buckets=0", "max-buckets=x", "continuation-token=..%2F"] {
        let r = s.req(&o.alice, "GET", "/", bad, b"");
        assert_eq!(
            (r.status, code(&r)),
            (400, "InvalidArgument".into()),
            "{bad}"
        );
    }

    ok(&s.req(&o.alice, "PUT", "/p-1/a", "", b"1"));
    ok(&s.req(&o.alice, "PUT", "/p-1/b", "", b"22"));
    // Version 1 always names the owner, version 2 with fetch-owner.
    let v1 = s.req(&o.alice, "GET", "/p-1", "", b"");
    assert_eq!(all(&v1, "ID"), [o.alice_id.as_str(), &o.alice_id]);
    let v2 = s.req(&o.alice, "GET", "/p-1", "list-type=2", b"");
    assert!(all(&v2, "ID").is_empty());
    let v2 = s.req(&o.alice, "GET", "/p-1", "fetch-owner=true&list-type=2", b"");
    assert_eq!(all(&v2, "DisplayName"), ["alice", "alice"]);
    // s.rw (a `*` grant) lists alice's bucket: the owner is alice's.
    let v2 = s.req(&s.rw, "GET", "/p-1", "fetch-owner=true&list-type=2", b"");
    assert_eq!(all(&v2, "DisplayName"), ["alice", "alice"]);
}

#[test]
fn every_object_is_its_one_null_version() {
    let o = owners();
    let s = &o.s3;
    ok(&s.req(&s.rw, "PUT", "/ver", "", b""));
    for k in ["a", "b/c", "d"] {
        ok(&s.req(&s.rw, "PUT", &format!("/ver/{k}"), "", b"x"));
    }
    let r = s.req(&s.rw, "GET", "/ver", "versions=", b"");
    ok(&r);
    assert_eq!(all(&r, "Key"), ["a", "b/c", "d"]);
    assert_eq!(all(&r, "VersionId"), ["null", "null", "null"]);
    assert_eq!(all(&r, "IsLatest"), ["true", "true", "true"]);
    let r = s.req(&s.rw, "GET", "/ver", "versions=&max-keys=2", b"");
    assert_eq!(all(&r, "Key"), ["a", "b/c"]);
    assert_eq!(xml_field(&r, "NextKeyMarker").as_deref(), Some("b/c"));
    let r = s.req(&s.rw, "GET", "/ver", "key-marker=b%2Fc&versions=", b"");
    assert_eq!(all(&r, "Key"), ["d"]);
    // The ro key reads the versions; writing is still a write.
    ok(&s.req(&s.ro, "GET", "/ver", "versions=", b""));
    // DeleteObjects naming the `null` version deletes the object; any
    // other version is one pktfs does not keep (NotImplemented, nothing
    // deleted).
    let delete_version = |v: &str| {
        use base64::Engine;
        let body =
            format!("<Delete><Object><Key>a</Key><VersionId>{v}</VersionId></Object></Delete>");
        let md5 = base64::engine::general_purpose::STANDARD.encode(super::md5(body.as_bytes()));
        s.req_with(
            &s.rw,
            "POST",
            "/ver",
            "delete=",
            &[("content-md5", &md5)],
            body.as_bytes(),
        )
    };
    let r = delete_version("3");
    assert_eq!((r.status, code(&r)), (501, "NotImplemented".into()));
    ok(&s.req(&s.rw, "HEAD", "/ver/a", "", b""));
    ok(&delete_version("null"));
    assert_eq!(s.req(&s.rw, "HEAD", "/ver/a", "", b"").status, 404);
}
