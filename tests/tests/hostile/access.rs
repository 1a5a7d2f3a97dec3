//! The access model against clients that have no token, a wrong one, or
//! spell the reserved names cleverly; and raw mode against connections
//! that skip the preface, send nothing, or come one too many. Every attack
//! is run on the io_uring loops, the loops on epoll, and threads: the
//! answer is the same, nothing leaks in a body, nothing is stored.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use pktfs_netpath::{IoMode, Token};

use crate::net_common::{http, server, wait_until, Conn, Response, Server};

const MIB: u64 = 1 << 20;
const TOKEN: &str = "hostile-test-token-0123";
/// What the stored file holds: it must never show in a refusal.
const SECRET: &[u8] = b"the secret payload 8d1f";

fn token() -> Token {
    Token::from_file_contents(TOKEN).unwrap()
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// A server with the token (and `tweak`), holding `/dir/secret.txt`.
fn guarded(io: IoMode, tweak: impl FnOnce(&mut pktfs_netpath::Config)) -> Server {
    let s = server(32 * MIB, |c| {
        c.io = io;
        c.token = Some(token());
        tweak(c);
    });
    let auth = bearer();
    let r = http(
        s.http,
        "PUT",
        "/dir/secret.txt",
        &[("Authorization", &auth)],
        SECRET,
    );
    assert_eq!(r.status, 201, "{io:?}");
    s
}

#[track_caller]
fn assert_401(r: &Response, what: &str) {
    assert_eq!(r.status, 401, "{what}");
    let www = r.header("WWW-Authenticate").unwrap_or_default();
    assert!(
        www.starts_with("Bearer"),
        "{what}: WWW-Authenticate {www:?}"
    );
    let body = String::from_utf8_lossy(&r.body);
    for leak in ["secret", "dir", "payload", "pktfs_"] {
        assert!(
            !body.contains(leak),
            "{what}: the 401 body shows {leak:?}: {body}"
        );
    }
}

/// Every kind of read and change without the token, and with a wrong one.
fn every_method_needs_the_token(io: IoMode) {
    let s = guarded(io, |_| {});
    let json = [("Accept", "application/json")];
    let wrong = [("Authorization", "Bearer hostile-test-token-0124")];
    let lower = [("Authorization", "bearer hostile-test-token-012")];
    type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        ("GET", "/dir/secret.txt", &[]),
        ("GET", "/dir/secret.txt", &wrong),
        ("GET", "/dir/secret.txt", &lower),
        ("HEAD", "/dir/secret.txt", &[]),
        ("GET", "/dir/secret.txt", &[("Range", "bytes=0-3")]),
        ("GET", "/", &[]),
        ("GET", "/dir", &[]),
        ("GET", "/dir", &json),
        ("GET", "/dir", &wrong),
        ("GET", "/nonexistent", &[]),
        ("OPTIONS", "/", &[]),
        ("OPTIONS", "/dir/secret.txt", &[]),
        ("GET", "/metrics", &[]),
        ("HEAD", "/metrics", &[]),
        ("GET", "/metrics", &wrong),
        ("DELETE", "/dir/secret.txt", &[]),
        ("BREW", "/dir/secret.txt", &[]),
    ];
    for (m, p, h) in cases {
        let mut c = Conn::new(s.http);
        let r = c.request(m, p, h, b"");
        assert_401(&r, &format!("{io:?} {m} {p} {h:?}"));
        // A refusal keeps the connection: the next request on it is
        // refused the same way.
        let r = c.request("GET", "/dir/secret.txt", &[], b"");
        assert_401(&r, &format!("{io:?} {m} {p}, then GET"));
    }
    // A 404 and a 200 are told apart only with the token (a 401 says
    // nothing about what exists).
    let auth = bearer();
    let a = [("Authorization", auth.as_str())];
    let r = http(s.http, "GET", "/dir/secret.txt", &a, b"");
    assert_eq!((r.status, r.body.as_slice()), (200, SECRET), "{io:?}");
    assert_eq!(http(s.http, "GET", "/dir", &a, b"").status, 200);
    assert_eq!(http(s.http, "GET", "/metrics", &a, b"").status, 200);
    assert_eq!(http(s.http, "OPTIONS", "/", &a, b"").status, 204);
    assert_eq!(http(s.http, "GET", "/nonexistent", &a, b"").status, 404);
    // Changes without the token store and remove nothing.
    for (m, p, body) in [
        ("PUT", "/dir/secret.txt", &b"overwritten"[..]),
        ("PUT", "/new.txt", b"new"),
        ("POST", "/new2.txt", b"new"),
    ] {
        assert_401(&http(s.http, m, p, &[], body), &format!("{io:?} {m} {p}"));
        assert_401(
            &http(s.http, m, p, &wrong, body),
            &format!("{io:?} {m} {p}"),
        );
    }
    assert!(s.lookup("/new.txt").is_none() && s.lookup("/new2.txt").is_none());
    assert_eq!(s.read("/dir/secret.txt").unwrap(), SECRET);
    s.check();
}

