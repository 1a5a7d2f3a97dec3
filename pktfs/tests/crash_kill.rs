//! Process crashes: SIGKILL the mount daemon during heavy writes, and the
//! network server during uploads and raw streams, at seeded random instants.
//! Afterwards: fsck finds nothing recovery cannot fix, recovery succeeds,
//! fsck is clean after it, every acknowledged write and upload is present
//! byte for byte, an unacknowledged upload is absent or whole (never
//! partial), and a raw-stream file is an exact prefix of what was sent.
//! With clients replacing and deleting files over keep-alive connections,
//! each name holds what its last acknowledged request left or what the
//! one in flight would have: all old or all new, never lost.
//!
//! The image lives on /dev/shm, so a killed process loses only its DRAM
//! state (the mapping's stores are in the page cache): this checks that
//! pktfs never acknowledges anything its on-media state does not hold.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pktfs_fs::media::{MapOptions, Pm};
use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_layout::GeometryParams;

use crate::cli_common;
use crate::cli_common::{announced, Proc};
use crate::prereq;

const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");

fn seed() -> u64 {
    std::env::var("PKTFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261122)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

fn image(tag: &str, size: u64) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix(&format!("pktfs-kill-{tag}-"))
        .tempdir_in("/dev/shm")
        .unwrap();
    let p = d.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: GeometryParams::for_size(size),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    (d, p)
}

/// fsck before recovery (nothing beyond what recovery fixes), recovery,
/// fsck after it (clean); returns the recovered volume.
fn recover(img: &Path) -> Volume {
    let mut pm = Pm::open(
        img,
        &MapOptions {
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .unwrap();
    let before = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    drop(pm);
    assert!(
        before.errors_beyond_recovery().is_empty(),
        "fsck before recovery:\n{}",
        before.to_text()
    );
    let v = Volume::open(img, &OpenOptions::default())
        .unwrap_or_else(|e| panic!("recovery failed: {e}\nfsck said:\n{}", before.to_text()));
    v.check_invariants().unwrap();
    v.close().unwrap();
    let mut pm = Pm::open(
        img,
        &MapOptions {
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .unwrap();
    let after = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    assert!(after.clean(), "fsck after recovery:\n{}", after.to_text());
    drop(pm);
    Volume::open(img, &OpenOptions::default()).unwrap()
}

fn read_path(v: &Volume, path: &str) -> Option<Vec<u8>> {
    let mut ino = v.root();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = v.lookup(ino, part.as_bytes()).ok()?.ino;
    }
    Some(v.read(ino, 0, u64::MAX / 2).unwrap())
}

fn kill9(child: &mut Child) {
    // SAFETY-free: kill(2) through the standard library sends SIGKILL.
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Wait (up to 30 s, else fail saying `nothing`) until `started` says
/// work was acknowledged, then a seeded 50 to 50 + `spread_ms` ms more,
/// and SIGKILL `child`: the kill lands while work is under way, not after
/// a fixed time a loaded machine may need just to start. The delay.
fn kill_during_work(
    child: &mut Child,
    rng: &mut Rng,
    spread_ms: u64,
    nothing: &str,
    mut started: impl FnMut() -> bool,
) -> u64 {
    let t0 = Instant::now();
    while !started() {
        assert!(t0.elapsed() < Duration::from_secs(30), "{nothing} in 30 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let delay = 50 + rng.below(spread_ms);
    std::thread::sleep(Duration::from_millis(delay));
    kill9(child);
    delay
}

fn is_mounted(mp: &Path) -> bool {
    let mp = std::fs::canonicalize(mp).unwrap_or(mp.to_path_buf());
    std::fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(mp.to_str().unwrap()))
        })
        .unwrap_or(false)
}

fn lazy_unmount(mp: &Path) {
    for cmd in [
        &["umount", "-l"][..],
        &["fusermount3", "-uz"],
        &["fusermount", "-uz"],
    ] {
        if !is_mounted(mp) {
            return;
        }
        let _ = Command::new(cmd[0])
            .args(&cmd[1..])
            .arg(mp)
            .stderr(Stdio::null())
            .status();
    }
    assert!(
        !is_mounted(mp),
        "could not detach the dead mount at {}",
        mp.display()
    );
}

#[test]
fn sigkill_mount_daemon_during_writes() {
    require!(prereq::fuse());
    let mut rng = Rng(seed());
    let rounds = 4;
    for round in 0..rounds {
        let (_d, img) = image("mount", 64 << 20);
        let mnt = tempfile::tempdir().unwrap();
        let mut daemon = Command::new(PKTFS)
            .args(["mount", "-f"])
            .arg(&img)
            .arg(mnt.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !is_mounted(mnt.path()) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "mount did not come up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Acknowledged: (name, seed, len) whose write returned; in flight:
        // the one being written when the daemon died.
        let acked = Arc::new(Mutex::new(Vec::<(String, u64, usize)>::new()));
        let inflight = Arc::new(Mutex::new(None::<(String, u64, usize)>));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (acked, inflight, stop) = (acked.clone(), inflight.clone(), stop.clone());
            let dir = mnt.path().to_path_buf();
            let mut r = Rng(rng.next() | 1);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("f{i}");
                    let len = 1 + r.below(600 << 10) as usize;
                    let s = r.next();
                    *inflight.lock().unwrap() = Some((name.clone(), s, len));
                    let res = (|| -> std::io::Result<()> {
                        let mut f = std::fs::File::create(dir.join(&name))?;
                        f.write_all(&pattern(s, len))?;
                        Ok(())
                    })();
                    if res.is_err() {
                        break; // the daemon is gone
                    }
                    acked.lock().unwrap().push((name, s, len));
                    i += 1;
                }
            })
        };
        // A random time after the first write completed (not after a fixed
        // time a loaded machine may need just to start writing).
        let delay = kill_during_work(
            &mut daemon,
            &mut rng,
            700,
            &format!("round {round}: no write completed"),
            || !acked.lock().unwrap().is_empty(),
        );
        stop.store(true, Ordering::Relaxed);
        lazy_unmount(mnt.path());
        writer.join().unwrap();
        let acked = acked.lock().unwrap().clone();
        assert!(
            !acked.is_empty(),
            "round {round}: no write completed in {delay} ms"
        );
        let v = recover(&img);
        for (name, s, len) in &acked {
            let got = read_path(&v, name)
                .unwrap_or_else(|| panic!("round {round}: acknowledged {name} is missing"));
            assert!(
                got == pattern(*s, *len),
                "round {round}: acknowledged {name} differs ({} bytes, want {len})",
                got.len()
            );
        }
        if let Some((name, s, len)) = inflight.lock().unwrap().clone() {
            if !acked.iter().any(|a| a.0 == name) {
                if let Some(got) = read_path(&v, &name) {
                    // Each FUSE write is atomic: a prefix, cut at a write.
                    assert!(
                        got.len() <= len && got == pattern(s, len)[..got.len()],
                        "round {round}: in-flight {name} is not a prefix"
                    );
                }
            }
        }
        eprintln!(
            "round {round}: killed the mount after {delay} ms; {} acknowledged files verified",
            acked.len()
        );
    }
}

/// One PUT on its own connection; Err says what the server answered
/// instead of 201, or what went wrong on the connection.
fn put(addr: SocketAddr, path: &str, body: &[u8]) -> Result<(), String> {
    let go = || -> std::io::Result<Vec<u8>> {
        let mut s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "PUT {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        s.write_all(body)?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        Ok(resp)
    };
    match go() {
        Ok(resp) if resp.starts_with(b"HTTP/1.1 201") => Ok(()),
        Ok(resp) => Err(format!(
            "PUT {path} ({} bytes) answered {:?}",
            body.len(),
            String::from_utf8_lossy(&resp[..resp.len().min(300)])
        )),
        Err(e) => Err(format!("PUT {path} ({} bytes): {e}", body.len())),
    }
}

/// `pktfs serve IMAGE ARGS` (its listeners on port 0), its stderr in
/// `log`; returned with its startup lines once it has bound its
/// listeners (they name the addresses: [`announced`]). The process is
/// killed if the test fails before it is.
fn start_server(img: &Path, args: &[&str], log: &Path) -> (Proc, String) {
    let mut server = Proc::spawn(
        Command::new(PKTFS)
            .arg("serve")
            .arg(img)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap()),
    );
    let said = cli_common::try_startup_lines(&mut server).unwrap_or_else(|said| {
        panic!(
            "the server ended starting; it said: {said}\n{}",
            server_said(log)
        )
    });
    (server, said)
}

