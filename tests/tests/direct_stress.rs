//! Direct readers against a busy holder, for minutes: reader processes
//! (pktfs-direct, and programs under the preload shim) read files while
//! the holder overwrites, truncates, replaces them over HTTP, grows raw
//! ingest files, renames (exchanges), deletes and recreates, tiers out and
//! recalls them; readers are SIGKILLed mid-read and replaced. Every word a
//! reader gets must be zero or belong to one file at its own offset
//! (`pktfs_tests::direct_words`): a byte of a freed buffer's new owner, of
//! another offset, or torn, fails the reader. After: no buffer reference
//! left behind (holds of killed readers included), the Volume's invariants,
//! and every byte of space back once the files are gone.
//!
//! `PKTFS_DIRECT_STRESS_SECS` sets the length (default 120).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pktfs_fs::{RenameFlags, SetAttr, Volume};
use pktfs_netpath::control::Control;
use pktfs_testkit::net_common;
use pktfs_tests::direct_words::bytes;
use pktfs_tests::model::tier;

use crate::prereq;

const PATHS: u16 = 8;
/// Largest file the holder writes (bytes, a multiple of 8).
const MAX_FILE: u64 = 2 << 20;

fn reader_bin() -> &'static str {
    env!("CARGO_BIN_EXE_direct_stress_reader")
}

fn shim() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    [deps, deps.parent().expect("target/<profile>")]
        .iter()
        .map(|d| d.join("libpktfs_preload.so"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libpktfs_preload.so is not next to {}", exe.display()))
}

struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    /// A multiple of 8 below `n`.
    fn aligned(&mut self, n: u64) -> u64 {
        self.next(n / 8) * 8
    }
}

/// Which logical file each path holds now, and each one's write count.
struct Files {
    ids: [u16; PATHS as usize],
    gens: [u16; PATHS as usize],
}

fn name(k: u16) -> Vec<u8> {
    format!("f{k}").into_bytes()
}

/// One of the holder's operations on path `k`.
fn operate(vol: &Volume, http: std::net::SocketAddr, dir: u64, f: &mut Files, rng: &mut Rng) {
    let k = rng.next(PATHS as u64) as u16;
    let ino = match vol.lookup(dir, &name(k)) {
        Ok(a) => a.ino,
        Err(_) => return,
    };
    let id = f.ids[k as usize];
    let gen = {
        let g = &mut f.gens[k as usize];
        *g = g.wrapping_add(1);
        *g
    };
    match rng.next(20) {
        0..=6 => {
            let off = rng.aligned(MAX_FILE);
            let len = 8 + rng.aligned(200_000);
            vol.write(ino, off, &bytes(id, gen, off, len as usize))
                .unwrap();
        }
        7..=8 => {
            let s = SetAttr {
                size: Some(rng.aligned(MAX_FILE)),
                ..Default::default()
            };
            vol.setattr(ino, &s).unwrap();
        }
        9..=11 => {
            // HTTP ingest: the whole file replaced by an upload.
            let len = 8 + rng.aligned(MAX_FILE);
            let body = bytes(id, gen, 0, len as usize);
            let path = format!("/s/f{k}");
            let r = net_common::http(http, "PUT", &path, &[], &body);
            assert!(
                r.status == 201 || r.status == 204,
                "PUT {path}: {}",
                r.status
            );
        }
        12..=13 => {
            let j = rng.next(PATHS as u64) as u16;
            if j != k {
                let x = RenameFlags {
                    exchange: true,
                    ..Default::default()
                };
                vol.rename(dir, &name(k), dir, &name(j), x).unwrap();
                f.ids.swap(k as usize, j as usize);
                f.gens.swap(k as usize, j as usize);
            }
        }
        14 => {
            vol.unlink(dir, &name(k)).unwrap();
            let n = vol.create(dir, &name(k), 0o644, 0, 0).unwrap().ino;
            vol.write(n, 0, &bytes(id, gen, 0, 64 << 10)).unwrap();
        }
        15..=17 => {
            let _ = tier::tier_out(vol, ino);
        }
        _ => {
            let _ = vol.tier_recall(ino, u64::MAX);
        }
    }
}

