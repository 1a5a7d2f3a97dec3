//! `pktfs serve`, `pktfs send` and `pktfs up --no-mount` as a person runs
//! them. Lives in the pktfs package so cargo builds the binary it runs.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::Duration;

use pktfs_fs::{OpenOptions, Volume};

use crate::cli_common::*;
use crate::net_common;
use crate::net_common::*;

#[test]
fn serve_store_send_and_stop_cleanly() {
    let (dir, vol) = image(32 << 20);
    let img = dir.path().join("img");
    drop(vol);
    let http = free_port();
    let raw = free_port();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0k3n\n").unwrap();
    let (child, first) = start(
        Command::new(PKTFS)
            .args(["serve"])
            .arg(&img)
            .args([
                "--listen",
                &http.to_string(),
                "--raw-listen",
                &raw.to_string(),
                "--token-file",
            ])
            .arg(&token),
    );
    assert!(first.contains("serving"), "{first}");
    wait_listening(http);
    let body = data(1_000_000, 1);
    assert_eq!(http_req(http, "PUT", "/a/b", &[], &body).status, 401);
    assert_eq!(
        http_req(
            http,
            "PUT",
            "/a/b",
            &[("Authorization", "Bearer t0k3n")],
            &body
        )
        .status,
        201
    );
    {
        use std::io::Write;
        // Raw mode with a token: the preface line first; a connection
        // without it stores nothing.
        let mut c = std::net::TcpStream::connect(raw).unwrap();
        c.write_all(b"PKTFS-TOKEN t0k3n\nraw bytes").unwrap();
        let mut anon = std::net::TcpStream::connect(raw).unwrap();
        let _ = anon.write_all(b"anonymous bytes");
    }
    // Stored (as the server itself lists and serves it) before the stop.
    wait_until("the raw stream stored", Duration::from_secs(10), || {
        // Reads need the token too.
        let auth = [("Authorization", "Bearer t0k3n")];
        let list = http_req(http, "GET", "/raw/", &auth, b"");
        let names = String::from_utf8_lossy(&list.body);
        list.status == 200
            && names.lines().any(|name| {
                http_req(http, "GET", &format!("/raw/{name}"), &auth, b"").body == b"raw bytes"
            })
    });
    let err = interrupt(child);
    assert!(err.contains("files stored"), "{err}");
    // The image is clean and holds both files.
    let v = Volume::open(
        &img,
        &OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(v.superblock().state, pktfs_layout::superblock::STATE_CLEAN);
    let a = v
        .lookup(v.lookup(v.root(), b"a").unwrap().ino, b"b")
        .unwrap();
    assert_eq!(v.read(a.ino, 0, u64::MAX).unwrap(), body);
    let r = v.lookup(v.root(), b"raw").unwrap();
    let files = v.list_dir(r.ino).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(v.read(files[0].ino, 0, 100).unwrap(), b"raw bytes");
    drop(v);
    // pktfs send streams it to a plain TCP peer.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = l.local_addr().unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        v
    });
    let out = Command::new(PKTFS)
        .arg("send")
        .arg(&img)
        .arg("/a/b")
        .arg(to.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(rx.join().unwrap() == body);
    assert!(String::from_utf8_lossy(&out.stderr).contains("iovecs"));
    // To a raw listener with a token: the preface goes first.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = l.local_addr().unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        v
    });
    let out = Command::new(PKTFS)
        .arg("send")
        .arg(&img)
        .arg("/a/b")
        .arg(to.to_string())
        .arg("--token-file")
        .arg(&token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = rx.join().unwrap();
    assert!(got.starts_with(b"PKTFS-TOKEN t0k3n\n") && got[18..] == body[..]);
}

#[test]
fn up_creates_an_image_and_serves_it() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("sub/quick.img");
    let http = free_port();
    // `up` keeps its token under $HOME: this test's own.
    let home = tempfile::tempdir().unwrap();
    let (child, first) = start(
        Command::new(PKTFS)
            .args(["up", "--no-mount", "--size", "64M", "--image"])
            .arg(&img)
            .args(["--listen", &http.to_string()])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME"),
    );
    assert!(first.contains("created"), "{first}");
    wait_listening(http);
    let token = std::fs::read_to_string(home.path().join(".config/pktfs/token")).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let auth = [("Authorization", bearer.as_str())];
    assert_eq!(http_req(http, "PUT", "/x", &[], b"quick").status, 401);
    assert_eq!(http_req(http, "PUT", "/x", &auth, b"quick").status, 201);
    assert_eq!(http_req(http, "GET", "/x", &auth, b"").body, b"quick");
    interrupt(child);
    // Second run uses the existing image, and the same token.
    let (child, first) = start(
        Command::new(PKTFS)
            .args(["up", "--no-mount", "--image"])
            .arg(&img)
            .args(["--listen", &http.to_string()])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME"),
    );
    assert!(first.contains("using"), "{first}");
    wait_listening(http);
    assert_eq!(http_req(http, "GET", "/x", &auth, b"").body, b"quick");
    interrupt(child);
    // --insecure-no-auth: no token asked.
    let (child, _) = start(
        Command::new(PKTFS)
            .args(["up", "--no-mount", "--insecure-no-auth", "--image"])
            .arg(&img)
            .args(["--listen", &http.to_string()])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME"),
    );
    wait_listening(http);
    assert_eq!(http_req(http, "GET", "/x", &[], b"").body, b"quick");
    interrupt(child);
}

fn http_req(addr: SocketAddr, m: &str, p: &str, h: &[(&str, &str)], b: &[u8]) -> Response {
    net_common::http(addr, m, p, h, b)
}

/// `pktfs send` of a path it cannot send (none, a directory) fails before
/// it connects, offline and through a server: the peer is never handed an
/// empty stream that ends cleanly, which would read as an empty file.
#[test]
fn send_refuses_before_connecting() {
    let (dir, vol) = image(16 << 20);
    let img = dir.path().join("img");
    vol.mkdir(vol.root(), b"d", 0o755, 0, 0).unwrap();
    drop(vol);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let to = l.local_addr().unwrap().to_string();
    let send = |path: &str| {
        let out = Command::new(PKTFS)
            .arg("send")
            .arg(&img)
            .arg(path)
            .arg(&to)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let refused = |served: &str| {
        for (path, says) in [("/nope", "no such file"), ("/d", "not a regular file")] {
            let (ok, err) = send(path);
            assert!(!ok && err.contains(says), "{served} {path}: {err}");
            assert!(
                matches!(l.accept(), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "{served} send of {path} connected to the peer"
            );
        }
    };
    refused("offline");
    let http = free_port();
    let (child, first) = start(
        Command::new(PKTFS)
            .args(["serve"])
            .arg(&img)
            .args(["--listen", &http.to_string()]),
    );
    assert!(first.contains("serving"), "{first}");
    wait_listening(http);
    refused("served");
    stop(child);
}
