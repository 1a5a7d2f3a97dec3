//! Tiering against real Garage processes, through the `pktfs` binary as a
//! person runs it: tier-out (small files packed into segments, a large
//! file in parts), read-through over HTTP and the mount with every record's
//! CRC checked, a damaged object answered with an error and never wrong
//! bytes, `fsck.pktfs --remote`, a kill -9 in the middle of a tier-out,
//! collection of orphans, rebuilding an image from the bucket, and a
//! three-node cluster losing a node during tier-out and read-back.
//!
//! Garage missing: under CI a failure, elsewhere a loud SKIPPED line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pktfs_tier::garage::Garage;

use crate::cli_common::{chain_json, free_port, mkfs, out_ok, pattern, wait_listening, PKTFS};
use crate::prereq;

fn garage() -> prereq::Check {
    prereq::holds(Garage::binary().is_some(), || {
        "`garage` is not installed (cargo install --locked garage; .ci/run does)".into()
    })
}

/// fsck.pktfs, built beside pktfs: cargo builds it for its own package's
/// tests (`cargo test --workspace`), not for this package's alone.
fn fsck_bin() -> PathBuf {
    // Another package's binary: `cargo test --workspace` builds it, a
    // test run of this package alone does not.
    let p = Path::new(PKTFS).with_file_name("fsck-pktfs");
    assert!(
        p.exists(),
        "{} is not built: run `cargo test --workspace` (or `cargo build -p pktfs-fsck` first)",
        p.display()
    );
    p
}

/// `pktfs ARGS` with the store's environment.
fn run(g: &Garage, args: &[&str]) -> Output {
    let out = Command::new(PKTFS)
        .args(args)
        .envs(g.env())
        .output()
        .unwrap();
    out
}

/// `pktfs tier out IMG --all --tier TARGET [extra]`.
fn tier_out_all(g: &Garage, img: &Path, target: &str, extra: &[&str]) -> Output {
    let mut args = vec!["tier", "out", img.to_str().unwrap(), "--all"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--tier", target]);
    run(g, &args)
}

/// `fsck.pktfs -n --remote TARGET [extra] IMG`.
fn fsck_remote(g: &Garage, img: &Path, target: &str, extra: &[&str]) -> Output {
    Command::new(fsck_bin())
        .args(["-n", "--remote", target])
        .args(extra)
        .arg(img)
        .envs(g.env())
        .output()
        .unwrap()
}

/// An image with small files, an empty one and a large one (written
/// through the library, the image then closed); returns the files.
fn populate(img: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for k in 0..40 {
        files.push((format!("/small/f{k}"), pattern(1000 + k * 997, k as u64)));
    }
    files.push(("/empty".into(), Vec::new()));
    // Written in 100,000-byte pieces: records that do not line up with the
    // kernel's 128 KiB reads, so a read through the mount joins the ends
    // of two fetched records.
    files.push(("/odd.bin".into(), pattern(3 << 20, 7)));
    files.push(("/large.bin".into(), pattern(20 << 20, 99)));
    let v = pktfs_fs::Volume::open(img, &pktfs_fs::OpenOptions::default()).unwrap();
    let small = v.mkdir(v.root(), b"small", 0o755, 0, 0).unwrap().ino;
    for (p, data) in &files {
        let (dir, name) = match p.strip_prefix("/small/") {
            Some(n) => (small, n),
            None => (v.root(), &p[1..]),
        };
        let f = v.create(dir, name.as_bytes(), 0o644, 0, 0).unwrap();
        let piece = if p == "/odd.bin" { 100_000 } else { 1 << 20 };
        for (k, c) in data.chunks(piece).enumerate() {
            v.write(f.ino, (k * piece) as u64, c).unwrap();
        }
    }
    v.close().unwrap();
    files
}

fn curl_get(url: &str) -> (u16, Vec<u8>) {
    let o = Command::new("curl")
        .args(["-s", "-o", "-", "-w", "\n%{http_code}", url])
        .output()
        .unwrap();
    let mut b = o.stdout;
    let nl = b.iter().rposition(|&c| c == b'\n').unwrap();
    let code = String::from_utf8_lossy(&b[nl + 1..])
        .trim()
        .parse()
        .unwrap_or(0);
    b.truncate(nl);
    (code, b)
}

/// `pktfs serve IMAGE --tier ...` until the HTTP port answers.
/// A `pktfs serve` or `mount` child that a failing test does not leave
/// behind: dropped while still running (an assertion failed), it is
/// killed and its mount, if any, detached.
struct Daemon {
    child: Option<std::process::Child>,
    mp: Option<PathBuf>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(mp) = &self.mp {
            if is_mountpoint(mp) {
                let _ = Command::new("umount").arg("-l").arg(mp).status();
            }
        }
    }
}

