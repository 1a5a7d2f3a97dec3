//! `pktfs serve` where io_uring is blocked, as a container's seccomp
//! profile blocks it (Docker's default has refused `io_uring_setup` with
//! EPERM since 2023): with the default `--io auto` it serves on the event
//! loops' epoll backend, says so and why, and stores and serves files;
//! `--io uring` refuses to start with a message that says what is missing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cli_common;
use crate::cli_common::{free_port, mkfs, stop, wait_listening, Proc, PKTFS};

/// Run `f` on a thread of its own whose `io_uring_setup` calls fail with
/// EPERM (a seccomp filter, as a container's profile installs); what it
/// spawns inherits the filter, the rest of the test process does not.
fn without_io_uring<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        let filter = seccompiler::SeccompFilter::new(
            [(libc::SYS_io_uring_setup, vec![])].into_iter().collect(),
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(libc::EPERM as u32),
            std::env::consts::ARCH.try_into().expect("a seccomp target"),
        )
        .expect("filter");
        let prog: seccompiler::BpfProgram = filter.try_into().expect("BPF");
        // This thread only (no TSYNC), and whatever it spawns after.
        seccompiler::apply_filter(&prog).expect("seccomp");
        f()
    })
    .join()
    .expect("the filtered thread panicked")
}

/// One request on a fresh connection: (status, body).
fn request(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = head.as_bytes().to_vec();
    req.extend_from_slice(body);
    c.write_all(&req).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    let text = String::from_utf8_lossy(&got).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let at = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    (status, got[at..].to_vec())
}

#[test]
fn auto_serves_on_epoll_where_io_uring_is_blocked() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("img");
    mkfs(&img, 64 << 20);
    let addr = free_port();
    let img2 = img.clone();
    let mut server = without_io_uring(move || {
        Proc::spawn(
            Command::new(PKTFS)
                .args(["serve", img2.to_str().unwrap(), "--listen"])
                .arg(addr.to_string())
                .args(["--loops", "1"])
                .env_remove("PKTFS_IO")
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )
    });
    let said = cli_common::startup_lines(&mut server);
    assert!(
        said.contains("http: epoll (1 loop) (io_uring unavailable: "),
        "{said}"
    );
    assert!(said.contains("Operation not permitted"), "{said}");
    assert!(said.contains("connections on the loops"), "{said}");
    wait_listening(addr);

    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let head = format!(
        "PUT /f HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    assert_eq!(request(addr, &head, &body).0, 201);
    let (status, got) = request(
        addr,
        "GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(status, 200);
    assert!(got == body, "GET returned other bytes");
    stop(server);

    let vol = pktfs_fs::Volume::open(&img, &pktfs_fs::OpenOptions::default()).unwrap();
    let f = vol.lookup(vol.root(), b"f").unwrap().ino;
    assert!(vol.read(f, 0, u64::MAX).unwrap() == body);
    vol.check_invariants().unwrap();
    assert_eq!(vol.stray_buffer_refs(), 0);
}

#[test]
fn io_uring_insisted_on_where_it_is_blocked_is_refused_with_the_reason() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("img");
    mkfs(&img, 16 << 20);
    let addr = free_port();
    let img2 = img.clone();
    let out = without_io_uring(move || {
        Command::new(PKTFS)
            .args(["serve", img2.to_str().unwrap(), "--listen"])
            .arg(addr.to_string())
            .args(["--io", "uring"])
            .env_remove("PKTFS_IO")
            .output()
            .unwrap()
    });
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--io uring: io_uring is not usable here") && err.contains("not permitted"),
        "{err}"
    );
    // Nothing was stored, nothing was lost.
    let vol = pktfs_fs::Volume::open(&img, &pktfs_fs::OpenOptions::default()).unwrap();
    vol.check_invariants().unwrap();
}
