//! HTTP/1.1 server over real sockets on 127.0.0.1.

use std::io::{Read, Write};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::net_common::*;

const MIB: u64 = 1 << 20;

#[test]
fn put_get_roundtrip_lands_as_network_records() {
    let s = server(64 * MIB, |_| {});
    let body = data(300_000, 1);
    let mut c = Conn::new(s.http);
    let req = req_bytes("PUT", "/dir/a.bin", &[], &body);
    let head_len = req.len() - body.len();
    let sent_ns = wall_ns();
    c.send(&req);
    let r = c.response(false).unwrap();
    let answered_ns = wall_ns();
    assert_eq!(r.status, 201, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("location"), Some("/dir/a.bin"));
    let g = c.request("GET", "/dir/a.bin", &[], b"");
    assert_eq!(g.status, 200);
    assert_eq!(g.body, body);
    assert_eq!(g.header("accept-ranges"), Some("bytes"));
    assert!(g.header("etag").is_some() && g.header("last-modified").is_some());
    // The file is its packets: every record came from the network and was
    // stamped between the send and the answer (1 µs of slack for the
    // kernel's clock read against ours), the first one starts after the
    // request head (skipped by its offset, its sequence number is its
    // position in the connection's stream), the CRCs match the bytes, and
    // stream positions increase.
    let a = s.lookup("/dir/a.bin").unwrap();
    let ch = s.vol.chain(a.ino).unwrap();
    assert!(!ch.is_empty());
    for e in &ch {
        assert!(e.from_network, "{e:?}");
        assert!(
            e.timestamp_ns + 1_000 >= sent_ns && e.timestamp_ns <= answered_ns,
            "stamped {} outside the send at {sent_ns} .. the answer at {answered_ns}",
            e.timestamp_ns
        );
    }
    assert_eq!(ch[0].seq, head_len as u64, "first record skips the head");
    let mut off = 0u64;
    for (k, e) in ch.iter().enumerate() {
        assert_eq!(e.file_off, off);
        let bytes = &body[off as usize..(off + e.len as u64) as usize];
        assert_eq!(e.payload_crc, pktfs_layout::crc32c(bytes));
        assert_eq!(
            e.seq,
            head_len as u64 + off,
            "record {k}: seq is the stream position"
        );
        off += e.len as u64;
    }
    assert_eq!(off, body.len() as u64);
    // Replacing answers 204; HEAD gives the length without a body.
    let body2 = data(1000, 2);
    assert_eq!(c.request("PUT", "/dir/a.bin", &[], &body2).status, 204);
    let h = c.request("HEAD", "/dir/a.bin", &[], b"");
    assert_eq!((h.status, h.header("content-length")), (200, Some("1000")));
    assert_eq!(http(s.http, "GET", "/dir/a.bin", &[], b"").body, body2);
    // Directory listing.
    let l = http(s.http, "GET", "/", &[], b"");
    assert_eq!(String::from_utf8_lossy(&l.body), "dir/\n");
    let l = http(s.http, "GET", "/dir", &[], b"");
    assert_eq!(String::from_utf8_lossy(&l.body), "a.bin\n");
    // The change callback heard about the directory and the file.
    let ch = s.changes.lock().unwrap().clone();
    assert!(ch.iter().any(|c| c.starts_with("entry 1 dir ")), "{ch:?}");
    assert!(
        ch.iter().filter(|c| c.contains(" a.bin ")).count() >= 2,
        "{ch:?}"
    );
    drop(c);
    s.check();
}

