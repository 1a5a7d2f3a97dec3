//! `pktfs send` checks every record's CRC it sends, whatever the verify
//! mode. The case that matters is a record already verified in this
//! mount: with `verify=once` a read skips it from then on, so bytes that
//! changed under the file system since (a stray write, a media error) are
//! read as good. A server holds the image, a GET verifies the file once,
//! then one byte of a record's payload is flipped in the image file; the
//! GET now returns the flipped byte (the premise: the read path does not
//! look again), and `pktfs send` must refuse, naming the record, with not
//! one byte reaching the peer. Also with `verify=off`, and for an image
//! nobody holds (refused before connecting).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::cli_common::{chain_json, mkfs, pktfs, serve_with, stop};

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) ^ seed) as u8)
        .collect()
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

fn flip_byte(img: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(img)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0x5a;
    f.write_all_at(&b, at).unwrap();
}

/// A listener that counts what one peer sends it: (connected, bytes).
/// `pktfs send` to it, then the count (bounded wait for a connection).
fn send_to_a_counter(img: &Path, path: &str) -> (std::process::Output, bool, usize) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let at = l.local_addr().unwrap();
    let o = pktfs(&["send", img.to_str().unwrap(), path, &at.to_string()]);
    // The send has ended: a connection it made is in the backlog by now.
    let mut got = Vec::new();
    let connected = match l.accept() {
        Ok((mut c, _)) => {
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            // A reset (the send failed) or a clean end; bytes either way.
            let mut buf = [0u8; 65536];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            true
        }
        Err(_) => false,
    };
    (o, connected, got.len())
}

#[test]
fn send_refuses_a_record_damaged_after_it_was_verified() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    mkfs(&img, 64 << 20);
    let body = data(20_000, 5);
    let src = d.path().join("src");
    std::fs::write(&src, &body).unwrap();
    let o = pktfs(&["put", img.to_str().unwrap(), src.to_str().unwrap(), "/f"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = chain_json(&img, "/f");
    let rec = rows.last().unwrap().clone();
    let flip_at = rec["image_offset"].as_u64().unwrap() + 7;
    let in_file = (rec["file_offset"].as_u64().unwrap() + 7) as usize;

    for verify in ["once", "off"] {
        let (server, addr) = serve_with(&img, &["--verify", verify], Stdio::null());
        // Read (and, with verify=once, verified) in this mount...
        assert_eq!(http_get(addr, "/f"), body);
        // ...then the media changes under it.
        flip_byte(&img, flip_at);
        let mut bad = body.clone();
        bad[in_file] ^= 0x5a;
        assert_eq!(
            http_get(addr, "/f"),
            bad,
            "verify={verify}: a read does not check the record again (the premise)"
        );

        let (o, _, bytes) = send_to_a_counter(&img, "/f");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "verify={verify}: {err}");
        assert!(
            err.contains(&format!("record {}", rec["record"]))
                && err.contains("damaged")
                && err.contains("nothing was sent"),
            "verify={verify}: {err}"
        );
        assert_eq!(bytes, 0, "verify={verify}: the peer got nothing");
        stop(server);
        flip_byte(&img, flip_at); // back as it was, for the next mode
    }

    // Nobody holds the image: refused before connecting.
    flip_byte(&img, flip_at);
    let (o, connected, bytes) = send_to_a_counter(&img, "/f");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(&format!("record {}", rec["record"])) && err.contains("damaged"),
        "{err}"
    );
    assert!(!connected && bytes == 0, "no connection, nothing sent");

    // And a whole file still goes out whole.
    flip_byte(&img, flip_at);
    let (o, connected, bytes) = send_to_a_counter(&img, "/f");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(connected && bytes == body.len());
}
