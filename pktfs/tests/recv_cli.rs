//! `pktfs recv` and `pktfs send` with real sockets: nc on the other end,
//! an image nobody holds and one a server holds (the socket is passed to
//! it), a SIGKILL mid-stream (an exact prefix survives), and a user who
//! may not use the holder (refused).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_common::{chain_json, free_port, mkfs, pktfs, serve, stop, Proc, PKTFS};
use crate::prereq;

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2654435761) ^ seed) as u8 >> 1)
        .collect()
}

/// Start `pktfs recv ... --listen ADDR`, wait until it listens.
fn recv_listening(img: &Path, path: &str, addr: SocketAddr, extra: &[&str]) -> Proc {
    let mut c = Proc::spawn(
        Command::new(PKTFS)
            .args([
                "recv",
                img.to_str().unwrap(),
                path,
                "--listen",
                &addr.to_string(),
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut line = String::new();
    BufReader::new(c.stderr.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("waiting for one connection"), "{line}");
    c
}

fn wait_out(mut c: Proc) -> (i32, String) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let mut out = String::new();
            c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            return (st.code().unwrap_or(-1), out);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "pktfs recv did not finish"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_file(img: &Path, path: &str) -> Vec<u8> {
    let v = pktfs_fs::Volume::open(
        img,
        &pktfs_fs::OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let ino = v.resolve_path(path).unwrap().ino;
    v.read(ino, 0, u64::MAX).unwrap()
}

#[test]
fn recv_from_nc_and_connect_and_send_back() {
    require!(prereq::tool("nc"));
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let body = data(3_000_000, 1);
    let src = d.path().join("src");
    std::fs::write(&src, &body).unwrap();

    // --listen, nc sends.
    let addr = free_port();
    let r = recv_listening(&img, "/a.bin", addr, &["--json"]);
    let st = Command::new("nc")
        .args(["-N", "127.0.0.1", &addr.port().to_string()])
        .stdin(std::fs::File::open(&src).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out) = wait_out(r);
    assert_eq!(code, 0, "{out}");
    let rep: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rep["bytes"], 3_000_000);
    assert_eq!(rep["ended_cleanly"], true);
    assert_eq!(read_file(&img, "/a.bin"), body);
    // Every record is a received packet: network flag, kernel receive
    // time, stream position as its sequence.
    let rows = chain_json(&img, "/a.bin");
    assert_eq!(rows.len() as u64, rep["records"].as_u64().unwrap());
    for r in &rows {
        assert_eq!(r["from_network"], true);
        assert!(r["timestamp_ns"].as_u64().unwrap() >= rep["first_rx_ns"].as_u64().unwrap());
        assert_eq!(r["seq"], r["file_offset"]);
    }
    // The stream CRC is the CRC of the bytes.
    assert_eq!(
        rep["crc32c"],
        format!("{:08x}", pktfs_layout::crc32c(&body))
    );

    // What the receive would refuse is refused before it listens, so no
    // sender is taken on: an existing name (create), a missing directory,
    // a directory where a file should be.
    for (path, mode, why) in [
        ("/a.bin", "create", "file exists"),
        ("/no/such/x", "create", "no such file or directory"),
        ("/a.bin/x", "append", "not a directory"),
    ] {
        let addr = free_port();
        let o = pktfs(&[
            "recv",
            img.to_str().unwrap(),
            path,
            "--listen",
            &addr.to_string(),
            "--mode",
            mode,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(why) && !err.contains("waiting"), "{err}");
        assert!(TcpStream::connect(addr).is_err(), "nothing listens");
    }
    assert_eq!(
        read_file(&img, "/a.bin"),
        body,
        "the existing file is as it was"
    );

    // --connect: pktfs connects to a sender, nc -l, which sends a file and
    // closes.
    let body2 = data(700_000, 2);
    let src2 = d.path().join("src2");
    std::fs::write(&src2, &body2).unwrap();
    let port = free_port().port();
    let mut nc = Proc::spawn(
        Command::new("nc")
            .args(["-N", "-l", "127.0.0.1", &port.to_string()])
            .stdin(std::fs::File::open(&src2).unwrap()),
    );
    // Wait until nc listens (a probe connection would take its one accept).
    let t0 = Instant::now();
    while !listening(port) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "nc -l never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = pktfs(&[
        "recv",
        img.to_str().unwrap(),
        "/b.bin",
        "--connect",
        &format!("127.0.0.1:{port}"),
        "--mode",
        "append",
    ]);
    let _ = nc.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_file(&img, "/b.bin"), body2);

    // send it back out, one iovec per record.
    assert_eq!(send_to_a_listener(&img, "/a.bin"), body);
}

/// `pktfs send IMG PATH` to a fresh listener: the bytes it received.
fn send_to_a_listener(img: &Path, path: &str) -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        got
    });
    let o = pktfs(&["send", img.to_str().unwrap(), path, &at.to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    t.join().unwrap()
}

fn http_get(addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = Vec::new();
    s.read_to_end(&mut r).unwrap();
    let at = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        r.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&r[..at])
    );
    r[at..].to_vec()
}

