//! The daemon's open descriptors and memory stay flat over many
//! operations. The mount is served by the test process, so this test has
//! a process to itself: it runs [`alone`] in a child process, no other test
//! beside it.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::MetadataExt;

use crate::fuse_common::*;
use crate::harness::alone;
use crate::prereq;

const MIB: u64 = 1 << 20;

#[test]
fn descriptors_and_memory_stay_flat() {
    require!(prereq::fuse());
    alone(|| {
        let m = Mounted::new("fds", 64 * MIB);
        let pid = std::process::id();
        let round = |r: usize| {
            let d = m.p(&format!("d{}", r % 2));
            let _ = fs::create_dir(&d);
            for i in 0..500 {
                let p = d.join(format!("f{i}"));
                let mut f = File::create(&p).unwrap();
                f.write_all(b"0123456789").unwrap();
                drop(f);
                let _ = fs::metadata(&p).unwrap().ino();
                rustix::fs::setxattr(&p, "user.x", b"1", rustix::fs::XattrFlags::empty()).unwrap();
                let _ = fs::read(&p).unwrap();
                fs::rename(&p, d.join(format!("g{i}"))).unwrap();
            }
            let _ = fs::read_dir(&d).unwrap().count();
            for i in 0..500 {
                fs::remove_file(d.join(format!("g{i}"))).unwrap();
            }
        };
        // Warm up (threads, caches), then measure.
        round(0);
        let (fd0, rss0) = (fd_count(pid), anon_kib(pid));
        // PKTFS_FUSE_ROUNDS=286 makes it a million operations.
        let rounds: usize = std::env::var("PKTFS_FUSE_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        for r in 1..=rounds {
            round(r);
        }
        let (fd1, rss1) = (fd_count(pid), anon_kib(pid));
        eprintln!(
            "descriptors {fd0} -> {fd1}, anonymous memory {rss0} KiB -> {rss1} KiB over {rounds} x 3,500 operations"
        );
        assert!(fd1 <= fd0 + 2, "descriptors stay flat: {fd0} -> {fd1}");
        assert!(
            rss1 < rss0 + 16 * 1024,
            "memory stays flat: {rss0} KiB -> {rss1} KiB"
        );
    });
}