/// A refused request's body is not read: a large announced body or a
/// chunked one that never ends is answered 401 at once and the
/// connection closed, and nothing is stored.
fn refused_before_the_body(io: IoMode) {
    let s = guarded(io, |_| {});
    for (m, p) in [("GET", "/dir/secret.txt"), ("PUT", "/big.bin")] {
        for head in [
            vec![("Content-Length", "100000000")],
            vec![("Transfer-Encoding", "chunked")],
        ] {
            let mut c = Conn::new(s.http);
            let t0 = Instant::now();
            // The head and a first piece of a body that never completes.
            let (k, v) = head[0];
            let mut req = format!("{m} {p} HTTP/1.1\r\nHost: t\r\n{k}: {v}\r\n\r\n").into_bytes();
            if head[0].0 == "Transfer-Encoding" {
                req.extend_from_slice(b"10\r\n0123456789abcdef\r\n");
            } else {
                req.extend_from_slice(&[b'x'; 4096]);
            }
            c.send(&req);
            let r = c.response(false).expect("an answer before the body");
            assert_401(&r, &format!("{io:?} {m} {p} {head:?}"));
            assert!(c.closed_by_server(), "{io:?} {m} {head:?}: not closed");
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "{io:?} {m} {head:?}: {:?}",
                t0.elapsed()
            );
        }
    }
    assert!(s.lookup("/big.bin").is_none());
    s.check();
}

fn public_read(io: IoMode) {
    let s = guarded(io, |c| c.public_read = true);
    let json = [("Accept", "application/json")];
    let r = http(s.http, "GET", "/dir/secret.txt", &[], b"");
    assert_eq!((r.status, r.body.as_slice()), (200, SECRET), "{io:?}");
    assert_eq!(
        http(s.http, "HEAD", "/dir/secret.txt", &[], b"").status,
        200
    );
    assert_eq!(http(s.http, "GET", "/dir", &[], b"").status, 200);
    let r = http(s.http, "GET", "/dir", &json, b"");
    assert_eq!(r.status, 200);
    assert!(String::from_utf8_lossy(&r.body).contains("secret.txt"));
    // Still guarded: changes, OPTIONS, the metrics, and a wrong token.
    assert_401(&http(s.http, "PUT", "/dir/secret.txt", &[], b"x"), "PUT");
    assert_401(
        &http(s.http, "DELETE", "/dir/secret.txt", &[], b""),
        "DELETE",
    );
    assert_401(&http(s.http, "OPTIONS", "/", &[], b""), "OPTIONS");
    assert_401(&http(s.http, "GET", "/metrics", &[], b""), "metrics");
    let wrong = [("Authorization", "Bearer nope")];
    assert_401(
        &http(s.http, "GET", "/dir/secret.txt", &wrong, b""),
        "wrong",
    );
    assert_eq!(s.read("/dir/secret.txt").unwrap(), SECRET);
    s.check();
}

fn public_metrics(io: IoMode) {
    let s = guarded(io, |c| c.public_metrics = true);
    let r = http(s.http, "GET", "/metrics", &[], b"");
    assert_eq!(r.status, 200, "{io:?}");
    assert!(String::from_utf8_lossy(&r.body).contains("pktfs_"));
    assert_eq!(http(s.http, "HEAD", "/metrics", &[], b"").status, 200);
    assert_401(&http(s.http, "GET", "/dir/secret.txt", &[], b""), "file");
    assert_401(&http(s.http, "GET", "/", &[], b""), "listing");
    s.check();
}

