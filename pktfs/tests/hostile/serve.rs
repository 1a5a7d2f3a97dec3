//! Servers started in unsafe ways: `pktfs serve` on a wildcard address
//! without a token refuses to start, naming the address and the two ways
//! out; with `--insecure-no-auth` or a token it starts, and with a token an
//! anonymous read is refused.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_common::{free_port, mkfs, startup_lines, stop, wait_listening, Proc, PKTFS};

fn image() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("img");
    mkfs(&img, 16 << 20);
    (dir, img)
}

/// The same port on every address.
fn wildcard() -> (SocketAddr, SocketAddr) {
    let lo = free_port();
    (SocketAddr::from(([0, 0, 0, 0], lo.port())), lo)
}

fn serve(img: &std::path::Path, args: &[&str]) -> Proc {
    Proc::spawn(
        Command::new(PKTFS)
            .arg("serve")
            .arg(img)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
}

/// Wait (at most 20 s) for `p` to exit: (success, its stderr).
fn exits(mut p: Proc) -> (bool, String) {
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = p.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "still running: it serves"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    p.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (st.success(), err)
}

fn get(addr: SocketAddr, auth: Option<&str>) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let a = auth.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: h\r\n{a}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn wildcard_without_a_token_is_refused() {
    let (_d, img) = image();
    let (any, _) = wildcard();
    let a = any.to_string();
    let (raw_any, _) = wildcard();
    let r = raw_any.to_string();
    for args in [
        vec!["--listen", a.as_str()],
        vec!["--listen", "127.0.0.1:0", "--raw-listen", r.as_str()],
        vec!["--listen", a.as_str(), "--read-only"],
    ] {
        let (ok, err) = exits(serve(&img, &args));
        assert!(!ok, "{args:?}: started");
        let named = if args.contains(&"--raw-listen") {
            &r
        } else {
            &a
        };
        assert!(err.contains(named.as_str()), "{args:?}: {err}");
        assert!(err.contains("--token-file"), "{args:?}: {err}");
        assert!(err.contains("--insecure-no-auth"), "{args:?}: {err}");
    }
}

#[test]
fn wildcard_with_insecure_no_auth_starts() {
    let (_d, img) = image();
    let (any, lo) = wildcard();
    let mut p = serve(&img, &["--listen", &any.to_string(), "--insecure-no-auth"]);
    let said = startup_lines(&mut p);
    assert!(said.contains("serving"), "{said}");
    wait_listening(lo);
    assert!(get(lo, None).starts_with("HTTP/1.1 200"));
    stop(p);
}

#[test]
fn wildcard_with_a_token_starts_and_reads_need_it() {
    let (d, img) = image();
    let tok = d.path().join("token");
    std::fs::write(&tok, "serve-test-token\n").unwrap();
    let (any, lo) = wildcard();
    let mut p = serve(
        &img,
        &[
            "--listen",
            &any.to_string(),
            "--token-file",
            tok.to_str().unwrap(),
        ],
    );
    let said = startup_lines(&mut p);
    assert!(said.contains("serving"), "{said}");
    wait_listening(lo);
    let anon = get(lo, None);
    assert!(anon.starts_with("HTTP/1.1 401"), "{anon}");
    assert!(get(lo, Some("wrong")).starts_with("HTTP/1.1 401"));
    assert!(get(lo, Some("serve-test-token")).starts_with("HTTP/1.1 200"));
    stop(p);
}
