//! The HTTP surface ingest clients rely on, over real sockets: entity tags
//! from the chain, conditional requests, Content-Type, the JSON listing and
//! error bodies.

use std::sync::{Arc, Barrier};

use pktfs_fs::{OpenOptions, Volume};

use crate::net_common::*;

/// The tag the server must give content `b`: its CRC32C (computed here
/// independently, one pass) and its length.
fn tag_of(b: &[u8]) -> String {
    format!("\"c-{:08x}-{:x}\"", crc32c::crc32c(b), b.len())
}

#[test]
fn etag_is_the_content_crc_and_follows_the_content() {
    let mut s = server(128 << 20, |c| c.persister_min = 1 << 20);
    let mut c = Conn::new(s.http);
    // Small (one record), large (several records, the persister path) and
    // empty bodies.
    let bodies = [data(1000, 1), data(5 << 20, 2), Vec::new()];
    for (k, b) in bodies.iter().enumerate() {
        let path = format!("/e/{k}");
        let put = c.request("PUT", &path, &[], b);
        assert_eq!(put.status, 201);
        assert_eq!(put.header("etag"), Some(tag_of(b).as_str()), "PUT {path}");
        let get = c.request("GET", &path, &[], b"");
        assert_eq!(get.body, *b);
        assert_eq!(get.header("etag"), Some(tag_of(b).as_str()), "GET {path}");
        assert!(get.header("last-modified").is_some());
        let head = c.request("HEAD", &path, &[], b"");
        assert_eq!(head.header("etag"), get.header("etag"), "HEAD {path}");
        assert_eq!(head.header("last-modified"), get.header("last-modified"));
    }
    // A range answer carries the whole file's tag.
    let r = c.request("GET", "/e/1", &[("Range", "bytes=10-19")], b"");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("etag"), Some(tag_of(&bodies[1]).as_str()));
    // Overwrite: a new tag, the new content's.
    let newer = data(1000, 3);
    let put = c.request("PUT", "/e/0", &[], &newer);
    assert_eq!(put.status, 204);
    assert_eq!(put.header("etag"), Some(tag_of(&newer).as_str()));
    assert_ne!(tag_of(&newer), tag_of(&bodies[0]));
    // A sparse file with a split record, written through the Volume: the
    // tag covers the holes as zeros and the remnants' own CRCs.
    let f = s
        .vol
        .create(s.vol.root(), b"sparse", 0o644, 0, 0)
        .unwrap()
        .ino;
    s.vol.write(f, 0, &data(300_000, 4)).unwrap();
    s.vol.write(f, 2_000_000, b"tail").unwrap();
    s.vol.write(f, 1234, &data(777, 5)).unwrap();
    let content = s.vol.read(f, 0, u64::MAX).unwrap();
    let get = c.request("GET", "/sparse", &[], b"");
    assert_eq!(get.body, content);
    assert_eq!(get.header("etag"), Some(tag_of(&content).as_str()));
    drop(c);
    s.check();

    // Stable across a remount: the tag depends on the content only.
    let before: Vec<String> = ["/e/0", "/e/1", "/e/2", "/sparse"]
        .iter()
        .map(|p| {
            http(s.http, "HEAD", p, &[], b"")
                .header("etag")
                .unwrap()
                .to_string()
        })
        .collect();
    s.stop();
    // Keep the image's directory, drop the server and its Volume, open
    // the image again and serve it.
    let dir = std::mem::replace(&mut s.dir, tempfile::tempdir().unwrap());
    drop(s);
    let vol = Arc::new(Volume::open(&dir.path().join("img"), &OpenOptions::default()).unwrap());
    let s2 = serve(dir, vol, |_| {});
    for (p, t) in ["/e/0", "/e/1", "/e/2", "/sparse"].iter().zip(&before) {
        let r = http(s2.http, "GET", p, &[], b"");
        assert_eq!(r.header("etag"), Some(t.as_str()), "{p} after remount");
    }
}

