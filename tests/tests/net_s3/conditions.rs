//! S3 preconditions evaluated against the object's S3 ETag (the MD5 in
//! `user.s3`), never the plain listener's CRC tag, with AWS's documented
//! answers, per operation: PutObject, GetObject/HeadObject, CopyObject
//! (destination and source), CompleteMultipartUpload, DeleteObject. And
//! exact against concurrent writers: compare-and-swap increments from
//! many clients lose no update, and of racing creates one wins.

use super::{
    code, complete_body, create_upload, list_parts, md5_etag, ok, xml_field, Response, S3,
};

/// Headers of a request, and the status and S3 code it is refused with.
type Refused<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);

const PAST: &str = "Mon, 01 Jan 2001 00:00:00 GMT";
const FUTURE: &str = "Fri, 01 Jan 2100 00:00:00 GMT";

fn put_with(s: &S3, path: &str, h: &[(&str, &str)], body: &[u8]) -> Response {
    s.req_with(&s.rw, "PUT", path, "", h, body)
}

/// The object is `want` (bytes and ETag), as it was.
#[track_caller]
fn unchanged(s: &S3, path: &str, want: &[u8]) {
    assert_eq!(s.srv.read(path).as_deref(), Some(want), "{path} changed");
    assert_eq!(
        s.get(path).header("etag"),
        Some(md5_etag(want).as_str()),
        "{path}'s ETag changed"
    );
}