/// An empty path segment names nothing: refused (400) wherever it is,
/// but for a trailing `/`; nothing is stored or removed by such a request.
#[test]
fn empty_path_segments_are_refused() {
    let s = server(32 * MIB, |_| {});
    assert_eq!(http(s.http, "PUT", "/e/a", &[], b"x").status, 201);
    for (m, path) in [
        ("GET", "//"),
        ("GET", "//e/a"),
        ("PUT", "//e/b"),
        ("PUT", "/e//b"),
        ("DELETE", "/e//a"),
        ("HEAD", "/e/a//"),
    ] {
        let r = http(s.http, m, path, &[], b"");
        assert_eq!(
            r.status,
            400,
            "{m} {path}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert!(s.lookup("/e/b").is_none());
    assert_eq!(s.read("/e/a").unwrap(), b"x", "nothing was removed");
    // A trailing `/` is no empty segment: the directory's listing.
    let l = http(s.http, "GET", "/e/", &[], b"");
    assert_eq!((l.status, l.body.as_slice()), (200, &b"a\n"[..]));
    s.check();
}

#[test]
fn keep_alive_and_pipelining() {
    let s = server(32 * MIB, |_| {});
    let mut c = Conn::new(s.http);
    let mut all = Vec::new();
    all.extend(req_bytes("PUT", "/p", &[], b"hello"));
    all.extend(req_bytes("GET", "/p", &[], b""));
    all.extend(req_bytes("PUT", "/q", &[], &data(70_000, 3)));
    all.extend(req_bytes("HEAD", "/q", &[], b""));
    all.extend(req_bytes("DELETE", "/p", &[], b""));
    all.extend(req_bytes("GET", "/p", &[], b""));
    all.extend(req_bytes("OPTIONS", "/", &[], b""));
    c.send(&all);
    let r: Vec<_> = [false, false, false, true, false, false, false]
        .iter()
        .map(|&h| c.response(h).unwrap())
        .collect();
    let st: Vec<u16> = r.iter().map(|x| x.status).collect();
    assert_eq!(st, vec![201, 200, 201, 200, 204, 404, 204]);
    assert_eq!(r[1].body, b"hello");
    assert_eq!(r[3].header("content-length"), Some("70000"));
    assert_eq!(s.read("/q").unwrap(), data(70_000, 3));
    // Many small pipelined PUTs in one write.
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend(req_bytes(
            "PUT",
            &format!("/many/{i}"),
            &[],
            format!("body {i}").as_bytes(),
        ));
    }
    c.send(&batch);
    for _ in 0..200 {
        assert_eq!(c.response(false).unwrap().status, 201);
    }
    for i in 0..200 {
        assert_eq!(
            s.read(&format!("/many/{i}")).unwrap(),
            format!("body {i}").as_bytes()
        );
    }
    // HTTP/1.0 closes after the response unless asked to keep alive.
    let mut c10 = Conn::new(s.http);
    c10.send(b"GET /q HTTP/1.0\r\n\r\n");
    assert_eq!(c10.response(false).unwrap().status, 200);
    assert!(c10.closed_by_server());
    drop(c);
    s.check();
}

fn chunked(parts: &[&[u8]], ext: bool, trailer: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for p in parts {
        if ext {
            v.extend(format!("{:X};name=val\r\n", p.len()).into_bytes());
        } else {
            v.extend(format!("{:x}\r\n", p.len()).into_bytes());
        }
        v.extend_from_slice(p);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n");
    if trailer {
        v.extend_from_slice(b"X-Checksum: 1\r\n");
    }
    v.extend_from_slice(b"\r\n");
    v
}

#[test]
fn chunked_bodies() {
    let s = server(64 * MIB, |_| {});
    let big = data(3_000_000, 4);
    let parts: Vec<&[u8]> = vec![
        &big[..1],
        &big[1..100_000],
        &big[100_000..100_003],
        &big[100_003..],
    ];
    let mut c = Conn::new(s.http);
    let mut req = req_bytes("PUT", "/c", &[("Transfer-Encoding", "chunked")], b"");
    req.extend(chunked(&parts, true, true));
    // Send in odd-sized pieces so framing straddles recvs.
    for piece in req.chunks(7777) {
        c.send(piece);
    }
    let r = c.response(false).unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(s.read("/c").unwrap(), big);
    // Same connection still usable after the terminating chunk.
    let mut req = req_bytes("POST", "/d", &[("Transfer-Encoding", "chunked")], b"");
    req.extend(chunked(&[b"abc", b"defg"], false, false));
    c.send(&req);
    assert_eq!(c.response(false).unwrap().status, 201);
    assert_eq!(s.read("/d").unwrap(), b"abcdefg");
    // An empty chunked body makes an empty file.
    let mut req = req_bytes("PUT", "/e", &[("Transfer-Encoding", "chunked")], b"");
    req.extend(b"0\r\n\r\n");
    c.send(&req);
    assert_eq!(c.response(false).unwrap().status, 201);
    assert_eq!(s.read("/e").unwrap(), b"");
    drop(c);
    // Bad framing: 400, nothing stored.
    for bad in [
        &b"zz\r\nabc\r\n0\r\n\r\n"[..],
        b"3\r\nabcX\r\n0\r\n\r\n",
        b"\r\n\r\n",
        b"fffffffffffffffff\r\n",
    ] {
        let mut req = req_bytes("PUT", "/bad", &[("Transfer-Encoding", "chunked")], b"");
        req.extend_from_slice(bad);
        let r = http(s.http, "PUT", "/x", &[], b"ok"); // server still fine
        assert!(r.status == 201 || r.status == 204);
        let mut c = Conn::new(s.http);
        c.send(&req);
        let r = c.response(false).unwrap();
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(bad));
        assert!(s.lookup("/bad").is_none());
        drop(c);
    }
    // Unknown codings and ambiguous framing.
    let r = http(s.http, "PUT", "/g", &[("Transfer-Encoding", "gzip")], b"");
    assert_eq!(r.status, 501);
    let mut c = Conn::new(s.http);
    c.send(b"PUT /h HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
    assert_eq!(c.response(false).unwrap().status, 400);
    assert!(s.lookup("/h").is_none());
    drop(c);
    s.check();
}

#[test]
fn ranges_and_head() {
    let s = server(32 * MIB, |_| {});
    let body = data(100_000, 5);
    assert_eq!(http(s.http, "PUT", "/r", &[], &body).status, 201);
    type Case = (&'static str, u16, Option<(usize, usize)>);
    let cases: &[Case] = &[
        ("bytes=0-9", 206, Some((0, 10))),
        ("bytes=99990-", 206, Some((99_990, 100_000))),
        ("bytes=-5", 206, Some((99_995, 100_000))),
        ("bytes=50000-50000", 206, Some((50_000, 50_001))),
        ("bytes=10-2000000", 206, Some((10, 100_000))),
        ("bytes=100000-", 416, None),
        ("bytes=-0", 416, None),
        ("bytes=5-1", 200, Some((0, 100_000))), // invalid: ignored
        ("bytes=0-1,5-6", 200, Some((0, 100_000))), // several ranges: ignored
        ("lines=1-2", 200, Some((0, 100_000))),
    ];
    let mut c = Conn::new(s.http);
    for (range, status, want) in cases {
        let r = c.request("GET", "/r", &[("Range", range)], b"");
        assert_eq!(r.status, *status, "{range}");
        match want {
            Some((a, b)) => {
                assert_eq!(r.body, &body[*a..*b], "{range}");
                if *status == 206 {
                    assert_eq!(
                        r.header("content-range").unwrap(),
                        format!("bytes {a}-{}/100000", b - 1)
                    );
                }
            }
            None => assert_eq!(r.header("content-range"), Some("bytes */100000")),
        }
    }
    let h = c.request("HEAD", "/r", &[("Range", "bytes=0-9")], b"");
    assert_eq!((h.status, h.header("content-length")), (206, Some("10")));
    // Holes are sent as zeros.
    let a = s.lookup("/r").unwrap();
    s.vol.write(a.ino, 300_000, b"tail").unwrap();
    let g = c.request("GET", "/r", &[("Range", "bytes=99999-300003")], b"");
    assert_eq!(g.status, 206);
    assert_eq!(g.body.len(), 200_005);
    assert_eq!(g.body[0], body[99_999]);
    assert!(g.body[1..200_001].iter().all(|&b| b == 0));
    assert_eq!(&g.body[200_001..], b"tail");
}

#[test]
fn paths_never_leave_the_tree() {
    let s = server(32 * MIB, |_| {});
    let long = format!("/{}", "n".repeat(256));
    let deep = "/abcdefgh".repeat(600);
    let bad = [
        "/../x",
        "/a/../../x",
        "/%2e%2e/x",
        "/%2E%2e",
        "/./x",
        "/a%2Fb",
        "/a%2fb",
        "/a%00b",
        "/a%0ab",
        "/%zz",
        "x",
        long.as_str(),
        deep.as_str(),
    ];
    for t in bad {
        for m in ["GET", "PUT", "DELETE"] {
            let r = http(s.http, m, t, &[], if m == "PUT" { b"data" } else { b"" });
            assert_eq!(r.status, 400, "{m} {t}");
        }
    }
    // A raw NUL byte in the request line is malformed.
    let mut c = Conn::new(s.http);
    c.send(b"GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response(false).unwrap().status, 400);
    assert!(
        s.vol.list_dir(s.vol.root()).unwrap().is_empty(),
        "nothing was created"
    );
    // Fine names with odd bytes work and list back.
    assert_eq!(
        http(s.http, "PUT", "/sp%20ace%C3%A9", &[], b"x").status,
        201
    );
    assert_eq!(s.read("/sp aceé").unwrap(), b"x");
    let ok = format!("/{}", "n".repeat(255));
    assert_eq!(http(s.http, "PUT", &ok, &[], b"y").status, 201);
    // Symlinks are not followed.
    let root = s.vol.root();
    s.vol.symlink(root, b"link", b"/etc", 0, 0).unwrap();
    assert_eq!(http(s.http, "GET", "/link", &[], b"").status, 404);
    assert_eq!(http(s.http, "GET", "/link/passwd", &[], b"").status, 404);
    // Storing onto a directory, or through a file, is a conflict.
    assert_eq!(http(s.http, "PUT", "/d/f", &[], b"1").status, 201);
    assert_eq!(http(s.http, "PUT", "/d", &[], b"1").status, 409);
    assert_eq!(http(s.http, "PUT", "/d/f/g", &[], b"1").status, 409);
    assert_eq!(http(s.http, "DELETE", "/d", &[], b"").status, 409);
    assert_eq!(http(s.http, "PUT", "/", &[], b"1").status, 405);
}

#[test]
fn bearer_token_and_read_only() {
    let s = server(32 * MIB, |c| {
        c.token = Some(pktfs_netpath::Token::from_file_contents("s3cret\n").unwrap())
    });
    let r = http(s.http, "PUT", "/t", &[], b"x");
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").is_some());
    assert_eq!(
        http(
            s.http,
            "PUT",
            "/t",
            &[("Authorization", "Bearer wrong")],
            b"x"
        )
        .status,
        401
    );
    assert_eq!(
        http(
            s.http,
            "PUT",
            "/t",
            &[("Authorization", "Bearer s3cre")],
            b"x"
        )
        .status,
        401
    );
    assert!(s.lookup("/t").is_none());
    assert_eq!(
        http(
            s.http,
            "PUT",
            "/t",
            &[("Authorization", "Bearer s3cret")],
            b"x"
        )
        .status,
        201
    );
    // Reads need the token too (issue "safe to expose"; `--public-read`
    // opens them, tests/tests/hostile/access.rs).
    assert_eq!(
        http(s.http, "GET", "/t", &[], b"").status,
        401,
        "reads need the token"
    );
    assert_eq!(
        http(
            s.http,
            "GET",
            "/t",
            &[("Authorization", "Bearer s3cret")],
            b""
        )
        .status,
        200
    );
    assert_eq!(http(s.http, "DELETE", "/t", &[], b"").status, 401);
    assert_eq!(
        http(
            s.http,
            "DELETE",
            "/t",
            &[("Authorization", "bearer s3cret")],
            b""
        )
        .status,
        204
    );

    let s = server(32 * MIB, |c| c.read_only = true);
    let root = s.vol.root();
    let f = s.vol.create(root, b"f", 0o644, 0, 0).unwrap();
    s.vol.write(f.ino, 0, b"ro").unwrap();
    assert_eq!(http(s.http, "PUT", "/g", &[], b"x").status, 405);
    assert_eq!(http(s.http, "DELETE", "/f", &[], b"").status, 405);
    assert_eq!(http(s.http, "GET", "/f", &[], b"").body, b"ro");
    assert!(s.lookup("/g").is_none());
    drop(s);

    // A volume opened read-only: heads are received in DRAM, GET works.
    let (dir, vol) = image(16 * MIB);
    let root = vol.root();
    let f = vol.create(root, b"f", 0o644, 0, 0).unwrap();
    vol.write(f.ino, 0, &data(300_000, 1)).unwrap();
    let path = dir.path().join("img");
    drop(vol);
    let vol = std::sync::Arc::new(
        pktfs_fs::Volume::open(
            &path,
            &pktfs_fs::OpenOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    let s = serve(dir, vol, |_| {});
    let mut c = Conn::new(s.http);
    for _ in 0..3 {
        assert_eq!(c.request("GET", "/f", &[], b"").body, data(300_000, 1));
        assert_eq!(c.request("PUT", "/g", &[], b"x").status, 405);
    }
}

#[test]
fn body_larger_than_free_space_is_507_and_leaves_nothing() {
    let s = server(8 * MIB, |_| {});
    let free0 = s.free_blocks();
    let files0 = s.vol.statfs().files_free;
    let too_big = (free0 + 10) * s.vol.statfs().block_size as u64;
    // Announced length: refused before anything is received.
    let mut c = Conn::new(s.http);
    c.send(format!("PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: {too_big}\r\nExpect: 100-continue\r\n\r\n").as_bytes());
    let r = c.response(false).unwrap();
    assert_eq!(r.status, 507);
    // Chunked: discovered while receiving, and answered 507 all the same
    // (on the event loop too, where the ring runs dry first: the answer is
    // sent and what the client still sends is read and thrown away, so the
    // close does not reset the answer away).
    let mut c = Conn::new(s.http);
    c.send(&req_bytes(
        "PUT",
        "/big2",
        &[("Transfer-Encoding", "chunked")],
        b"",
    ));
    let chunk = data(1 << 20, 9);
    let mut status = None;
    for _ in 0..(too_big >> 20) + 2 {
        if c.s.write_all(&chunk_frame(&chunk)).is_err() {
            break;
        }
    }
    let _ = c.s.write_all(b"0\r\n\r\n");
    if let Some(r) = c.response(false) {
        status = Some(r.status);
    }
    assert_eq!(
        status,
        Some(507),
        "a chunked upload too large for the image"
    );
    drop(c);
    s.settle();
    assert!(s.lookup("/big").is_none() && s.lookup("/big2").is_none());
    assert_eq!(s.free_blocks(), free0, "all space back");
    assert_eq!(s.vol.statfs().files_free, files0);
    // And the server still stores what fits.
    assert_eq!(http(s.http, "PUT", "/small", &[], b"fits").status, 201);
    // A full volume still answers GET and DELETE (heads land in DRAM).
    let mut fill = 0;
    loop {
        let r = http(
            s.http,
            "PUT",
            &format!("/fill{fill}"),
            &[],
            &data(512 << 10, fill),
        );
        if r.status != 201 {
            assert_eq!(r.status, 507);
            break;
        }
        fill += 1;
    }
    assert_eq!(http(s.http, "GET", "/small", &[], b"").body, b"fits");
    for i in 0..fill {
        assert_eq!(
            http(s.http, "DELETE", &format!("/fill{i}"), &[], b"").status,
            204
        );
    }
    s.check();
}

#[test]
fn incomplete_upload_is_never_visible_and_never_replaces() {
    let mut s = server(32 * MIB, |c| c.io_timeout = Duration::from_millis(500));
    assert_eq!(
        http(s.http, "PUT", "/keep", &[], b"old contents").status,
        201
    );
    s.settle();
    let st0 = s.vol.statfs();
    // Client goes away half way.
    let mut c = Conn::new(s.http);
    c.send(
        format!(
            "PUT /keep HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            4 << 20
        )
        .as_bytes(),
    );
    c.send(&data(2 << 20, 1));
    drop(c);
    // Client stalls (timeout).
    let mut c = Conn::new(s.http);
    c.send(
        format!(
            "PUT /new HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
            1 << 20
        )
        .as_bytes(),
    );
    c.send(&data(1000, 2));
    let t0 = Instant::now();
    let r = c.response(false);
    assert!(r.is_none() || r.as_ref().unwrap().status == 408, "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    s.settle();
    assert_eq!(s.read("/keep").unwrap(), b"old contents");
    assert!(s.lookup("/new").is_none());
    // Nothing of the abandoned uploads is left: no unnamed file (inode),
    // no record, and, once the server has stopped, no buffer reference
    // that no record accounts for. Free buffer blocks are not compared
    // while the server runs: on the io_uring loops they move with how far
    // the kernel has filled the ring entries it holds.
    let st1 = s.vol.statfs();
    assert_eq!(
        st1.files_free, st0.files_free,
        "abandoned uploads' inodes freed"
    );
    assert_eq!(
        st1.records_free, st0.records_free,
        "abandoned uploads' records freed"
    );
    s.check();
    s.stop();
    assert_eq!(
        s.vol.stray_buffer_refs(),
        0,
        "abandoned uploads' buffers freed"
    );
}

#[test]
fn timeouts_for_idle_and_slow_clients() {
    let s = server(16 * MIB, |c| {
        c.idle_timeout = Duration::from_millis(300);
        c.header_timeout = Duration::from_millis(400);
        c.io_timeout = Duration::from_millis(400);
    });
    // Idle keep-alive connection is closed.
    let mut c = Conn::new(s.http);
    assert_eq!(c.request("PUT", "/a", &[], b"1").status, 201);
    let t0 = Instant::now();
    assert!(c.closed_by_server());
    assert!(t0.elapsed() >= Duration::from_millis(250) && t0.elapsed() < Duration::from_secs(5));
    // Slowloris: a head trickling in gets 408. The sleep is the attack
    // itself (one byte every 50 ms, each well inside the 400 ms io timeout,
    // the whole head not inside the 400 ms head timeout). The client stops
    // as soon as the server has answered, so no later byte can race the
    // answer (a write into a closed connection draws a reset).
    let mut c = Conn::new(s.http);
    let t0 = Instant::now();
    let head =
        b"GET /a HTTP/1.1\r\nHost: x\r\nX-Slow: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy";
    let answered = |c: &Conn| {
        c.s.set_nonblocking(true).unwrap();
        let r = c.s.peek(&mut [0u8; 1]);
        c.s.set_nonblocking(false).unwrap();
        !matches!(r, Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
    };
    let mut sent = 0;
    while sent < head.len() && !answered(&c) {
        c.send(&head[sent..sent + 1]);
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        sent < head.len(),
        "the server let a head trickle for {:?} without answering",
        t0.elapsed()
    );
    assert_eq!(c.response(false).map(|r| r.status), Some(408));
    assert!(t0.elapsed() < Duration::from_secs(3));
    // A slow reader of a large response is cut off, and the server goes on.
    assert_eq!(
        http(s.http, "PUT", "/big", &[], &data(8 << 20, 3)).status,
        201
    );
    let accepted = s.stats().connections;
    let mut s2 = std::net::TcpStream::connect(s.http).unwrap();
    s2.write_all(&req_bytes("GET", "/big", &[], b"")).unwrap();
    // The server took the connection; with the client not reading, the
    // 8 MiB answer stalls and the io timeout must end the connection.
    wait_until(
        "the slow reader's connection accepted",
        Duration::from_secs(5),
        || s.stats().connections > accepted,
    );
    s.settle();
    // Cut off: less than the whole answer ever reached the client.
    s2.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut got = 0usize;
    let mut b = vec![0u8; 1 << 16];
    while let Ok(n @ 1..) = s2.read(&mut b) {
        got += n;
    }
    assert!(got < 8 << 20, "the slow reader got all {got} bytes");
    drop(s2);
    assert_eq!(http(s.http, "GET", "/a", &[], b"").body, b"1");
}

#[test]
fn sixty_four_concurrent_uploads_each_land_in_their_own_file() {
    let s = server(256 * MIB, |_| {});
    let n = 64;
    let barrier = Arc::new(Barrier::new(n));
    let addr = s.http;
    let ts: Vec<_> = (0..n)
        .map(|i| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                let body = data(200_000 + i * 1000, i as u64);
                let mut c = Conn::new(addr);
                b.wait();
                // Send in pieces so connections interleave.
                let req = req_bytes("PUT", &format!("/up/{i}"), &[], &body);
                for p in req.chunks(16 << 10) {
                    c.send(p);
                }
                let r = c.response(false).unwrap();
                assert_eq!(r.status, 201);
                let g = c.request("GET", &format!("/up/{i}"), &[], b"");
                assert_eq!(g.body, body);
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    for i in 0..n {
        assert_eq!(
            s.read(&format!("/up/{i}")).unwrap(),
            data(200_000 + i * 1000, i as u64)
        );
    }
    s.check();
}

#[test]
fn connection_cap_answers_503() {
    let s = server(16 * MIB, |c| c.max_connections = Some(4));
    let mut held: Vec<Conn> = (0..4).map(|_| Conn::new(s.http)).collect();
    for c in &mut held {
        assert_eq!(c.request("GET", "/", &[], b"").status, 200);
    }
    let r = http(s.http, "GET", "/", &[], b"");
    assert_eq!(r.status, 503);
    drop(held);
    s.settle();
    assert_eq!(http(s.http, "GET", "/", &[], b"").status, 200);
}

#[test]
fn expect_100_continue() {
    let s = server(32 * MIB, |_| {});
    let mut c = Conn::new(s.http);
    let body = data(2 << 20, 7);
    c.send(
        format!(
            "PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    // The interim answer comes before any body byte is sent.
    let mut first = [0u8; 25];
    std::io::Read::read_exact(&mut c.s, &mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(&body);
    assert_eq!(c.response(false).unwrap().status, 201);
    assert_eq!(s.read("/e").unwrap(), body);
    assert_eq!(
        http(s.http, "PUT", "/f", &[("Expect", "something-else")], b"x").status,
        417
    );
}

#[test]
fn malformed_input_never_hurts_the_server() {
    let s = server(32 * MIB, |c| {
        c.header_timeout = Duration::from_millis(300);
        c.idle_timeout = Duration::from_millis(300);
    });
    assert_eq!(http(s.http, "PUT", "/stay", &[], b"precious").status, 201);
    let cases: Vec<Vec<u8>> = vec![
        b"\r\n\r\n".to_vec(),
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\n\r\n".to_vec(), // no Host
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_vec(),
        b"PUT /z HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n".to_vec(),
        b"PUT /z HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab".to_vec(),
        b"PUT /z HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n".to_vec(),
        b"PUT /z HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), // no length: 411
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n\r\n",
            "X-A: b\r\n".repeat(100)
        )
        .into_bytes(),
        format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(20_000)).into_bytes(),
        b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![0xff; 5000],
    ];
    for (k, case) in cases.iter().enumerate() {
        let mut c = Conn::new(s.http);
        c.send(case);
        let r = c.response(false);
        let st = r.map(|r| r.status);
        // (Empty lines before a request are skipped: case 0 waits for a
        // request line until the head timeout.)
        assert!(
            matches!(st, Some(400 | 408 | 411 | 431 | 501) | None),
            "case {k}: {st:?}"
        );
    }
    // Seeded random garbage, also after a valid prefix.
    for seed in 0..150u64 {
        let mut c = Conn::new(s.http);
        let mut v = if seed % 2 == 0 {
            Vec::new()
        } else {
            b"PUT /fz HTTP/1.1\r\nHost: x\r\n".to_vec()
        };
        v.extend(data(1 + (seed as usize * 37) % 3000, seed));
        v.extend_from_slice(b"\r\n\r\n");
        let _ = c.s.write_all(&v);
        let _ = c.response(false);
    }
    s.settle();
    assert_eq!(s.read("/stay").unwrap(), b"precious");
    assert_eq!(http(s.http, "GET", "/stay", &[], b"").body, b"precious");
    s.check();
}

#[test]
fn get_while_replaced_or_deleted_sends_one_whole_version() {
    let s = server(128 * MIB, |_| {});
    let old = data(16 << 20, 11);
    assert_eq!(http(s.http, "PUT", "/v", &[], &old).status, 201);
    // A client asks and then does not read for a while: the response is
    // held in flight.
    let mut slow = Conn::new(s.http);
    slow.s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    slow.send(&req_bytes("GET", "/v", &[], b""));
    // The answer has begun arriving (peek blocks, up to the read timeout),
    // so the server chose the version it sends before the changes below.
    slow.s.peek(&mut [0u8; 1]).expect("the answer starts");
    // Meanwhile the file is replaced, deleted, and its space reused.
    let new = data(16 << 20, 12);
    assert_eq!(http(s.http, "PUT", "/v", &[], &new).status, 204);
    assert_eq!(http(s.http, "DELETE", "/v", &[], b"").status, 204);
    for i in 0..6 {
        let r = http(
            s.http,
            "PUT",
            &format!("/w{i}"),
            &[],
            &data(8 << 20, 100 + i),
        );
        assert!(r.status == 201 || r.status == 507);
    }
    let r = slow.response(false).unwrap();
    assert_eq!(r.status, 200);
    assert!(
        r.body == old,
        "the slow client got exactly the version it asked for"
    );
    drop(slow);
    s.check();
}

#[test]
fn uploads_inherit_the_directory_default_acl() {
    let s = server(16 * MIB, |_| {});
    assert_eq!(http(s.http, "PUT", "/acl/first", &[], b"1").status, 201);
    let dir = s.lookup("/acl").expect("made by the upload").ino;
    // default: user::rwx, user:1001:rwx, group::r-x, mask::rwx, other::---
    let mut def = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 7u16, u32::MAX),
        (0x02, 7, 1001),
        (0x04, 5, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 0, u32::MAX),
    ] {
        def.extend_from_slice(&tag.to_le_bytes());
        def.extend_from_slice(&perm.to_le_bytes());
        def.extend_from_slice(&id.to_le_bytes());
    }
    s.vol
        .setxattr(dir, b"system.posix_acl_default", &def, Default::default())
        .unwrap();
    // Before the default ACL: the server's 0644, no ACL.
    let first = s.lookup("/acl/first").unwrap();
    assert_eq!(first.perm, 0o644);
    assert!(s
        .vol
        .getxattr(first.ino, b"system.posix_acl_access")
        .is_err());
    // After: an upload (and a replacing one) gets what a file created in
    // the directory gets: the default ACL masked by 0644.
    for path in ["/acl/second", "/acl/first"] {
        let r = http(s.http, "PUT", path, &[], b"22");
        assert!(r.status == 201 || r.status == 204, "{path}: {r:?}");
        let a = s.lookup(path).unwrap();
        assert_eq!(a.perm, 0o640, "{path}");
        let got = s.vol.getxattr(a.ino, b"system.posix_acl_access").unwrap();
        let user_1001 = got[4..]
            .chunks(8)
            .find(|e| e[0..2] == 0x02u16.to_le_bytes())
            .expect("the named user's entry");
        assert_eq!(&user_1001[4..8], &1001u32.to_le_bytes(), "{path}");
    }
    s.check();
}