#[test]
fn create_only_uploads_race_to_exactly_one_winner() {
    let s = server(64 << 20, |_| {});
    // Sequential: the second create-only upload is refused, nothing
    // changes.
    let h = [("If-None-Match", "*")];
    assert_eq!(http(s.http, "PUT", "/once", &h, b"first").status, 201);
    let r = http(s.http, "PUT", "/once", &h, b"second");
    assert_eq!(r.status, 412);
    assert!(
        String::from_utf8_lossy(&r.body).contains("If-None-Match"),
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(s.read("/once").unwrap(), b"first");
    // Racing: two clients, same name, released together; repeated so the
    // link (not an early lookup) has to decide some of the rounds.
    for round in 0..20 {
        let path = format!("/race/{round}");
        let go = Arc::new(Barrier::new(2));
        let ts: Vec<_> = (0..2u64)
            .map(|k| {
                let (go, path, addr) = (go.clone(), path.clone(), s.http);
                std::thread::spawn(move || {
                    let body = data(50_000, round * 2 + k);
                    let mut c = Conn::new(addr);
                    let req = req_bytes("PUT", &path, &[("If-None-Match", "*")], &body);
                    go.wait();
                    c.send(&req);
                    (c.response(false).expect("answer").status, body)
                })
            })
            .collect();
        let rs: Vec<(u16, Vec<u8>)> = ts.into_iter().map(|t| t.join().unwrap()).collect();
        let mut codes: Vec<u16> = rs.iter().map(|r| r.0).collect();
        codes.sort();
        assert_eq!(codes, [201, 412], "round {round}");
        let winner = &rs.iter().find(|r| r.0 == 201).unwrap().1;
        assert_eq!(&s.read(&path).unwrap(), winner, "round {round}");
    }
    s.check();
}

#[test]
fn if_match_and_if_unmodified_since_guard_changes() {
    let s = server(64 << 20, |_| {});
    let v1 = data(4000, 1);
    let put = http(s.http, "PUT", "/doc", &[], &v1);
    let t1 = put.header("etag").unwrap().to_string();
    // A stale or weak tag: refused, nothing changes.
    for bad in ["\"c-00000000-0\"", &format!("W/{t1}")] {
        let r = http(s.http, "PUT", "/doc", &[("If-Match", bad)], b"lost update");
        assert_eq!(r.status, 412, "If-Match {bad}");
        assert_eq!(s.read("/doc").unwrap(), v1);
    }
    // The current tag (in a list): the update goes through.
    let list = format!("\"other\", {t1}");
    let r = http(s.http, "PUT", "/doc", &[("If-Match", &list)], b"v2");
    assert_eq!(r.status, 204);
    assert_eq!(s.read("/doc").unwrap(), b"v2");
    // If-Match on a name that does not exist: 412, nothing created.
    let r = http(s.http, "PUT", "/nothing", &[("If-Match", "*")], b"x");
    assert_eq!(r.status, 412);
    assert!(s.lookup("/nothing").is_none());
    // If-Unmodified-Since before the last change: 412.
    let r = http(
        s.http,
        "PUT",
        "/doc",
        &[("If-Unmodified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")],
        b"v3",
    );
    assert_eq!(r.status, 412);
    // DELETE honours If-Match.
    let r = http(s.http, "DELETE", "/doc", &[("If-Match", &t1)], b"");
    assert_eq!(r.status, 412);
    assert!(s.lookup("/doc").is_some());
    let t2 = tag_of(b"v2");
    let r = http(s.http, "DELETE", "/doc", &[("If-Match", &t2)], b"");
    assert_eq!(r.status, 204);
    assert!(s.lookup("/doc").is_none());
    // A large body whose precondition fails is refused before it is
    // received (the connection is closed rather than read to the end).
    http(s.http, "PUT", "/big", &[], b"exists");
    let mut c = Conn::new(s.http);
    c.send(
        format!(
            "PUT /big HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\nContent-Length: {}\r\n\r\n",
            8 << 20
        )
        .as_bytes(),
    );
    assert_eq!(c.response(false).unwrap().status, 412);
    assert_eq!(s.read("/big").unwrap(), b"exists");
    s.check();
}

#[test]
fn not_modified_for_current_copies() {
    let s = server(64 << 20, |_| {});
    http(s.http, "PUT", "/page.html", &[], b"<p>hi</p>");
    let mut c = Conn::new(s.http);
    let get = c.request("GET", "/page.html", &[], b"");
    let tag = get.header("etag").unwrap().to_string();
    let lm = get.header("last-modified").unwrap().to_string();
    for m in ["GET", "HEAD"] {
        let r = c.request(m, "/page.html", &[("If-None-Match", &tag)], b"");
        assert_eq!(r.status, 304, "{m}");
        assert_eq!(r.header("etag"), Some(tag.as_str()));
        assert!(r.header("content-length").is_none() && r.body.is_empty());
        let weak = format!("W/{tag}");
        let r = c.request(m, "/page.html", &[("If-None-Match", &weak)], b"");
        assert_eq!(r.status, 304, "{m} weak comparison");
        let r = c.request(m, "/page.html", &[("If-Modified-Since", &lm)], b"");
        assert_eq!(r.status, 304, "{m} If-Modified-Since");
    }
    // An older date, or another tag: the file (If-Modified-Since is ignored
    // next to If-None-Match).
    let old = "Sun, 06 Nov 1994 08:49:37 GMT";
    let r = c.request("GET", "/page.html", &[("If-Modified-Since", old)], b"");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"<p>hi</p>"[..]));
    let r = c.request(
        "GET",
        "/page.html",
        &[("If-None-Match", "\"c-1-1\""), ("If-Modified-Since", &lm)],
        b"",
    );
    assert_eq!(r.status, 200);
    // An unparseable date is ignored.
    let r = c.request("GET", "/page.html", &[("If-Modified-Since", "soon")], b"");
    assert_eq!(r.status, 200);
    // The connection is still in step after the 304s.
    assert_eq!(c.request("GET", "/page.html", &[], b"").body, b"<p>hi</p>");
}