fn serve(g: &Garage, img: &Path, prefix: &str, extra: &[&str]) -> (Daemon, String) {
    let addr = free_port();
    let target = g.target(prefix).to_string();
    let child = Command::new(PKTFS)
        .arg("serve")
        .arg(img)
        .args(["--listen", &addr.to_string(), "--tier", &target])
        .args(extra)
        .envs(g.env())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let d = Daemon {
        child: Some(child),
        mp: None,
    };
    wait_listening(addr);
    (d, format!("http://{addr}"))
}

fn stop(mut d: Daemon) -> String {
    let c = d.child.as_mut().expect("a running daemon");
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(c.id().to_string())
        .status();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    use std::io::Read;
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    d.child = None;
    err
}

#[test]
fn tier_out_read_through_fsck_and_restore() {
    require!(garage(), prereq::tool("curl"));
    let g = Garage::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("a.img");
    mkfs(&img, 256 << 20);
    let files = populate(&img);
    let target = g.target("img-a").to_string();
    let free_before = stat_json(&g, &img)["buffers_free"].as_u64().unwrap();

    // Tier everything out: small files packed, the large one in parts.
    let out = out_ok(&tier_out_all(&g, &img, &target, &["--json"]), "tier out");
    let rep: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // Every file but the empty one, which has nothing to tier.
    assert_eq!(rep["pass"]["files_tiered"], files.len() - 1, "{out}");
    assert_eq!(rep["pass"]["errors"], 0);
    assert!(rep["pass"]["objects"].as_u64().unwrap() >= 2, "{out}");
    assert!(rep["snapshot"].as_u64().is_some());
    let st = stat_json(&g, &img);
    assert!(
        st["buffers_free"].as_u64().unwrap() > free_before,
        "PM freed: {st}"
    );
    assert_eq!(
        st["remote_bytes"].as_u64().unwrap(),
        files.iter().map(|f| f.1.len() as u64).sum::<u64>()
    );
    // The chain shows where the bytes went, and keeps the CRCs.
    let ch = chain_json(&img, "/small/f3");
    assert!(
        ch.iter().all(|r| r["remote"]["object"].as_u64().is_some()),
        "{ch:?}"
    );
    assert_eq!(
        ch[0]["crc32c"].as_str().unwrap(),
        format!("{:08x}", crc32c::crc32c(&files[3].1))
    );

    // fsck --remote: every record's object is there with its checksum.
    let o = fsck_remote(&g, &img, &target, &[]);
    let text = out_ok(&o, "fsck --remote");
    assert!(text.contains("remote: clean"), "{text}");

    // Read-through over HTTP: byte-identical, ETag unchanged.
    let (srv, url) = serve(&g, &img, "img-a", &[]);
    for (p, data) in &files {
        let (code, body) = curl_get(&format!("{url}{p}"));
        assert_eq!(code, 200, "{p}");
        assert!(
            body == *data,
            "{p}: {} bytes back, {} stored",
            body.len(),
            data.len()
        );
    }
    let (code, part) = {
        let o = Command::new("curl")
            .args(["-s", "-r", "5000000-5000099", &format!("{url}/large.bin")])
            .output()
            .unwrap();
        (o.status.success(), o.stdout)
    };
    assert!(code);
    assert_eq!(part, files.last().unwrap().1[5_000_000..5_000_100]);
    let (_, metrics) = curl_get(&format!("{url}/metrics"));
    let m = String::from_utf8_lossy(&metrics);
    assert!(m.contains("pktfs_tier_fetches_total"), "{m}");
    stop(srv);

    // Rebuild an image from the bucket alone.
    let img2 = dir.path().join("restored.img");
    let o = run(&g, &["restore", &target, img2.to_str().unwrap(), "--json"]);
    let text = out_ok(&o, "restore");
    let r: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        r["skipped_partial"].as_array().map_or(0, Vec::len),
        0,
        "{text}"
    );
    let (srv, url) = serve(&g, &img2, "img-a", &["--read-only"]);
    for (p, data) in &files {
        let (code, body) = curl_get(&format!("{url}{p}"));
        assert_eq!(code, 200, "restored {p}");
        assert!(body == *data, "restored {p} differs");
    }
    stop(srv);

    // A damaged object: reads answer an error, never wrong bytes, and
    // fsck --remote names the damage.
    let store = g.store().unwrap();
    let seg = g.target("img-a").key(&pktfs_tier::segment::object_key_rel(
        ch[0]["remote"]["object"].as_u64().unwrap(),
    ));
    let mut bytes = store.get(&seg).unwrap().to_vec();
    let at = ch[0]["remote"]["offset"].as_u64().unwrap() as usize;
    bytes[at] ^= 0xff;
    let crc = crc32c::crc32c(&bytes);
    store.put(&seg, bytes, crc).unwrap();
    let (srv, url) = serve(&g, &img, "img-a", &[]);
    let (code, body) = curl_get(&format!("{url}/small/f3"));
    assert!(code >= 500, "a damaged object answered {code}");
    assert_ne!(body, files[3].1);
    stop(srv);
    let o = fsck_remote(&g, &img, &target, &["--remote-deep"]);
    assert!(!o.status.success(), "fsck --remote must report the damage");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("do not match"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

fn stat_json(g: &Garage, img: &Path) -> serde_json::Value {
    let out = out_ok(&run(g, &["stat", "--json", img.to_str().unwrap()]), "stat");
    serde_json::from_str(out.trim()).unwrap()
}

fn is_mountpoint(p: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(p.to_str().unwrap_or("")))
}

