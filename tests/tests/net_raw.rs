//! Raw stream mode, and crash images of the receive path (recording
//! backend): a raw file is always an exact prefix of what was sent, an HTTP
//! upload is all or nothing.

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use pktfs_fs::media::Pm;
use pktfs_fs::Volume;

use crate::net_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

fn raw_server(bytes: u64) -> Server {
    server(bytes, |c| {
        c.raw_listen = Some("127.0.0.1:0".parse().unwrap());
        c.raw_dir = "/in/raw".into();
    })
}

/// Wait until `n` connections have their files in `dir` and all are
/// finished: an accept may be handled after the client is done (on the
/// io_uring loops it is a completion like any other), so "no connection
/// active" alone could be seen before the server even took the
/// connection.
fn settle_files(s: &Server, dir: &str, n: usize) {
    wait_until("every connection's file", Duration::from_secs(10), || {
        s.lookup(dir)
            .is_some_and(|d| s.vol.list_dir(d.ino).unwrap().len() >= n)
    });
    s.settle();
}

fn raw_files(s: &Server) -> Vec<(String, u64)> {
    s.files_in("/in/raw")
}

#[test]
fn each_connection_becomes_one_file_named_by_time_and_peer() {
    let s = raw_server(64 * MIB);
    let body = data(3_000_000, 1);
    let mut c = TcpStream::connect(s.raw.unwrap()).unwrap();
    let port = c.local_addr().unwrap().port();
    for (k, part) in body.chunks(700_000).enumerate() {
        c.write_all(part).unwrap();
        if k % 2 == 0 {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    drop(c);
    settle_files(&s, "/in/raw", 1);
    let files = raw_files(&s);
    assert_eq!(files.len(), 1);
    let (name, ino) = &files[0];
    assert!(name.ends_with(&format!("Z-127.0.0.1-{port}")), "{name}");
    assert!(name.len() > 20 && name.as_bytes()[8] == b'T', "{name}");
    assert_eq!(s.vol.read(*ino, 0, u64::MAX).unwrap(), body);
    // Records: from the network, sequence = stream position = file offset,
    // timestamps not decreasing, CRCs right.
    let ch = s.vol.chain(*ino).unwrap();
    assert!(ch.len() >= 3, "several recvs");
    let mut last_ts = 0;
    for e in &ch {
        assert!(e.from_network);
        assert_eq!(e.seq, e.file_off);
        assert!(e.timestamp_ns >= last_ts);
        last_ts = e.timestamp_ns;
        let b = &body[e.file_off as usize..(e.file_off + e.len as u64) as usize];
        assert_eq!(e.payload_crc, pktfs_layout::crc32c(b));
    }
    // The callback saw the file appear and grow to its final size.
    let ch = s.changes.lock().unwrap().clone();
    assert!(
        ch.iter().any(|c| c.contains(&format!(" {name} "))),
        "{ch:?}"
    );
    assert!(
        ch.iter()
            .any(|c| *c == format!("data {ino} {}", body.len())),
        "{ch:?}"
    );
    // It is an ordinary file to the HTTP side.
    let g = http(s.http, "GET", &format!("/in/raw/{name}"), &[], b"");
    assert_eq!(g.body, body);
    s.check();
}

#[test]
fn sixty_four_raw_streams_at_once() {
    let s = raw_server(256 * MIB);
    let n = 64;
    let barrier = Arc::new(Barrier::new(n));
    let addr = s.raw.unwrap();
    let ts: Vec<_> = (0..n)
        .map(|i| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                let body = data(100_000 + i * 777, 1000 + i as u64);
                let mut c = TcpStream::connect(addr).unwrap();
                let port = c.local_addr().unwrap().port();
                b.wait();
                for p in body.chunks(8192) {
                    c.write_all(p).unwrap();
                }
                (port, body)
            })
        })
        .collect();
    let sent: Vec<(u16, Vec<u8>)> = ts.into_iter().map(|t| t.join().unwrap()).collect();
    settle_files(&s, "/in/raw", n);
    let files = raw_files(&s);
    assert_eq!(files.len(), n);
    for (port, body) in sent {
        let (_, ino) = files
            .iter()
            .find(|(name, _)| name.ends_with(&format!("-{port}")))
            .expect("file per connection");
        assert_eq!(s.vol.read(*ino, 0, u64::MAX).unwrap(), body);
    }
    s.check();
}