#[test]
fn conditional_put_compares_the_s3_etag() {
    let s = super::s3_server();
    ok(&s.put("/cpb", b""));
    let v1 = b"first version".to_vec();
    let r = s.put("/cpb/o", &v1);
    ok(&r);
    let e1 = md5_etag(&v1);
    assert_eq!(r.header("etag"), Some(e1.as_str()));
    // If-None-Match with the current ETag: S3 compares only `*` on a
    // write (501), and the object is not overwritten.
    let r = put_with(&s, "/cpb/o", &[("if-none-match", &e1)], b"overwrite");
    assert_eq!((r.status, code(&r).as_str()), (501, "NotImplemented"));
    unchanged(&s, "/cpb/o", &v1);
    // If-None-Match: *: the key exists.
    let r = put_with(&s, "/cpb/o", &[("if-none-match", "*")], b"overwrite");
    assert_eq!((r.status, code(&r).as_str()), (412, "PreconditionFailed"));
    unchanged(&s, "/cpb/o", &v1);
    // If-Match with another ETag (the CRC tag the plain listener uses
    // among them): 412.
    let ino = s.srv.lookup("/cpb/o").unwrap().ino;
    let d = s.srv.vol.content_digest(ino).unwrap();
    let crc_tag = format!("\"c-{:08x}-{:x}\"", d.crc32c, d.size);
    for other in ["\"0123\"", crc_tag.as_str()] {
        let r = put_with(&s, "/cpb/o", &[("if-match", other)], b"overwrite");
        assert_eq!(
            (r.status, code(&r).as_str()),
            (412, "PreconditionFailed"),
            "{other}"
        );
        unchanged(&s, "/cpb/o", &v1);
    }
    // If-Match with the current ETag: replaced.
    let v2 = b"second version".to_vec();
    let r = put_with(&s, "/cpb/o", &[("if-match", &e1)], &v2);
    ok(&r);
    assert_eq!(r.header("etag"), Some(md5_etag(&v2).as_str()));
    unchanged(&s, "/cpb/o", &v2);
    // Unquoted, as some clients send it; and one of a list.
    let v3 = b"third".to_vec();
    let bare2 = md5_etag(&v2).trim_matches('"').to_string();
    ok(&put_with(&s, "/cpb/o", &[("if-match", &bare2)], &v3));
    unchanged(&s, "/cpb/o", &v3);
    let v4 = b"fourth".to_vec();
    let list = format!("\"0123\", {}", md5_etag(&v3));
    ok(&put_with(&s, "/cpb/o", &[("if-match", &list)], &v4));
    unchanged(&s, "/cpb/o", &v4);
    // The old ETag no longer matches.
    let r = put_with(&s, "/cpb/o", &[("if-match", &e1)], b"stale");
    assert_eq!(code(&r), "PreconditionFailed");
    unchanged(&s, "/cpb/o", &v4);
    // If-Match on a missing key: 404 NoSuchKey, nothing stored.
    let r = put_with(&s, "/cpb/missing", &[("if-match", &e1)], b"x");
    assert_eq!((r.status, code(&r).as_str()), (404, "NoSuchKey"));
    assert!(s.srv.lookup("/cpb/missing").is_none());
    // Both headers: 501, nothing stored.
    let r = put_with(
        &s,
        "/cpb/o",
        &[("if-match", &md5_etag(&v4)), ("if-none-match", "*")],
        b"x",
    );
    assert_eq!((r.status, code(&r).as_str()), (501, "NotImplemented"));
    unchanged(&s, "/cpb/o", &v4);
    // If-None-Match: * on a missing key: created.
    ok(&put_with(&s, "/cpb/new", &[("if-none-match", "*")], b"new"));
    unchanged(&s, "/cpb/new", b"new");
    // If-Unmodified-Since: evaluated (RFC 9110) against the object.
    let r = put_with(&s, "/cpb/o", &[("if-unmodified-since", PAST)], b"x");
    assert_eq!(code(&r), "PreconditionFailed");
    unchanged(&s, "/cpb/o", &v4);
    ok(&put_with(
        &s,
        "/cpb/o",
        &[("if-unmodified-since", FUTURE)],
        &v1,
    ));
    unchanged(&s, "/cpb/o", &v1);
    // If-Modified-Since means nothing on a write (RFC 9110): stored.
    ok(&put_with(
        &s,
        "/cpb/o",
        &[("if-modified-since", FUTURE)],
        &v2,
    ));
    unchanged(&s, "/cpb/o", &v2);
    // A multipart object's ETag (`-N`) is what If-Match compares.
    let id = create_upload(&s, "/cpb/mp", &[]);
    let part = super::super::net_common::data(1000, 1);
    let r = s.req(
        &s.rw,
        "PUT",
        "/cpb/mp",
        &format!("partNumber=1&uploadId={id}"),
        &part,
    );
    ok(&r);
    let tag = r.header("etag").unwrap().to_string();
    let r = s.req(
        &s.rw,
        "POST",
        "/cpb/mp",
        &format!("uploadId={id}"),
        complete_body(&[(1, tag, String::new())]).as_bytes(),
    );
    ok(&r);
    let mp_tag = s.get("/cpb/mp").header("etag").unwrap().to_string();
    assert!(mp_tag.ends_with("-1\""), "{mp_tag}");
    let r = put_with(&s, "/cpb/mp", &[("if-match", &md5_etag(&part))], b"x");
    assert_eq!(code(&r), "PreconditionFailed");
    ok(&put_with(
        &s,
        "/cpb/mp",
        &[("if-match", &mp_tag)],
        b"replaced",
    ));
    unchanged(&s, "/cpb/mp", b"replaced");
    s.srv.check();
}