/// Read a file, tiered, through the mount; overwrite part of a tiered
/// record (its remnants stay in the tier) and read it back; send a tiered
/// file with `pktfs send`, one iovec per record.
#[test]
fn mount_reads_and_writes_tiered_files_and_send_sends_them() {
    require!(garage(), prereq::fuse(), prereq::root());
    let g = Garage::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("m.img");
    mkfs(&img, 128 << 20);
    let mut files = populate(&img);
    let target = g.target("img-m").to_string();
    out_ok(&tier_out_all(&g, &img, &target, &[]), "tier out");
    // pktfs send of a tiered file of an image nobody holds.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut v).unwrap();
        v
    });
    out_ok(
        &run(
            &g,
            &[
                "send",
                img.to_str().unwrap(),
                "/large.bin",
                &addr,
                "--tier",
                &target,
            ],
        ),
        "send",
    );
    assert!(
        reader.join().unwrap() == files.last().unwrap().1,
        "send: bytes differ"
    );
    // The mount.
    let mp = dir.path().join("mp");
    std::fs::create_dir(&mp).unwrap();
    let mut child = Daemon {
        child: Some(
            Command::new(PKTFS)
                .args(["mount", "-f"])
                .arg(&img)
                .arg(&mp)
                .args(["--tier", &target])
                .envs(g.env())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        ),
        mp: Some(mp.clone()),
    };
    let t0 = Instant::now();
    while !is_mountpoint(&mp) {
        let c = child.child.as_mut().unwrap();
        assert!(c.try_wait().unwrap().is_none(), "mount ended early");
        assert!(t0.elapsed() < Duration::from_secs(20), "never mounted");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (p, data) in &files {
        let got = std::fs::read(mp.join(&p[1..])).unwrap();
        assert!(got == *data, "{p} through the mount");
    }
    // Copy-on-write into a tiered file: new bytes in PM, the rest stays.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(mp.join("small/f7"))
            .unwrap();
        f.seek(SeekFrom::Start(100)).unwrap();
        f.write_all(b"written over a tiered record").unwrap();
    }
    files[7].1[100..128].copy_from_slice(b"written over a tiered record");
    assert_eq!(std::fs::read(mp.join("small/f7")).unwrap(), files[7].1);
    let ch = chain_json(&img, "/small/f7");
    assert!(
        ch.iter().any(|r| r["remote"].is_null()),
        "the new bytes are local: {ch:?}"
    );
    assert!(
        ch.iter().any(|r| !r["remote"].is_null()),
        "the rest stays remote: {ch:?}"
    );
    stop(child);
    assert!(!is_mountpoint(&mp));
    // Remounted later, the same bytes.
    let o = fsck_remote(&g, &img, &target, &[]);
    let text = out_ok(&o, "fsck --remote after writes");
    assert!(text.contains("remote: clean"), "{text}");
}

