//! Damaged payload through the real binaries and real sockets: a served
//! image is damaged behind the server's back (as a media error or a stray
//! writer would), and every way out refuses the damaged bytes: HTTP GET
//! answers an error before its head, `pktfs send` fails, `pktfs chain`
//! marks the record, and `pktfs scrub` (online, through the server's
//! control socket, and offline) names the file and range with exit 4.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::time::Duration;

use crate::cli_common::{chain_json, mkfs, pktfs, serve, stop};

/// One HTTP/1.1 request with `Connection: close`; returns status and body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let text = String::from_utf8_lossy(&resp);
    let code: u16 = text[9..12].parse().unwrap();
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (code, resp[split..].to_vec())
}

#[test]
fn damaged_payload_never_leaves_and_scrub_names_it() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let log = d.path().join("serve.log");
    let (server, addr) = serve(&img, std::fs::File::create(&log).unwrap().into());
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
    assert_eq!(http(addr, "PUT", "/f.bin", &body).0, 201);
    assert_eq!(http(addr, "PUT", "/other", b"untouched").0, 201);
    assert_eq!(http(addr, "GET", "/f.bin", b""), (200, body.clone()));

    // chain and scrub of a held image go through the server.
    let rows = chain_json(&img, "/f.bin");
    assert!(rows.len() >= 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["damaged"] == false));
    let clean = pktfs(&["scrub", img.to_str().unwrap()]);
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert!(String::from_utf8_lossy(&clean.stdout).contains("no damage"));

    // Damage the second record's bytes behind the server's back.
    let victim = &rows[1];
    let at = victim["image_offset"].as_u64().unwrap() + 10;
    let (start, len) = (
        victim["file_offset"].as_u64().unwrap(),
        victim["length"].as_u64().unwrap(),
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .write_all_at(b"XX", at)
        .unwrap();

    // Online scrub (ignores the verified-once state): exit 4, file + range.
    let s = pktfs(&["scrub", img.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&s.stdout);
    assert_eq!(s.status.code(), Some(4), "{out}");
    let want = format!("/f.bin: bytes [{start}, {}) damaged", start + len);
    assert!(out.contains(&want), "{out}");
    let j = pktfs(&["scrub", img.to_str().unwrap(), "--json"]);
    assert_eq!(j.status.code(), Some(4));
    let rep: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(rep["damage"][0]["path"], "/f.bin");
    assert_eq!(rep["damage"][0]["start"], start);

    // HTTP: the error is known before the head, so it is an error status,
    // never a 200 with the wrong bytes. A range that avoids the damaged
    // record still works; the other file too.
    let (code, msg) = http(addr, "GET", "/f.bin", b"");
    assert_eq!(code, 500, "{}", String::from_utf8_lossy(&msg));
    assert!(String::from_utf8_lossy(&msg).contains("damaged"));
    assert_eq!(
        http(addr, "GET", "/other", b""),
        (200, b"untouched".to_vec())
    );
    let rows = chain_json(&img, "/f.bin");
    assert!(rows[1]["damaged"] == true && rows[0]["damaged"] == false);
    // pktfs send through the server: the damage is found once connected,
    // and the connection is reset, never closed as if the stream were
    // whole.
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut c, _) = sink.accept().unwrap();
        let mut got = Vec::new();
        let r = c.read_to_end(&mut got);
        (r.map_err(|e| e.kind()), got.len())
    });
    let o = pktfs(&["send", img.to_str().unwrap(), "/f.bin", &to]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("damaged"), "{err}");
    let (r, n) = t.join().expect("the receiving end");
    assert_eq!(
        r,
        Err(std::io::ErrorKind::ConnectionReset),
        "{n} bytes, then {r:?}"
    );
    stop(server);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("damaged") && logged.contains(&format!("[{start}")),
        "{logged}"
    );

    // Offline: scrub and chain open the image here; send refuses too.
    let s = pktfs(&["scrub", img.to_str().unwrap()]);
    assert_eq!(s.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&s.stdout).contains(&want));
    let sink = TcpListener::bind("127.0.0.1:0").unwrap();
    sink.set_nonblocking(true).unwrap();
    let to = sink.local_addr().unwrap().to_string();
    let o = pktfs(&["send", img.to_str().unwrap(), "/f.bin", &to]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("damaged"), "{err}");
    // The file is held (every CRC checked) before connecting: the peer
    // was never connected to, so it cannot take anything for the file.
    assert!(
        matches!(sink.accept(), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a damaged file was sent to"
    );
    // Bad input: an unknown unit is a clear error, not a panic.
    let o = pktfs(&["scrub", img.to_str().unwrap(), "--rate", "12Q"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a size") && !err.contains("panicked"),
        "{err}"
    );
}