/// The interim 100 Continue (the early checks passed, the body is
/// awaited), read off the socket.
fn wait_continue(c: &mut super::Conn) {
    use std::io::Read;
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        c.s.read_exact(&mut b).expect("an interim answer");
        got.push(b[0]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

/// A body large enough to be received over several turns: the object
/// changes while it arrives. The name is given only if the object is
/// still the one whose ETag matched.
#[test]
fn conditional_put_checks_again_when_the_body_is_in() {
    let s = super::s3_server();
    ok(&s.put("/lpb", b""));
    ok(&s.put("/lpb/o", b"v1"));
    let e1 = md5_etag(b"v1");
    // Send the head (the precondition holds), then replace the object,
    // then the body.
    let body = super::super::net_common::data(2 << 20, 9);
    let p = pktfs_s3::sigv4::PayloadMode::Sha256(pktfs_s3::sigv4::sha256(&body));
    let bytes = super::signed(
        Some(&s.rw),
        "PUT",
        "/lpb/o",
        "",
        &[("if-match", &e1), ("expect", "100-continue")],
        &body,
        p,
    );
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut c = super::Conn::new(s.addr);
    c.send(&bytes[..head_end]);
    wait_continue(&mut c);
    ok(&s.put("/lpb/o", b"v2 (a concurrent writer)"));
    c.send(&bytes[head_end..]);
    let r = c.response(false).expect("an answer");
    assert_eq!((r.status, code(&r).as_str()), (412, "PreconditionFailed"));
    drop(c);
    unchanged(&s, "/lpb/o", b"v2 (a concurrent writer)");
    // Removed while the body arrived: a conflict (409), not stored.
    let e2 = md5_etag(b"v2 (a concurrent writer)");
    let bytes = super::signed(
        Some(&s.rw),
        "PUT",
        "/lpb/o",
        "",
        &[("if-match", &e2), ("expect", "100-continue")],
        &body,
        p,
    );
    let mut c = super::Conn::new(s.addr);
    c.send(&bytes[..head_end]);
    wait_continue(&mut c);
    assert_eq!(s.req(&s.rw, "DELETE", "/lpb/o", "", b"").status, 204);
    c.send(&bytes[head_end..]);
    let r = c.response(false).expect("an answer");
    assert_eq!(
        (r.status, code(&r).as_str()),
        (409, "ConditionalRequestConflict")
    );
    drop(c);
    assert!(s.srv.lookup("/lpb/o").is_none());
    s.srv.check();
}

#[test]
fn conditional_get_and_head_compare_the_s3_etag() {
    let s = super::s3_server();
    ok(&s.put("/cgb", b""));
    let v = super::super::net_common::data(5000, 2);
    ok(&s.put("/cgb/o", &v));
    let e = md5_etag(&v);
    let bare = e.trim_matches('"').to_string();
    for method in ["GET", "HEAD"] {
        let get = |h: &[(&str, &str)]| s.req_with(&s.rw, method, "/cgb/o", "", h, b"");
        let cases: &[(&[(&str, &str)], u16)] = &[
            (&[("if-match", &e)], 200),
            (&[("if-match", &bare)], 200),
            (&[("if-match", "\"0123\"")], 412),
            (&[("if-none-match", &e)], 304),
            (&[("if-none-match", &bare)], 304),
            (&[("if-none-match", "\"0123\"")], 200),
            (&[("if-modified-since", FUTURE)], 304),
            (&[("if-modified-since", PAST)], 200),
            (&[("if-unmodified-since", PAST)], 412),
            (&[("if-unmodified-since", FUTURE)], 200),
            // If-Match true and If-Unmodified-Since false: 200.
            (&[("if-match", &e), ("if-unmodified-since", PAST)], 200),
            // If-None-Match false and If-Modified-Since true: 304.
            (&[("if-none-match", &e), ("if-modified-since", PAST)], 304),
        ];
        for (h, want) in cases {
            let r = get(h);
            assert_eq!(r.status, *want, "{method} {h:?}");
            if *want == 412 && method == "GET" {
                assert_eq!(code(&r), "PreconditionFailed");
            }
            if *want == 304 {
                assert_eq!(r.header("etag"), Some(e.as_str()), "{method} {h:?}");
            }
            if *want == 200 && method == "GET" {
                assert_eq!(r.body, v);
            }
        }
        // If-Match on a missing key: 404.
        let r = s.req_with(&s.rw, method, "/cgb/none", "", &[("if-match", &e)], b"");
        assert_eq!(r.status, 404, "{method}");
    }
    s.srv.check();
}

#[test]
fn conditional_copy_object_destination_and_source() {
    let s = super::s3_server();
    ok(&s.put("/ccb", b""));
    let src = b"the source".to_vec();
    ok(&s.put("/ccb/src", &src));
    ok(&s.put("/ccb/dst", b"the destination"));
    let es = md5_etag(&src);
    let ed = md5_etag(b"the destination");
    let copy = |h: &[(&str, &str)]| {
        let mut all = vec![("x-amz-copy-source", "/ccb/src")];
        all.extend_from_slice(h);
        s.req_with(&s.rw, "PUT", "/ccb/dst", "", &all, b"")
    };
    let refused: &[Refused] = &[
        (&[("if-none-match", "*")], 412, "PreconditionFailed"),
        (&[("if-match", &es)], 412, "PreconditionFailed"),
        (&[("if-none-match", &ed)], 501, "NotImplemented"),
        (
            &[("x-amz-copy-source-if-match", &ed)],
            412,
            "PreconditionFailed",
        ),
        (
            &[("x-amz-copy-source-if-none-match", &es)],
            412,
            "PreconditionFailed",
        ),
        (
            &[("x-amz-copy-source-if-modified-since", FUTURE)],
            412,
            "PreconditionFailed",
        ),
        (
            &[("x-amz-copy-source-if-unmodified-since", PAST)],
            412,
            "PreconditionFailed",
        ),
        (
            &[
                ("x-amz-copy-source-if-none-match", &es),
                ("x-amz-copy-source-if-modified-since", PAST),
            ],
            412,
            "PreconditionFailed",
        ),
    ];
    for (h, status, c) in refused {
        let r = copy(h);
        assert_eq!((r.status, code(&r).as_str()), (*status, *c), "{h:?}");
        unchanged(&s, "/ccb/dst", b"the destination");
    }
    // Both sides hold: copied.
    let r = copy(&[
        ("if-match", &ed),
        ("x-amz-copy-source-if-match", &es),
        ("x-amz-copy-source-if-unmodified-since", PAST),
    ]);
    ok(&r);
    assert_eq!(xml_field(&r, "ETag").unwrap().replace("&quot;", "\""), es);
    unchanged(&s, "/ccb/dst", &src);
    // If-None-Match: * onto a new key; If-Match onto a missing one.
    ok(&s.req_with(
        &s.rw,
        "PUT",
        "/ccb/fresh",
        "",
        &[("x-amz-copy-source", "/ccb/src"), ("if-none-match", "*")],
        b"",
    ));
    unchanged(&s, "/ccb/fresh", &src);
    let r = s.req_with(
        &s.rw,
        "PUT",
        "/ccb/absent",
        "",
        &[("x-amz-copy-source", "/ccb/src"), ("if-match", &es)],
        b"",
    );
    assert_eq!((r.status, code(&r).as_str()), (404, "NoSuchKey"));
    assert!(s.srv.lookup("/ccb/absent").is_none());
    s.srv.check();
}

#[test]
fn conditional_complete_multipart_upload() {
    let s = super::s3_server();
    ok(&s.put("/cmb", b""));
    ok(&s.put("/cmb/o", b"there already"));
    let part = super::super::net_common::data(3000, 4);
    let upload = |path: &str| {
        let id = create_upload(&s, path, &[]);
        let r = s.req(
            &s.rw,
            "PUT",
            path,
            &format!("partNumber=1&uploadId={id}"),
            &part,
        );
        ok(&r);
        let body = complete_body(&[(1, r.header("etag").unwrap().to_string(), String::new())]);
        (id, body)
    };
    let complete = |path: &str, id: &str, body: &str, h: &[(&str, &str)]| {
        s.req_with(
            &s.rw,
            "POST",
            path,
            &format!("uploadId={id}"),
            h,
            body.as_bytes(),
        )
    };
    let (id, body) = upload("/cmb/o");
    let r = complete("/cmb/o", &id, &body, &[("if-none-match", "*")]);
    assert_eq!((r.status, code(&r).as_str()), (412, "PreconditionFailed"));
    unchanged(&s, "/cmb/o", b"there already");
    let r = complete("/cmb/o", &id, &body, &[("if-match", "\"0123\"")]);
    assert_eq!(code(&r), "PreconditionFailed");
    let r = complete("/cmb/o", &id, &body, &[("if-none-match", "\"0123\"")]);
    assert_eq!((r.status, code(&r).as_str()), (501, "NotImplemented"));
    unchanged(&s, "/cmb/o", b"there already");
    // The upload is still there, its part with it.
    assert_eq!(list_parts(&s, "/cmb/o", &id).len(), 1);
    let e = md5_etag(b"there already");
    ok(&complete("/cmb/o", &id, &body, &[("if-match", &e)]));
    assert_eq!(s.srv.read("/cmb/o").unwrap(), part);
    // Onto a missing key: If-Match is 404, If-None-Match: * creates it.
    let (id, body) = upload("/cmb/n");
    let r = complete("/cmb/n", &id, &body, &[("if-match", &e)]);
    assert_eq!((r.status, code(&r).as_str()), (404, "NoSuchKey"));
    assert!(s.srv.lookup("/cmb/n").is_none());
    ok(&complete("/cmb/n", &id, &body, &[("if-none-match", "*")]));
    assert_eq!(s.srv.read("/cmb/n").unwrap(), part);
    s.srv.check();
}

#[test]
fn conditional_delete_object() {
    let s = super::s3_server();
    ok(&s.put("/cdb", b""));
    ok(&s.put("/cdb/o", b"keep me"));
    let e = md5_etag(b"keep me");
    let del = |h: &[(&str, &str)]| s.req_with(&s.rw, "DELETE", "/cdb/o", "", h, b"");
    let r = del(&[("if-match", "\"0123\"")]);
    assert_eq!((r.status, code(&r).as_str()), (412, "PreconditionFailed"));
    unchanged(&s, "/cdb/o", b"keep me");
    assert_eq!(del(&[("if-match", e.trim_matches('"'))]).status, 204);
    assert!(s.srv.lookup("/cdb/o").is_none());
    // A missing key: 204, as S3 answers.
    assert_eq!(del(&[("if-match", &e)]).status, 204);
    s.srv.check();
}

/// Compare-and-swap from many clients at once: each reads the counter
/// object (its bytes and ETag) and writes the next value with If-Match.
/// Exact preconditions lose no increment; a precondition checked against
/// a stale state would let two writers both succeed from one value.
#[test]
fn conditional_writes_are_exact_against_concurrent_writers() {
    let s = super::s3_server();
    ok(&s.put("/rcb", b""));
    ok(&s.put("/rcb/n", b"0"));
    let threads = 6;
    let each = 15;
    let wins = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| {
                let mut done = 0;
                let mut tries = 0;
                while done < each {
                    tries += 1;
                    assert!(tries < 10_000, "no progress");
                    let g = s.get("/rcb/n");
                    ok(&g);
                    let n: u64 = String::from_utf8_lossy(&g.body).parse().unwrap();
                    let tag = g.header("etag").unwrap().to_string();
                    let next = (n + 1).to_string();
                    let r = put_with(&s, "/rcb/n", &[("if-match", &tag)], next.as_bytes());
                    match r.status {
                        200 => {
                            done += 1;
                            wins.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        412 | 409 => {}
                        other => panic!("{other}: {}", String::from_utf8_lossy(&r.body)),
                    }
                }
            });
        }
    });
    let total = wins.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(total, threads * each);
    assert_eq!(
        s.srv.read("/rcb/n").unwrap(),
        total.to_string().into_bytes(),
        "an increment was lost"
    );
    // Racing creates: exactly one wins.
    for round in 0..5 {
        let key = format!("/rcb/once{round}");
        let won = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|sc| {
            for t in 0..threads {
                let (key, won, s) = (&key, &won, &s);
                sc.spawn(move || {
                    let body = format!("writer {t}");
                    let r = put_with(s, key, &[("if-none-match", "*")], body.as_bytes());
                    match r.status {
                        200 => {
                            won.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        412 | 409 => {}
                        other => panic!("{other}: {}", String::from_utf8_lossy(&r.body)),
                    }
                });
            }
        });
        assert_eq!(won.load(std::sync::atomic::Ordering::Relaxed), 1, "{key}");
    }
    s.srv.check();
}