/// kill -9 in the middle of a tier-out: nothing lost, nothing dangling;
/// the orphans it left are collected.
#[test]
fn kill_during_tier_out_loses_nothing_and_orphans_are_collected() {
    require!(garage(), prereq::tool("curl"));
    let g = Garage::start(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("k.img");
    mkfs(&img, 128 << 20);
    let mut files = Vec::new();
    {
        let v = pktfs_fs::Volume::open(&img, &pktfs_fs::OpenOptions::default()).unwrap();
        for k in 0..240u64 {
            let data = pattern(64 << 10, 1000 + k);
            let f = v
                .create(v.root(), format!("f{k}").as_bytes(), 0o644, 0, 0)
                .unwrap();
            v.write(f.ino, 0, &data).unwrap();
            files.push((format!("/f{k}"), data));
        }
        v.close().unwrap();
    }
    let target = g.target("img-k").to_string();
    let store = g.store().unwrap();
    let seg_prefix = g.target("img-k").key("seg/");
    // Slow uploads (1 MiB segments at 2 MiB/s) so the kill lands mid-way.
    let tier_out = Command::new(PKTFS)
        .args(["tier", "out"])
        .arg(&img)
        .args([
            "--all",
            "--tier",
            &target,
            "--tier-segment",
            "1M",
            "--tier-concurrency",
            "1",
            "--tier-bandwidth",
            "2M",
        ])
        .envs(g.env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Daemon {
        child: None,
        mp: None,
    };
    let child = child.child.insert(tier_out);
    let t0 = Instant::now();
    while store.list(&seg_prefix).unwrap().len() < 3 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "tier out ended before the kill"
        );
        assert!(t0.elapsed() < Duration::from_secs(60), "no upload seen");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let o = Command::new(fsck_bin())
        .arg("-n")
        .arg(&img)
        .output()
        .unwrap();
    out_ok(&o, "fsck -n after the kill");
    // Every file reads back, from PM or from the tier.
    let (srv, url) = serve(&g, &img, "img-k", &["--tier-age", "off"]);
    for (p, data) in &files {
        let (code, body) = curl_get(&format!("{url}{p}"));
        assert_eq!(code, 200, "{p}");
        assert!(body == *data, "{p} after the kill");
    }
    stop(srv);
    // Finish, collect the orphans of the killed run, and check the tier.
    out_ok(&tier_out_all(&g, &img, &target, &[]), "tier out again");
    let before = store.list(&seg_prefix).unwrap().len();
    let o = out_ok(
        &run(
            &g,
            &["tier", "collect", img.to_str().unwrap(), "--tier", &target],
        ),
        "collect",
    );
    let after = store.list(&seg_prefix).unwrap().len();
    println!("objects before {before}, after {after}: {o}");
    assert!(after <= before);
    let o = fsck_remote(&g, &img, &target, &[]);
    let text = out_ok(&o, "fsck --remote");
    assert!(
        text.contains("remote: clean") && !text.contains("orphan:"),
        "{text}"
    );
    files.clear();
}

/// A three-node Garage (replication factor 3) loses a node during
/// tier-out and read-back; ingest over HTTP goes on while the policy
/// tiers files out behind it.
#[test]
fn three_node_cluster_with_a_node_down_during_tier_out_and_read_back() {
    require!(garage(), prereq::tool("curl"));
    let mut g = Garage::start(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("c.img");
    mkfs(&img, 128 << 20);
    let target = g.target("img-c");
    // The policy tiers out everything older than 0 s, every 100 ms.
    let (srv, url) = serve(
        &g,
        &img,
        "img-c",
        &[
            "--tier-age",
            "0s",
            "--tier-interval",
            "100ms",
            "--tier-snapshot-interval",
            "0s",
        ],
    );
    let mut files = Vec::new();
    let put = |name: &str, data: &[u8]| {
        let src = dir.path().join("put.tmp");
        std::fs::write(&src, data).unwrap();
        let o = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-T"])
            .arg(&src)
            .arg(format!("{url}/{name}"))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "201", "PUT {name}");
    };
    for k in 0..30u64 {
        let d = pattern(30_000 + k as usize * 5000, 7000 + k);
        put(&format!("a{k}"), &d);
        files.push((format!("/a{k}"), d));
    }
    g.stop_node(2);
    for k in 0..30u64 {
        let d = pattern(40_000 + k as usize * 3000, 9000 + k);
        put(&format!("b{k}"), &d);
        files.push((format!("/b{k}"), d));
    }
    // Everything reaches the tier with one node down.
    let total: u64 = files.iter().map(|f| f.1.len() as u64).sum();
    let t0 = Instant::now();
    loop {
        let st = stat_json(&g, &img);
        if st["remote_bytes"].as_u64() == Some(total) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "not all tiered: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for (p, data) in &files {
        let (code, body) = curl_get(&format!("{url}{p}"));
        assert_eq!(code, 200, "{p} with a node down");
        assert!(body == *data, "{p} with a node down");
    }
    let err = stop(srv);
    assert!(!err.contains("panicked"), "{err}");
    g.start_node(2).unwrap();
    // Rebuilt from the bucket (the last snapshot was taken at stop).
    let img2 = dir.path().join("c2.img");
    out_ok(
        &run(
            &g,
            &["restore", &target.to_string(), img2.to_str().unwrap()],
        ),
        "restore",
    );
    let (srv, url) = serve(&g, &img2, "img-c", &["--read-only"]);
    for (p, data) in &files {
        let (code, body) = curl_get(&format!("{url}{p}"));
        assert_eq!(code, 200, "restored {p}");
        assert!(body == *data, "restored {p}");
    }
    stop(srv);
}