#[test]
fn recv_into_a_served_image_passes_the_socket_to_the_server() {
    require!(prereq::tool("nc"));
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let (server, http) = serve(&img, Stdio::null());
    let body = data(2_000_000, 3);
    let src = d.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let addr = free_port();
    let r = recv_listening(&img, "/in.bin", addr, &["--mode", "replace"]);
    let st = Command::new("nc")
        .args(["-N", "127.0.0.1", &addr.port().to_string()])
        .stdin(std::fs::File::open(&src).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out) = wait_out(r);
    assert_eq!(code, 0, "{out}");
    // The server stored it: it serves it at once, while it holds the image.
    assert_eq!(http_get(http, "/in.bin"), body);
    // send through the server too.
    assert_eq!(send_to_a_listener(&img, "/in.bin"), body);
    stop(server);
}

/// True when something listens on 127.0.0.1:`port` (/proc/net/tcp, state
/// 0A), found without connecting.
fn listening(port: u16) -> bool {
    let t = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    t.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3
            && f[3] == "0A"
            && f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port)
    })
}

/// True when the established connection to `port` on 127.0.0.1 has
/// nothing queued: the sender's bytes are acknowledged and the receiving
/// process has read them all (/proc/net/tcp: tx_queue:rx_queue).
fn drained(port: u16) -> bool {
    let t = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let mut seen = false;
    for l in t.lines().skip(1) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 5 || f[3] != "01" {
            continue; // not ESTABLISHED
        }
        let port_of = |a: &str| {
            a.rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
        };
        if port_of(f[1]) == Some(port) || port_of(f[2]) == Some(port) {
            seen = true;
            if f[4] != "00000000:00000000" {
                return false;
            }
        }
    }
    seen
}

#[test]
fn sigkill_during_recv_leaves_an_exact_prefix() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let body = data(4_000_000, 4);
    let addr = free_port();
    let r = recv_listening(&img, "/p.bin", addr, &["--commit", "chunk"]);
    let mut s = TcpStream::connect(addr).unwrap();
    // Send part of the stream, wait until some of it is durable (the
    // image file shows records), then kill the receiver mid-stream.
    s.write_all(&body[..1_500_000]).unwrap();
    // Wait until the receiver has read all of it (nothing queued on either
    // side of the connection); it commits each chunk before it reads the
    // next, so every chunk but perhaps the last is durable by then.
    let t0 = Instant::now();
    while !drained(addr.port()) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the receiver never read the stream"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = Command::new("kill")
        .arg("-KILL")
        .arg(r.id().to_string())
        .status();
    let _ = s.write_all(&body[1_500_000..]);
    let out = r.wait_with_output().unwrap();
    assert!(!out.status.success());
    let got = read_file(&img, "/p.bin");
    assert!(
        !got.is_empty(),
        "nothing was durable after 1.5 MB were read"
    );
    assert!(got.len() <= 1_500_000 + 1);
    assert_eq!(got, body[..got.len()], "not an exact prefix");
    let f = pktfs(&["scrub", img.to_str().unwrap()]);
    assert_eq!(
        f.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&f.stdout)
    );
}

#[test]
fn a_user_who_may_not_use_the_holder_is_refused() {
    require!(
        prereq::root(),
        prereq::tool("runuser"),
        prereq::user("nobody")
    );
    // The image in a directory every user can reach, owned by root.
    let d = tempfile::Builder::new()
        .prefix("pktfs-recv-perm")
        .tempdir_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    std::fs::set_permissions(&img, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (server, _) = serve(&img, Stdio::null());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        if let Ok((mut c, _)) = l.accept() {
            let _ = c.write_all(b"not for you");
        }
    });
    let o = Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(PKTFS)
        .args([
            "recv",
            img.to_str().unwrap(),
            "/x",
            "--connect",
            &at.to_string(),
        ])
        .output()
        .unwrap();
    // The holder refuses the check before the receiver connects: wake the
    // sender's accept so its thread ends.
    let _ = TcpStream::connect(at);
    let _ = t.join();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("may not control this image"), "{err}");
    stop(server);
    // Nothing was stored.
    assert!(pktfs_fs::Volume::resolve_path(
        &pktfs_fs::Volume::open(
            &img,
            &pktfs_fs::OpenOptions {
                read_only: true,
                ..Default::default()
            }
        )
        .unwrap(),
        "/x"
    )
    .is_err());
}

#[test]
fn recv_into_a_mounted_image_appears_in_the_mount() {
    require!(prereq::fuse(), prereq::tool("nc"));
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    // `pktfs mount` returns once the daemon serves the mount.
    let o = pktfs(&["mount", img.to_str().unwrap(), mnt.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let body = data(1_000_000, 5);
    let src = d.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let addr = free_port();
    let r = recv_listening(&img, "/m.bin", addr, &[]);
    let st = Command::new("nc")
        .args(["-N", "127.0.0.1", &addr.port().to_string()])
        .stdin(std::fs::File::open(&src).unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let (code, out) = wait_out(r);
    let got = std::fs::read(mnt.join("m.bin"));
    // The mount's process answers whether the name may take a stream,
    // before the receiver listens: an existing name is refused at once.
    let refused = pktfs(&[
        "recv",
        img.to_str().unwrap(),
        "/m.bin",
        "--listen",
        &free_port().to_string(),
    ]);
    let um = Command::new("umount").arg(&mnt).status().unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains("file exists") && !err.contains("waiting"),
        "{err}"
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        got.unwrap(),
        body,
        "the received file, read through the mount"
    );
    assert!(um.success());
}