#[test]
fn netcat_is_a_client() {
    require!(prereq::tool("nc"));
    let s = raw_server(32 * MIB);
    let f = s.dir.path().join("payload");
    let body = data(1_500_000, 5);
    std::fs::write(&f, &body).unwrap();
    let raw = s.raw.unwrap();
    let st = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "nc -N {} {} < {} || nc -q 1 {} {} < {}",
            raw.ip(),
            raw.port(),
            f.display(),
            raw.ip(),
            raw.port(),
            f.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    settle_files(&s, "/in/raw", 1);
    let files = raw_files(&s);
    assert_eq!(files.len(), 1);
    assert_eq!(s.vol.read(files[0].1, 0, u64::MAX).unwrap(), body);
}

#[test]
fn raw_mode_is_refused_on_a_read_only_server() {
    let (_d, vol) = image(16 * MIB);
    let cfg = pktfs_netpath::Config {
        raw_listen: Some("127.0.0.1:0".parse().unwrap()),
        read_only: true,
        ..Default::default()
    };
    assert!(pktfs_netpath::Services::start(vol, cfg, None).is_err());
}

/// A volume on the recording backend, freshly formatted.
fn recording_volume(bytes: usize) -> Arc<Volume> {
    let mut pm =
        Volume::format_in_memory(pktfs_layout::GeometryParams::for_size(bytes as u64)).unwrap();
    Arc::new(Volume::open_pm(Pm::recording(pm.snapshot()), false).unwrap())
}

fn open_crash_image(img: Vec<u8>) -> Volume {
    Volume::open_pm(Pm::from_bytes(img), false).expect("a crash image opens")
}

#[test]
fn raw_file_after_a_crash_is_an_exact_prefix() {
    let vol = recording_volume(4 << 20);
    let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut s = serve(tmp, vol.clone(), |c| {
        c.http_listen = None;
        c.raw_listen = Some("127.0.0.1:0".parse().unwrap());
        c.raw_dir = "/r".into();
    });
    let body = data(200_000, 9);
    let mut c = TcpStream::connect(s.raw.unwrap()).unwrap();
    c.set_nodelay(true).unwrap();
    for p in body.chunks(9_000) {
        c.write_all(p).unwrap();
        std::thread::sleep(Duration::from_millis(3));
    }
    drop(c);
    settle_files(&s, "/r", 1);
    s.stop();
    let log = vol.pm().crash_log().unwrap();
    let mut points = 0;
    let mut partial = 0;
    log.for_each_point(|p| {
        points += 1;
        for img in [
            p.image_with(&[]),
            p.torn_image(),
            p.image_with(&(0..p.inflight.len()).collect::<Vec<_>>()),
        ] {
            let v = open_crash_image(img);
            let Ok(d) = v.lookup(v.root(), b"r") else {
                continue;
            };
            let files = v.list_dir(d.ino).unwrap();
            assert!(files.len() <= 1);
            if let Some(f) = files.first() {
                let got = v.read(f.ino, 0, u64::MAX).unwrap();
                assert!(
                    body.starts_with(&got),
                    "fence {}: {} bytes are not a prefix",
                    p.fence,
                    got.len()
                );
                if !got.is_empty() && got.len() < body.len() {
                    partial += 1;
                }
            }
            v.check_invariants().unwrap();
        }
    });
    assert!(points > 10, "{points} crash points");
    assert!(partial > 0, "some crash points leave a proper prefix");
    let v = open_crash_image(log.final_image());
    let d = v.lookup(v.root(), b"r").unwrap();
    let f = &v.list_dir(d.ino).unwrap()[0];
    assert_eq!(v.read(f.ino, 0, u64::MAX).unwrap(), body);
}

