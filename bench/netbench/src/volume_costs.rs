//! Where a small PUT's time goes without sockets.

use std::path::Path;
use std::time::Instant;

use pktfs_fs::media::PersistChoice;
use pktfs_fs::{FormatOptions, OpenOptions, RxBuf, Volume};

/// A fresh 256 MiB image at `p`, opened with `persist`.
pub(crate) fn new_volume(p: &Path, persist: PersistChoice) -> Volume {
    Volume::format(
        p,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(256 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .expect("format");
    Volume::open(
        p,
        &OpenOptions {
            persist,
            ..Default::default()
        },
    )
    .expect("open")
}

/// Stands in for a receive: a 150-byte head, a 1 KiB body and padding land
/// in `buf` at `at` (in a fresh reservation when it is full); returns where
/// the body is.
fn land_request<'v>(v: &'v Volume, buf: &mut RxBuf<'v>, at: &mut u32) -> u32 {
    if *at + 1200 > buf.cap() {
        *buf = v.rx_reserve(64 << 10).expect("reserve");
        *at = 0;
    }
    buf.append(&[b'h'; 150]);
    buf.append(&[7u8; 1024]);
    buf.append(&[0; 26]);
    let body_at = *at + 150;
    *at += 1200;
    body_at
}

/// The same one-commit upload with the core's caches evicted before each
/// (a read of 8 MiB, four times a core's L2 here): what the calls cost
/// when they run cold, as a server's do after its vCPU halted between two
/// requests of one connection (docs/DESIGN.md, "The event loops": why the
/// loops busy-poll). The eviction is outside the timed calls.
fn cold_costs(v: &Volume, d: u64, mode: &str, results: &mut crate::results::Results) {
    let evict: Vec<u8> = (0..8u32 << 20).map(|i| i as u8).collect();
    let n = 2_000;
    let (mut before, mut total) = (0f64, 0f64);
    let mut buf = v.rx_reserve(64 << 10).expect("reserve");
    let mut at = 0u32;
    let mut sum = 0u8;
    for i in 0..n {
        let body_at = land_request(v, &mut buf, &mut at);
        let name = format!("{}", i % 64);
        for line in evict.chunks(64) {
            sum = sum.wrapping_add(std::hint::black_box(line)[0]);
        }
        let t0 = Instant::now();
        let tmp = v.create_tmpfile(0o644, 0, 0).expect("tmpfile").ino;
        let t1 = Instant::now();
        let pc = v.rx_piece(&buf, body_at, 1024, pktfs_fs::RxTime::Clock(1), 1);
        let linked = v
            .rx_link_deferred(tmp, vec![pc], d, name.as_bytes(), true)
            .expect("rx_link");
        let t2 = Instant::now();
        drop(linked);
        let t3 = Instant::now();
        before += (t2 - t1).as_secs_f64();
        total += (t3 - t0).as_secs_f64();
    }
    std::hint::black_box(sum);
    for (what, t) in [("before the answer", before), ("total", total)] {
        results.push((
            format!("Volume calls per 1 KiB PUT, caches evicted before each: {what}"),
            format!("pktfs {mode}"),
            t / n as f64 * 1e6,
            "us".into(),
        ));
    }
}

/// Where a small PUT's time goes without sockets: the Volume calls the
/// server makes for one 1 KiB upload, and CRC32C speed.
pub fn volume_costs(dir: &Path, results: &mut crate::results::Results) {
    let p = dir.join("calls.img");
    for persist in [PersistChoice::Clwb, PersistChoice::Eadr] {
        let v = new_volume(&p, persist);
        let d = v.mkdir(v.root(), b"k", 0o755, 0, 0).expect("mkdir").ino;
        let n = 20_000;
        let mode = format!("{persist:?}").to_lowercase();
        // Two ways to store one 1 KiB upload under a name that exists: what
        // the server does (the piece committed with the name, `rx_link`)
        // and the two-commit way it replaced (`rx_commit`, `link_tmpfile`).
        for one_commit in [true, false] {
            let mut t = [0f64; 4];
            let mut buf = v.rx_reserve(64 << 10).expect("reserve");
            let mut at = 0u32;
            for i in 0..n {
                let body_at = land_request(&v, &mut buf, &mut at);
                let name = format!("{}", i % 64);
                let t0 = Instant::now();
                let tmp = v.create_tmpfile(0o644, 0, 0).expect("tmpfile").ino;
                let t1 = Instant::now();
                let pc = v.rx_piece(&buf, body_at, 1024, pktfs_fs::RxTime::Clock(1), 1);
                let t2 = Instant::now();
                let t3 = if one_commit {
                    // As the server does: the replaced file is freed when
                    // `Linked` drops, after the answer (t3..t4).
                    let linked = v
                        .rx_link_deferred(tmp, vec![pc], d, name.as_bytes(), true)
                        .expect("rx_link");
                    let t3 = Instant::now();
                    drop(linked);
                    t3
                } else {
                    v.rx_commit(tmp, vec![pc]).expect("commit");
                    let t3 = Instant::now();
                    v.link_tmpfile(tmp, d, name.as_bytes(), true).expect("link");
                    t3
                };
                let t4 = Instant::now();
                for (k, (a, b)) in [(t0, t1), (t1, t2), (t2, t3), (t3, t4)].iter().enumerate() {
                    t[k] += (*b - *a).as_secs_f64();
                }
            }
            drop(buf);
            let calls: &[(usize, &str)] = if one_commit {
                &[
                    (0, "create_tmpfile (after the previous answer)"),
                    (1, "rx_piece (1 KiB)"),
                    (2, "rx_link_deferred (piece + name, replacing)"),
                    (3, "freeing the replaced file (after the answer)"),
                ]
            } else {
                &[
                    (2, "two-commit way: rx_commit"),
                    (3, "two-commit way: link_tmpfile (replacing)"),
                ]
            };
            for (k, call) in calls {
                results.push((
                    format!("Volume call per 1 KiB PUT: {call}"),
                    format!("pktfs {mode}"),
                    t[*k] / n as f64 * 1e6,
                    "us".into(),
                ));
            }
            if one_commit {
                results.push((
                    "Volume calls per 1 KiB PUT: before the answer (rx_piece + rx_link_deferred)"
                        .into(),
                    format!("pktfs {mode}"),
                    (t[1] + t[2]) / n as f64 * 1e6,
                    "us".into(),
                ));
                cold_costs(&v, d, &mode, results);
            }
            results.push((
                if one_commit {
                    "Volume calls per 1 KiB PUT: total".into()
                } else {
                    "Volume calls per 1 KiB PUT, two-commit way: total".into()
                },
                format!("pktfs {mode}"),
                t.iter().sum::<f64>() / n as f64 * 1e6,
                "us".into(),
            ));
        }
        drop(v);
    }
    let _ = std::fs::remove_file(&p);
    let buf = vec![3u8; 256 << 10];
    let t0 = Instant::now();
    let mut x = 0;
    for _ in 0..4096 {
        x ^= pktfs_layout::crc32c(&buf);
    }
    let gbs = 4096.0 * buf.len() as f64 / t0.elapsed().as_secs_f64() / 1e9;
    results.push((
        format!("CRC32C speed, 256 KiB hot buffer ({x:x})"),
        "layout::crc32c".into(),
        gbs,
        "GB/s".into(),
    ));
}