/// The metrics name however it is spelled: never stored, removed or
/// served as a file; GET of any spelling that decodes to it is the
/// metrics. (No token: the names are what is tested.)
fn reserved_names_after_decoding(io: IoMode) {
    let s = server(32 * MIB, |c| c.io = io);
    // A file of that name made another way (the mount, the CLI) stays
    // unreachable over HTTP.
    let root = s.vol.root();
    s.vol.create(root, b"metrics", 0o644, 0, 0).unwrap();
    for p in [
        "/metrics",
        "/%6Detrics",
        "/%6d%65%74%72%69%63%73",
        "//metrics",
        "/metrics/",
        "/%2Fmetrics",
        "/./metrics",
        "/x/../metrics",
        "/%2e/metrics",
        "/metrics?x=1",
        "http://h/metrics",
    ] {
        for m in ["PUT", "POST", "DELETE"] {
            let r = http(s.http, m, p, &[], b"planted");
            assert!(
                r.status == 405 || r.status == 400,
                "{io:?} {m} {p}: {}",
                r.status
            );
        }
        let r = http(s.http, "GET", p, &[], b"");
        if r.status == 200 {
            assert!(
                r.header("Content-Type")
                    .unwrap_or_default()
                    .contains("openmetrics"),
                "{io:?} GET {p}: {:?}",
                r.header("Content-Type")
            );
        } else {
            assert_eq!(r.status, 400, "{io:?} GET {p}");
        }
    }
    // The planted file is still the empty one made above, and no other
    // name was made.
    let a = s
        .lookup("/metrics")
        .expect("the file made through the volume");
    assert_eq!(
        a.size, 0,
        "{io:?}: something was stored at the metrics name"
    );
    let names: Vec<Vec<u8>> = s
        .vol
        .list_dir(root)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![b"metrics".to_vec()], "{io:?}");
    s.check();
}

// ----- raw mode -----

fn raw_server(io: IoMode, tweak: impl FnOnce(&mut pktfs_netpath::Config)) -> Server {
    server(32 * MIB, |c| {
        c.io = io;
        c.raw_listen = Some("127.0.0.1:0".parse().unwrap());
        c.token = Some(token());
        c.header_timeout = Duration::from_millis(1500);
        tweak(c);
    })
}