#[test]
fn http_upload_after_a_crash_is_all_or_nothing() {
    upload_crash(150_000, 4 << 20);
}

/// Large enough for the persister thread.
#[test]
fn large_http_upload_after_a_crash_is_all_or_nothing() {
    upload_crash(2_600_000, 8 << 20);
}

fn upload_crash(size: usize, image_bytes: usize) {
    let vol = recording_volume(image_bytes);
    let root = vol.root();
    let old = b"the old version".to_vec();
    let f = vol.create(root, b"obj", 0o644, 0, 0).unwrap();
    vol.write(f.ino, 0, &old).unwrap();
    vol.pm().mark(1);
    let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut s = serve(tmp, vol.clone(), |_| {});
    let new = data(size, 10);
    let mut c = Conn::new(s.http);
    let req = req_bytes("PUT", "/obj", &[], &new);
    for p in req.chunks(size / 8) {
        c.send(p);
        std::thread::sleep(Duration::from_millis(3));
    }
    assert_eq!(c.response(false).unwrap().status, 204);
    drop(c);
    s.settle();
    s.stop();
    let log = vol.pm().crash_log().unwrap();
    let (mut saw_old, mut saw_new) = (0, 0);
    log.for_each_point(|p| {
        if p.last_mark.is_none() {
            return; // before the old version was there
        }
        for img in [
            p.image_with(&[]),
            p.torn_image(),
            p.image_with(&(0..p.inflight.len()).collect::<Vec<_>>()),
        ] {
            let v = open_crash_image(img);
            let a = v
                .lookup(v.root(), b"obj")
                .expect("the name never disappears");
            let got = v.read(a.ino, 0, u64::MAX).unwrap();
            if got == old {
                saw_old += 1;
            } else if got == new {
                saw_new += 1;
            } else {
                panic!("fence {}: a {}-byte mix", p.fence, got.len());
            }
            assert_eq!(v.list_dir(v.root()).unwrap().len(), 1);
            v.check_invariants().unwrap();
        }
    });
    assert!(saw_old > 0 && saw_new > 0);
}

#[test]
fn a_raw_file_can_be_fetched_while_it_grows() {
    let s = raw_server(64 * MIB);
    let body = data(4_000_000, 21);
    let raw = s.raw.unwrap();
    let b2 = body.clone();
    let sender = std::thread::spawn(move || {
        let mut c = TcpStream::connect(raw).unwrap();
        for p in b2.chunks(40_000) {
            c.write_all(p).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let mut name = None;
    wait_until(
        "the raw file appears at accept",
        Duration::from_secs(5),
        || {
            name = s
                .lookup("/in/raw")
                .and_then(|d| s.vol.list_dir(d.ino).unwrap().first().cloned())
                .map(|e| String::from_utf8(e.name).unwrap());
            name.is_some()
        },
    );
    let name = name.unwrap();
    let mut seen = Vec::new();
    let mut c = Conn::new(s.http);
    while !sender.is_finished() {
        let r = c.request("GET", &format!("/in/raw/{name}"), &[], b"");
        assert_eq!(r.status, 200);
        assert!(
            body.starts_with(&r.body),
            "a growing file is sent as a prefix"
        );
        seen.push(r.body.len());
        std::thread::sleep(Duration::from_millis(10));
    }
    sender.join().unwrap();
    assert!(
        seen.len() > 3 && seen.windows(2).all(|w| w[0] <= w[1]),
        "{seen:?}"
    );
    drop(c);
    s.settle();
    assert_eq!(
        http(s.http, "GET", &format!("/in/raw/{name}"), &[], b"").body,
        body
    );
    s.check();
}