/// What the server wrote to its stderr, for a failure message.
fn server_said(log: &Path) -> String {
    let s = std::fs::read_to_string(log).unwrap_or_default();
    let tail = &s[s.len().saturating_sub(4000)..];
    format!("the server's stderr ({}):\n{tail}", log.display())
}

#[test]
fn sigkill_server_during_uploads_and_raw_streams() {
    let mut rng = Rng(seed() ^ 0xabcdef);
    let rounds = 4;
    for round in 0..rounds {
        let (d, img) = image("serve", 768 << 20);
        let log = d.path().join("server.log");
        let (mut server, said) = start_server(
            &img,
            &[
                "--listen",
                "127.0.0.1:0",
                "--raw-listen",
                "127.0.0.1:0",
                "--raw-dir",
                "/raw",
            ],
            &log,
        );
        let http = announced(&said, "HTTP").expect("an HTTP address");
        let raw = announced(&said, "raw").expect("a raw address");
        let stop = Arc::new(AtomicBool::new(false));
        // Uploads: (path, seed, len, acknowledged).
        let uploads = Arc::new(Mutex::new(Vec::<(String, u64, usize, bool)>::new()));
        let uploader = {
            let (uploads, stop) = (uploads.clone(), stop.clone());
            let mut r = Rng(rng.next() | 1);
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (path, s, len) =
                        (format!("/u{i}"), r.next(), 1 + r.below(512 << 10) as usize);
                    let ok = put(http, &path, &pattern(s, len)).is_ok();
                    uploads.lock().unwrap().push((path, s, len, ok));
                    if !ok {
                        break;
                    }
                    i += 1;
                }
            })
        };
        // A raw stream: everything sent, in order.
        let sent = Arc::new(Mutex::new(Vec::<u8>::new()));
        let streamer = {
            let (sent, stop) = (sent.clone(), stop.clone());
            let mut r = Rng(rng.next() | 1);
            std::thread::spawn(move || {
                // The server announced its bound listener, and the kill
                // comes at least 50 ms after the first acknowledged upload:
                // a refused connection is a failure, not a round that
                // quietly streams nothing.
                let mut s = TcpStream::connect(raw).expect("connect to the raw listener");
                let stream = pattern(r.next(), 64 << 20);
                let mut at = 0;
                while !stop.load(Ordering::Relaxed) && at < stream.len() {
                    // Paced, so the kill lands while the stream is still going.
                    std::thread::sleep(Duration::from_millis(1));
                    let n = (1 + r.below(64_000) as usize).min(stream.len() - at);
                    match s.write(&stream[at..at + n]) {
                        Ok(k) => {
                            sent.lock().unwrap().extend_from_slice(&stream[at..at + k]);
                            at += k;
                        }
                        Err(_) => break,
                    }
                }
            })
        };
        let delay = kill_during_work(
            &mut server,
            &mut rng,
            800,
            &format!("round {round}: no upload was acknowledged"),
            || uploads.lock().unwrap().iter().any(|u| u.3),
        );
        stop.store(true, Ordering::Relaxed);
        uploader.join().unwrap();
        streamer.join().unwrap();
        let v = recover(&img);
        let uploads = uploads.lock().unwrap().clone();
        let acked = uploads.iter().filter(|u| u.3).count();
        for (path, s, len, ok) in &uploads {
            match read_path(&v, path) {
                Some(got) => assert!(
                    got == pattern(*s, *len),
                    "round {round}: {path} is present but not whole ({} of {len} bytes)",
                    got.len()
                ),
                None => assert!(!ok, "round {round}: acknowledged upload {path} is missing"),
            }
        }
        // The raw file: an exact prefix of what the client sent.
        let sent = sent.lock().unwrap().clone();
        let raw_dir = v.lookup(v.root(), b"raw").ok().map(|a| a.ino);
        let files = raw_dir.map(|d| v.list_dir(d).unwrap()).unwrap_or_default();
        // One file per connection, and the stream's is the only one (no
        // readiness probe: the server's announcement says it listens). It
        // must be a prefix of what was sent.
        assert!(
            files.len() <= 1,
            "round {round}: one connection, at most one file: {files:?}"
        );
        let mut raw_len = 0;
        for f in &files {
            let got = v.read(f.ino, 0, u64::MAX / 2).unwrap();
            if got.is_empty() {
                continue;
            }
            assert_eq!(
                raw_len, 0,
                "round {round}: only the stream's connection sent bytes"
            );
            raw_len = got.len();
            assert!(
                got.len() <= sent.len() && got[..] == sent[..got.len()],
                "round {round}: raw file is not a prefix of the stream"
            );
        }
        eprintln!(
            "round {round}: killed the server after {delay} ms; {acked} acknowledged uploads verified, {} in flight, raw file {raw_len} of {} bytes sent",
            uploads.len() - acked,
            sent.len()
        );
        assert!(
            acked > 0 || raw_len > 0,
            "round {round}: nothing happened before the kill"
        );
    }
}