#[test]
fn content_type_from_the_name() {
    let s = server(64 << 20, |_| {});
    for (name, ty) in [
        ("/a.json", "application/json"),
        ("/b.html", "text/html; charset=utf-8"),
        ("/c.tar.gz", "application/gzip"),
        ("/d.png", "image/png"),
        ("/noext", "application/octet-stream"),
        ("/dir.d/file", "application/octet-stream"),
    ] {
        assert_eq!(http(s.http, "PUT", name, &[], b"x").status, 201);
        let r = http(s.http, "GET", name, &[], b"");
        assert_eq!(r.header("content-type"), Some(ty), "{name}");
    }
}

#[test]
fn directory_listing_as_json() {
    let s = server(64 << 20, |_| {});
    for (p, b) in [
        ("/l/b.txt", &b"bee"[..]),
        ("/l/a", b"ay!"),
        ("/l/sub/x", b""),
    ] {
        assert_eq!(http(s.http, "PUT", p, &[], b).status, 201);
    }
    let json = [("Accept", "application/json")];
    let mut c = Conn::new(s.http);
    let r = c.request("GET", "/l/", &json, b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("a JSON listing");
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b.txt", "sub"]);
    assert_eq!(v[0]["type"], "file");
    assert_eq!(v[0]["size"], 3);
    assert_eq!(v[0]["etag"], tag_of(b"ay!"));
    assert_eq!(v[1]["etag"], tag_of(b"bee"));
    assert_eq!(v[2]["type"], "dir");
    assert!(v[2]["etag"].is_null());
    assert!(v[0]["mtime"].as_str().unwrap().ends_with('Z'));
    // HEAD: the head only; the connection stays usable.
    let h = c.request("HEAD", "/l", &json, b"");
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    // A large directory arrives whole (several chunks).
    for k in 0..3000 {
        assert_eq!(
            c.request("PUT", &format!("/big/f{k:05}"), &[], b"0123456789")
                .status,
            201
        );
    }
    let r = c.request("GET", "/big", &json, b"");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 3000);
    assert!(a
        .windows(2)
        .all(|w| w[0]["name"].as_str() < w[1]["name"].as_str()));
    // HTTP/1.0: no chunking; the body ends with the connection.
    let mut c10 = Conn::new(s.http);
    c10.send(b"GET /l HTTP/1.0\r\nAccept: application/json\r\n\r\n");
    let mut all = Vec::new();
    std::io::Read::read_to_end(&mut c10.s, &mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    // Without the Accept header: today's plain list (directory order).
    let r = c.request("GET", "/l", &[], b"");
    let mut lines: Vec<&[u8]> = r
        .body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    lines.sort();
    assert_eq!(lines, [&b"a"[..], b"b.txt", b"sub/"]);
}

#[test]
fn error_bodies_say_what_went_wrong() {
    let s = server(64 << 20, |_| {});
    let r = http(s.http, "GET", "/no/such", &[], b"");
    assert_eq!(r.status, 404);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.starts_with("404 Not Found: /no/such"), "{text}");
    let r = http(
        s.http,
        "GET",
        "/no/such",
        &[("Accept", "application/json")],
        b"",
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["status"], 404);
    assert!(v["error"].as_str().unwrap().contains("/no/such"), "{v}");
    // HEAD of a missing file: the status, no body, connection in step.
    let mut c = Conn::new(s.http);
    let r = c.request("HEAD", "/missing", &[], b"");
    assert_eq!(r.status, 404);
    assert_eq!(c.request("PUT", "/x", &[], b"1").status, 201);
    let r = c.request("PUT", "/x/y", &[], b"1");
    assert_eq!(r.status, 409);
    assert!(
        String::from_utf8_lossy(&r.body).starts_with("409 Conflict: /x/y"),
        "{:?}",
        String::from_utf8_lossy(&r.body)
    );
}