/// Raw ingest: connections that stream words slowly, each a file of its
/// own in /raw growing while readers read it; old ones deleted.
fn ingest(raw: std::net::SocketAddr, vol: &Volume, stop: &AtomicBool, sent: &AtomicU64) {
    use std::io::Write;
    let mut n = 0u16;
    while !stop.load(Ordering::SeqCst) {
        let id = 1000 + n;
        n = n.wrapping_add(1);
        let mut s = TcpStream::connect(raw).expect("raw connect");
        let mut off = 0u64;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) && !stop.load(Ordering::SeqCst) {
            // Odd-sized writes: TCP cuts the stream anywhere; offsets in the
            // file are still the stream's.
            let len = 8 * (1 + (off / 8 % 2000));
            let chunk = bytes(id, 0, off, len as usize);
            if s.write_all(&chunk).is_err() {
                break;
            }
            off += len;
            sent.fetch_add(len, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(2));
        }
        drop(s);
        // Keep the newest few raw files.
        if let Ok(rawdir) = vol.lookup(vol.root(), b"raw") {
            let mut names: Vec<Vec<u8>> = vol
                .list_dir(rawdir.ino)
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.name)
                .collect();
            names.sort();
            while names.len() > 4 {
                let _ = vol.unlink(rawdir.ino, &names.remove(0));
            }
        }
    }
}

/// A reader process and how it ends.
struct Reader {
    child: Child,
    kind: &'static str,
}