/// The state of one name after an operation: its content, or gone.
type State = Option<(u64, usize)>;

/// One request on a keep-alive connection; the status, or None when the
/// connection ended first (the server died).
fn request(s: &mut TcpStream, method: &str, path: &str, body: &[u8]) -> Option<u16> {
    let go = |s: &mut TcpStream| -> std::io::Result<Option<u16>> {
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )?;
        s.write_all(body)?;
        // The answer's head, then its body by Content-Length.
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b)? == 0 {
                return Ok(None);
            }
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let status: u16 = head[9..12].parse().expect("a status");
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut rest = vec![0u8; len];
        s.read_exact(&mut rest)?;
        Ok(Some(status))
    };
    go(s).unwrap_or(None)
}

/// SIGKILL the server while clients replace and delete files (one client
/// per name, keep-alive, one request at a time). Afterwards each name
/// holds what its last acknowledged operation left, or what the one
/// operation in flight would have left: a replacement is all old or all
/// new, a delete is done or not, nothing acknowledged is lost.
#[test]
fn sigkill_server_during_replacements_and_deletes() {
    const NAMES: usize = 4;
    let mut rng = Rng(seed() ^ 0x5eed_f11e);
    for round in 0..3 {
        let (d, img) = image("replace", 512 << 20);
        let log = d.path().join("server.log");
        let (mut server, said) = start_server(&img, &["--listen", "127.0.0.1:0"], &log);
        let http = announced(&said, "HTTP").expect("an HTTP address");
        // Every name starts with a version of its own.
        let mut first = Vec::new();
        for n in 0..NAMES {
            let (s, len) = (rng.next(), 1 + rng.below(100_000) as usize);
            if let Err(e) = put(http, &format!("/f{n}"), &pattern(s, len)) {
                panic!("round {round}: setup: {e}\n{}", server_said(&log));
            }
            first.push(Some((s, len)));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let acked_any = Arc::new(AtomicBool::new(false));
        // Per name: (state after the last acknowledged operation, state the
        // operation in flight would leave, operations acknowledged).
        let clients: Vec<_> = (0..NAMES)
            .map(|n| {
                let (stop, acked_any) = (stop.clone(), acked_any.clone());
                let mut r = Rng(rng.next() | 1);
                let start = first[n];
                std::thread::spawn(move || -> (State, Option<State>, usize) {
                    let path = format!("/f{n}");
                    let mut s = TcpStream::connect(http).expect("connect");
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let (mut now, mut acked) = (start, 0);
                    while !stop.load(Ordering::Relaxed) {
                        let delete = r.below(10) < 3;
                        let next: State = if delete {
                            None
                        } else {
                            // Some bodies span several records and commits.
                            Some((r.next(), 1 + r.below(400_000) as usize))
                        };
                        let body = next.map(|(s, l)| pattern(s, l)).unwrap_or_default();
                        let method = if delete { "DELETE" } else { "PUT" };
                        match request(&mut s, method, &path, &body) {
                            Some(code) => {
                                let want: &[u16] = match (delete, now.is_some()) {
                                    (true, true) => &[204],
                                    (true, false) => &[404],
                                    (false, true) => &[204],
                                    (false, false) => &[201],
                                };
                                assert!(
                                    want.contains(&code),
                                    "{method} {path} answered {code}, expected {want:?}"
                                );
                                now = next;
                                acked += 1;
                                acked_any.store(true, Ordering::Relaxed);
                            }
                            None => return (now, Some(next), acked),
                        }
                    }
                    (now, None, acked)
                })
            })
            .collect();
        let delay = kill_during_work(
            &mut server,
            &mut rng,
            600,
            &format!("round {round}: nothing acknowledged"),
            || acked_any.load(Ordering::Relaxed),
        );
        stop.store(true, Ordering::Relaxed);
        let outcomes: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
        let v = recover(&img);
        let (mut acked, mut in_flight, mut took) = (0, 0, 0);
        for (n, (done, flying, k)) in outcomes.iter().enumerate() {
            acked += k;
            let path = format!("/f{n}");
            let got = read_path(&v, &path);
            let is = |st: &State| match st {
                None => got.is_none(),
                Some((s, l)) => got.as_deref() == Some(&pattern(*s, *l)[..]),
            };
            if let Some(f) = flying {
                in_flight += 1;
                if is(f) && !is(done) {
                    took += 1;
                }
            }
            assert!(
                is(done) || flying.as_ref().is_some_and(is),
                "round {round}: {path} holds {} bytes: neither its last acknowledged state \
                 ({done:?}) nor the one in flight ({flying:?})",
                got.map_or(0, |g| g.len())
            );
        }
        eprintln!(
            "round {round}: killed after {delay} ms; {acked} replacements and deletes \
             acknowledged, {in_flight} in flight ({took} of them durable)"
        );
        assert!(
            acked > 0,
            "round {round}: nothing acknowledged before the kill"
        );
    }
}