#[test]
fn a_change_while_the_body_arrives_fails_the_precondition() {
    let s = server(64 << 20, |_| {});
    let body = data(200_000, 7);
    // Create-only: the name is free when the upload starts, taken by
    // another client before its body is complete.
    let mut a = Conn::new(s.http);
    let req = req_bytes("PUT", "/late", &[("If-None-Match", "*")], &body);
    a.send(&req[..req.len() - 50_000]);
    assert_eq!(http(s.http, "PUT", "/late", &[], b"first").status, 201);
    a.send(&req[req.len() - 50_000..]);
    assert_eq!(a.response(false).unwrap().status, 412);
    assert_eq!(s.read("/late").unwrap(), b"first");
    drop(a);
    // If-Match: the version matched at the start and was replaced while
    // the body arrived: no lost update.
    let tag = http(s.http, "HEAD", "/late", &[], b"")
        .header("etag")
        .unwrap()
        .to_string();
    let mut a = Conn::new(s.http);
    let req = req_bytes("PUT", "/late", &[("If-Match", &tag)], &body);
    a.send(&req[..req.len() - 50_000]);
    assert_eq!(http(s.http, "PUT", "/late", &[], b"second").status, 204);
    a.send(&req[req.len() - 50_000..]);
    assert_eq!(a.response(false).unwrap().status, 412);
    assert_eq!(s.read("/late").unwrap(), b"second");
    drop(a);
    s.check();
}

/// A request whose body is read before it is acted on (a GET with one)
/// and whose client waits for `100 Continue` gets the 100 at once (RFC
/// 9110 10.1.1), then its answer once the body came; on both transports.
#[test]
fn continue_before_a_body_read_first() {
    for io in [pktfs_netpath::IoMode::Uring, pktfs_netpath::IoMode::Threads] {
        let s = server(16 << 20, |c| c.io = io);
        let mut c = Conn::new(s.http);
        c.s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        c.send(b"GET /nothing HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
        let mut got = [0u8; 25];
        std::io::Read::read_exact(&mut c.s, &mut got).expect("a 100 Continue before the body");
        assert_eq!(&got, b"HTTP/1.1 100 Continue\r\n\r\n", "{io:?}");
        c.send(b"hello");
        assert_eq!(c.response(false).expect("an answer").status, 404, "{io:?}");
        drop(c);
        s.check();
    }
}