fn spawn_reader(kind: &'static str, image: &Path, mnt: &Path, secs: u64, seed: u64) -> Reader {
    let mut c = Command::new(reader_bin());
    match kind {
        "lib" => {
            c.args(["lib"]).arg(image);
        }
        _ => {
            c.args(["fs"]).arg(mnt).env("LD_PRELOAD", shim());
        }
    }
    c.arg(secs.max(1).to_string())
        .arg(seed.to_string())
        .args(if kind == "lib" {
            ["/s", "/raw"]
        } else {
            ["s", "raw"]
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Reader {
        child: c.spawn().expect("spawning a reader"),
        kind,
    }
}

#[test]
fn readers_get_no_wrong_byte_from_a_busy_holder_and_leave_nothing_behind() {
    require!(prereq::fuse());
    let secs: u64 = std::env::var("PKTFS_DIRECT_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let (dir, vol) = net_common::image(768 << 20);
    let image = dir.path().join("img");
    // Before the servers start: their rings lend free buffers to the kernel.
    let free0 = vol.statfs().blocks_free;
    let mut server = net_common::serve(dir, vol.clone(), |c| {
        c.raw_listen = Some("127.0.0.1:0".parse().unwrap());
        c.raw_dir = "/raw".into();
    });
    tier::use_store(&vol);
    let ctl = Control::start(vol.clone(), &image).expect("control socket");
    let mnt = tempfile::Builder::new()
        .prefix("pktfs-dstress-")
        .tempdir()
        .unwrap();
    let opts = pktfs_fuse::MountOptions {
        attr_ttl: Duration::ZERO,
        entry_ttl: Duration::ZERO,
        ..Default::default()
    };
    let mount = pktfs_fuse::mount(vol.clone(), mnt.path(), &opts).expect("mount");
    let s = vol.mkdir(vol.root(), b"s", 0o755, 0, 0).unwrap().ino;
    let mut files = Files {
        ids: std::array::from_fn(|k| k as u16 + 1),
        gens: [0; PATHS as usize],
    };
    for k in 0..PATHS {
        let f = vol.create(s, &name(k), 0o644, 0, 0).unwrap().ino;
        vol.write(f, 0, &bytes(k + 1, 0, 0, 256 << 10)).unwrap();
    }

    let stop = Arc::new(AtomicBool::new(false));
    let (ops, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let holder = {
        let (vol, stop, ops) = (vol.clone(), stop.clone(), ops.clone());
        let http = server.http;
        std::thread::spawn(move || {
            let mut rng = Rng(0x5eed_1234_5678);
            while !stop.load(Ordering::SeqCst) {
                operate(&vol, http, s, &mut files, &mut rng);
                ops.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let raw = {
        let (vol, stop, sent) = (vol.clone(), stop.clone(), sent.clone());
        let addr = server.raw.expect("raw listener");
        std::thread::spawn(move || ingest(addr, &vol, &stop, &sent))
    };

    // Two readers of each kind; every few seconds one is killed mid-read
    // and another takes its place.
    let t0 = Instant::now();
    let left = |t0: Instant| secs.saturating_sub(t0.elapsed().as_secs());
    let kinds = ["lib", "fs", "lib", "fs"];
    let mut readers: Vec<Reader> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| spawn_reader(k, &image, mnt.path(), secs, i as u64 + 1))
        .collect();
    let killed = Arc::new(Mutex::new(Vec::new()));
    let mut seed = 100;
    let mut rng = Rng(0xfeed);
    while left(t0) > 5 {
        std::thread::sleep(Duration::from_secs(4));
        let i = rng.next(readers.len() as u64) as usize;
        let kind = readers[i].kind;
        let mut r = std::mem::replace(
            &mut readers[i],
            spawn_reader(kind, &image, mnt.path(), left(t0), seed),
        );
        seed += 1;
        let _ = r.child.kill();
        let out = r.child.wait_with_output().unwrap();
        // A reader that found a wrong byte before it was killed says so.
        assert!(
            out.status.code() != Some(1),
            "a {kind} reader failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        killed.lock().unwrap().push(kind);
    }
    let mut summaries = Vec::new();
    for r in readers {
        let out = r.child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a {} reader failed ({}): {}",
            r.kind,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        let v: serde_json::Value = serde_json::from_str(line.trim()).expect("the reader's counts");
        summaries.push((r.kind, v));
    }
    stop.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    raw.join().unwrap();
    eprintln!(
        "{} holder operations, {} raw bytes, {} readers killed; survivors: {summaries:?}",
        ops.load(Ordering::Relaxed),
        sent.load(Ordering::Relaxed),
        killed.lock().unwrap().len()
    );
    for (kind, v) in &summaries {
        assert!(
            v["reads"].as_u64().unwrap() > 100,
            "a {kind} reader read too little: {v}"
        );
    }
    assert!(
        ops.load(Ordering::Relaxed) > 1000,
        "the holder did too little"
    );
    assert!(!killed.lock().unwrap().is_empty(), "no reader was killed");

    // Nothing left behind: holds of killed readers are gone with their
    // connections, every buffer reference is a record's (the servers'
    // rings lend buffers while they run: stopped first).
    mount.unmount().expect("unmount");
    mount.join().expect("the FUSE session ends");
    server.settle();
    server.stop();
    drop(ctl);
    net_common::wait_until("no stray buffer reference", Duration::from_secs(10), || {
        vol.stray_buffer_refs() == 0
    });
    vol.check_invariants().unwrap();
    // And the space: every file gone, every buffer free again.
    for e in vol.list_dir(s).unwrap() {
        vol.unlink(s, &e.name).unwrap();
    }
    vol.rmdir(vol.root(), b"s").unwrap();
    if let Ok(r) = vol.lookup(vol.root(), b"raw") {
        for e in vol.list_dir(r.ino).unwrap() {
            vol.unlink(r.ino, &e.name).unwrap();
        }
        vol.rmdir(vol.root(), b"raw").unwrap();
    }
    // All of it, but the one buffer the allocator keeps for small payloads
    // (partly used by names; it is taken by the first small write).
    let end = vol.statfs().blocks_free;
    assert!(
        end + 1 >= free0 && end <= free0,
        "buffer space not returned after every file was deleted: {end} free, {free0} before"
    );
}
