//! 10,000 concurrent HTTP connections against a `pktfs serve` child on the
//! io_uring loops and on their epoll backend, none refused (no `--max-connections`: the loops are
//! bounded by file descriptors, not threads): every connection is open
//! before any request, each PUTs a distinct body and then GETs it back on
//! the same keep-alive connection, every answer is 2xx and every byte is
//! right, in the answers and in the image afterwards.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::cli_common::{free_port, mkfs, stop};
use crate::many_common;
use crate::many_common::{fd_room, open_all, serve_on_loops, uring_usable};

const CONNS: usize = 10_000;

fn body(i: usize) -> Vec<u8> {
    let mut b = format!("upload {i:05}\n").into_bytes();
    let n = 50 + (i * 7919) % 2000;
    b.extend((0..n).map(|k| (k as u32).wrapping_mul(2654435761).wrapping_add(i as u32) as u8));
    b
}

/// Read one response: (status, body). Panics on a malformed answer.
fn response(c: &mut TcpStream, what: &str) -> (u16, Vec<u8>) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match c.read(&mut b) {
            Ok(1) => head.push(b[0]),
            r => panic!("{what}: {r:?} after {:?}", String::from_utf8_lossy(&head)),
        }
        assert!(head.len() < 16 << 10, "{what}: head too long");
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{what}: no status in {text:?}"));
    let len: usize = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    c.read_exact(&mut body)
        .unwrap_or_else(|e| panic!("{what}: body: {e}"));
    (status, body)
}

#[test]
fn ten_thousand_concurrent_http_connections() {
    require!(fd_room(CONNS), uring_usable());
    ten_thousand("uring", "http: io_uring (2 loops)");
}

/// The same on the loops' epoll backend (what serves where io_uring is
/// not usable): bounded by file descriptors too, not threads.
#[test]
fn ten_thousand_concurrent_http_connections_on_epoll() {
    require!(fd_room(CONNS));
    ten_thousand("epoll", "http: epoll (2 loops)");
}

fn ten_thousand(io: &str, serving: &str) {
    let _one = many_common::MANY_AT_ONCE
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("img");
    mkfs(&img, 512 << 20);
    let port = free_port();
    let server = serve_on_loops(&img, "--listen", port, io, serving, CONNS);
    let t0 = Instant::now();
    let mut conns = open_all(port, CONNS);
    for c in &conns {
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let b = body(i);
        let mut req = format!(
            "PUT /many/{i:05} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            b.len()
        )
        .into_bytes();
        req.extend_from_slice(&b);
        c.write_all(&req).unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let (status, _) = response(c, &format!("PUT {i}"));
        assert_eq!(status, 201, "PUT on connection {i}");
    }
    eprintln!("{CONNS} uploads stored after {:?}", t0.elapsed());
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(format!("GET /many/{i:05} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let (status, got) = response(c, &format!("GET {i}"));
        assert_eq!(status, 200, "GET on connection {i}");
        assert!(got == body(i), "GET on connection {i}: wrong bytes");
    }
    eprintln!("{CONNS} downloads checked after {:?}", t0.elapsed());
    drop(conns);
    stop(server);
    let vol = pktfs_fs::Volume::open(&img, &pktfs_fs::OpenOptions::default()).unwrap();
    let many = vol.lookup(vol.root(), b"many").unwrap().ino;
    let names = vol.list_dir(many).unwrap();
    assert_eq!(names.len(), CONNS);
    for e in names {
        let name = String::from_utf8(e.name).unwrap();
        let i: usize = name.parse().unwrap();
        assert_eq!(vol.read(e.ino, 0, u64::MAX).unwrap(), body(i), "{name}");
    }
    vol.check_invariants().unwrap();
    assert_eq!(vol.stray_buffer_refs(), 0);
}