fn raw_conn(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Wait for the server to close `s` (EOF or reset); true if it did.
fn server_closes(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Send `parts` (a pause between them), close the sending side, and wait
/// for the server's close.
fn raw_send(addr: SocketAddr, parts: &[&[u8]]) -> bool {
    let mut s = raw_conn(addr);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
        if s.write_all(p).is_err() {
            break; // closed by the server already
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    server_closes(&mut s)
}

fn raw_files(s: &Server) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = s
        .files_in("/raw")
        .into_iter()
        .map(|(n, _)| s.read(&format!("/raw/{n}")).unwrap())
        .collect();
    v.sort();
    v
}

fn raw_preface_and_silence(io: IoMode) {
    let s = raw_server(io, |_| {});
    let raw = s.raw.unwrap();
    let good = pktfs_netpath::raw::preface(&token());
    assert_eq!(good, format!("PKTFS-TOKEN {TOKEN}\n").into_bytes());
    // Refused: no preface, a wrong token, a preface with extra words, a
    // line too long; all close the connection and store nothing.
    let long = [b"PKTFS-TOKEN ".as_slice(), &[b'a'; 600]].concat();
    for (what, parts) in [
        ("no preface", vec![&b"just some data\n"[..]]),
        (
            "wrong token",
            vec![b"PKTFS-TOKEN hostile-test-token-0124\nDATA"],
        ),
        (
            "short token",
            vec![b"PKTFS-TOKEN hostile-test-token-012\nDATA"],
        ),
        (
            "lowercase tag",
            vec![b"pktfs-token hostile-test-token-0123\nDATA"],
        ),
        ("too long", vec![long.as_slice(), b"\nDATA"]),
        // Nothing, and the preface alone: nothing to store.
        ("nothing", vec![]),
        ("preface only", vec![good.as_slice()]),
    ] {
        assert!(raw_send(raw, &parts), "{io:?} {what}: not closed");
    }
    // A preface that never completes is closed after header_timeout.
    let mut slow = raw_conn(raw);
    slow.write_all(b"PKTFS-TOK").unwrap();
    let t0 = Instant::now();
    assert!(server_closes(&mut slow), "{io:?}: slow preface");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // Idle connections that send nothing at all leave nothing either.
    let idle: Vec<TcpStream> = (0..50).map(|_| raw_conn(raw)).collect();
    wait_until(
        "the idle raw connections admitted",
        Duration::from_secs(10),
        || s.stats().connections >= 58,
    );
    drop(idle);
    s.settle();
    assert_eq!(raw_files(&s), Vec::<Vec<u8>>::new(), "{io:?}");
    // Accepted: the preface in one piece with the data, or cut anywhere.
    assert!(raw_send(
        raw,
        &[&[good.as_slice(), b"first stream"].concat()]
    ));
    let (a, b) = good.split_at(5);
    let (b, c) = b.split_at(b.len() - 1);
    assert!(raw_send(raw, &[a, b, c, b"second ", b"stream"]));
    let crlf = format!("PKTFS-TOKEN {TOKEN}\r\nthird");
    assert!(raw_send(raw, &[crlf.as_bytes()]));
    s.settle();
    assert_eq!(
        raw_files(&s),
        vec![
            b"first stream".to_vec(),
            b"second stream".to_vec(),
            b"third".to_vec()
        ],
        "{io:?}"
    );
    s.check();
}

/// Without a token no preface is expected, and a silent connection still
/// leaves nothing.
fn raw_without_token(io: IoMode) {
    let s = raw_server(io, |c| c.token = None);
    let raw = s.raw.unwrap();
    for _ in 0..20 {
        assert!(raw_send(raw, &[]), "{io:?}");
    }
    assert!(raw_send(raw, &[b"plain bytes"]));
    s.settle();
    assert_eq!(raw_files(&s), vec![b"plain bytes".to_vec()], "{io:?}");
    s.check();
}

fn raw_connection_cap(io: IoMode) {
    const CAP: usize = 3;
    let s = raw_server(io, |c| c.raw_max_connections = CAP);
    let raw = s.raw.unwrap();
    let good = pktfs_netpath::raw::preface(&token());
    let mut held = Vec::new();
    for i in 0..CAP {
        held.push(raw_conn(raw));
        wait_until("admitted", Duration::from_secs(10), || {
            s.stats().connections as usize > i
        });
    }
    // One too many: closed at once, whatever it sends.
    let mut extra = raw_conn(raw);
    let _ = extra.write_all(&[good.as_slice(), b"over the cap"].concat());
    assert!(
        server_closes(&mut extra),
        "{io:?}: over the cap, not closed"
    );
    assert!(s.stats().refused >= 1, "{io:?}");
    // HTTP is not counted against the raw cap.
    assert_eq!(
        http(s.http, "GET", "/", &[("Authorization", &bearer())], b"").status,
        200
    );
    for (i, mut c) in held.into_iter().enumerate() {
        c.write_all(&[good.as_slice(), format!("held {i}").as_bytes()].concat())
            .unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(server_closes(&mut c));
    }
    // The slots are free again.
    s.settle();
    assert!(raw_send(raw, &[&[good.as_slice(), b"after"].concat()]));
    s.settle();
    assert_eq!(
        raw_files(&s),
        vec![
            b"after".to_vec(),
            b"held 0".to_vec(),
            b"held 1".to_vec(),
            b"held 2".to_vec()
        ],
        "{io:?}"
    );
    s.check();
}

/// Without a token the servers listen on loopback only.
#[test]
fn no_token_no_wildcard_listen() {
    let (_dir, vol) = crate::net_common::image(8 * MIB);
    for (http, raw) in [
        (Some("0.0.0.0:0"), None),
        (Some("[::]:0"), None),
        (Some("127.0.0.1:0"), Some("0.0.0.0:0")),
    ] {
        let cfg = pktfs_netpath::Config {
            http_listen: http.map(|a| a.parse().unwrap()),
            raw_listen: raw.map(|a| a.parse().unwrap()),
            ..pktfs_netpath::Config::default()
        };
        let e = pktfs_netpath::Services::start(vol.clone(), cfg.clone(), None).unwrap_err();
        let msg = e.to_string();
        let bad = raw.or(http).unwrap().replace(":0", "");
        assert!(msg.contains(&bad), "{msg}");
        assert!(
            msg.contains("--token-file") && msg.contains("--insecure-no-auth"),
            "{msg}"
        );
        // Either way out starts it (IPv6 may be missing here: only the
        // check is asserted then).
        for fix in [
            pktfs_netpath::Config {
                insecure_no_auth: true,
                ..cfg.clone()
            },
            pktfs_netpath::Config {
                token: Some(token()),
                ..cfg.clone()
            },
        ] {
            match pktfs_netpath::Services::start(vol.clone(), fix, None) {
                Ok(svc) => drop(svc.shutdown()),
                Err(e) => assert!(
                    http == Some("[::]:0") && e.kind() != std::io::ErrorKind::PermissionDenied,
                    "{e}"
                ),
            }
        }
    }
    let ok = pktfs_netpath::Config {
        http_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_listen: Some("127.0.0.2:0".parse().unwrap()),
        ..pktfs_netpath::Config::default()
    };
    pktfs_netpath::Services::start(vol, ok, None)
        .unwrap()
        .shutdown();
}

on_every_transport!(
    every_method_needs_the_token,
    refused_before_the_body,
    public_read,
    public_metrics,
    reserved_names_after_decoding,
    raw_preface_and_silence,
    raw_without_token,
    raw_connection_cap,
);
