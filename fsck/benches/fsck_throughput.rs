//! fsck throughput: make a multi-GiB image on /dev/shm (Volume::format, then
//! files written 1 MiB at a time until it is ~90% full), run `fsck -n` on
//! it three times, print GB/s of stored data (every payload CRC32C is
//! verified) as the median of the three.
//!
//! `cargo bench -p pktfs-fsck --bench fsck_throughput`
//! Environment: `PKTFS_BENCH_GIB` (image size, default 4), `PKTFS_BENCH_DIR`
//! (default /dev/shm), `PKTFS_BENCH_WRITE_MIB` (write size, default 1).

use std::path::PathBuf;
use std::time::Instant;

use pktfs_fs::media::{MapOptions, Pm};
use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_fsck::Options;
use pktfs_layout::GeometryParams;

fn env<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let gib: u64 = env("PKTFS_BENCH_GIB", 4);
    let write_mib: usize = env("PKTFS_BENCH_WRITE_MIB", 1);
    let dir = PathBuf::from(std::env::var("PKTFS_BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into()));
    let path = dir.join(format!("pktfs-fsck-bench-{}.img", std::process::id()));
    let size = gib << 30;
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _rm = Rm(path.clone());

    let t = Instant::now();
    Volume::format(
        &path,
        &FormatOptions {
            params: GeometryParams::for_size(size),
            label: Some("fsck-bench".into()),
        },
        &mut |_, _| {},
    )
    .expect("format");
    let v = Volume::open(&path, &OpenOptions::default()).expect("open");
    let chunk: Vec<u8> = (0..write_mib << 20)
        .map(|i| (i * 7 + i / 4096) as u8)
        .collect();
    let per_file = 256u64 << 20;
    let target = v.statfs().blocks_free * v.geometry().buffer_size_bytes as u64 / 10 * 9;
    let mut written = 0u64;
    let mut n = 0;
    'fill: while written < target {
        let f = v
            .create(v.root(), format!("f{n}").as_bytes(), 0o644, 0, 0)
            .expect("create");
        n += 1;
        let mut off = 0;
        while off < per_file && written < target {
            match v.write(f.ino, off, &chunk) {
                Ok(k) => {
                    off += k as u64;
                    written += k as u64;
                }
                Err(_) => break 'fill,
            }
        }
    }
    v.close().expect("close");
    eprintln!(
        "image: {} GiB at {}, {} files, {:.2} GiB stored in {} MiB writes (made in {:.1} s)",
        gib,
        path.display(),
        n,
        written as f64 / (1u64 << 30) as f64,
        write_mib,
        t.elapsed().as_secs_f64()
    );

    let mut rates = Vec::new();
    for run in 1..=3 {
        let mut pm = Pm::open(
            &path,
            &MapOptions {
                read_only: true,
                no_lock: true,
                no_populate: true,
                ..Default::default()
            },
        )
        .expect("map");
        let t = Instant::now();
        let r = pktfs_fsck::check(&mut pm, &Options::check());
        let dt = t.elapsed().as_secs_f64();
        assert!(r.clean(), "benchmark image is not clean:\n{}", r.to_text());
        let gbps = r.counts.payload_bytes_checked as f64 / dt / 1e9;
        eprintln!(
            "run {run}: {:.3} s, {} records, {:.2} GB of payload verified: {gbps:.2} GB/s",
            dt,
            r.counts.records,
            r.counts.payload_bytes_checked as f64 / 1e9
        );
        rates.push(gbps);
        if run == 3 {
            // The same mapping again: its pages are faulted in now, so this
            // is the walk and the CRCs alone.
            let t = Instant::now();
            let r = pktfs_fsck::check(&mut pm, &Options::check());
            let dt = t.elapsed().as_secs_f64();
            eprintln!(
                "warm mapping (no page faults): {:.3} s: {:.2} GB/s",
                dt,
                r.counts.payload_bytes_checked as f64 / dt / 1e9
            );
        }
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    println!(
        "fsck -n throughput: {:.2} GB/s of stored data (median of 3; {:.2} GB in {} MiB records, {} GiB image on {})",
        rates[1],
        written as f64 / 1e9,
        write_mib,
        gib,
        dir.display()
    );
}
