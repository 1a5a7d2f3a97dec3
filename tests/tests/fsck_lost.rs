//! fsck's repair of a broken data chain, seen from outside: through a real
//! FUSE mount and the HTTP server. A record in the middle of a file is
//! damaged on the media (its record checksum fails), `fsck -y` runs on the
//! unmounted image, and then reads before the lost range return the right
//! bytes, reads of it fail (EIO through the mount, 500 over HTTP), and
//! reads after it, from the records fsck linked back, return the right
//! bytes.

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Arc;

use pktfs_fs::media::{MapOptions, Pm};
use pktfs_fs::{OpenOptions, Volume};
use pktfs_fsck::{exit, Options};
use pktfs_layout::RecordId;

use crate::fuse_common::*;
use crate::net_common::{http, serve};
use crate::prereq;

const MIB: u64 = 1 << 20;
/// Each of the file's three records.
const REC: u64 = 65536;

#[test]
fn a_lost_range_fails_through_the_mount_and_over_http() {
    require!(prereq::fuse());
    let mut m = Mounted::new("fsck-lost", 64 * MIB);
    let a = pattern(3 * REC as usize, 7);
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(m.p("a"))
        .unwrap();
    // Three separate writes: three records.
    for k in 0..3u64 {
        f.write_all_at(&a[(k * REC) as usize..((k + 1) * REC) as usize], k * REC)
            .unwrap();
    }
    drop(f);
    let b = pattern(100_000, 8);
    fs::write(m.p("b"), &b).unwrap();
    let ino = fs::metadata(m.p("a")).unwrap().ino();
    let chain = m.vol().chain(ino).unwrap();
    assert_eq!(chain.len(), 3, "{chain:?}");
    let mid = chain[1].record;
    m.unmount();

    let mut img = fs::read(&m.image).unwrap();
    let g = pktfs_layout::Superblock::from_bytes(&img[..256], 0, img.len() as u64)
        .unwrap()
        .geometry;
    img[g.record_pos(RecordId(mid)).0 as usize + 40] ^= 0x01;
    fs::write(&m.image, &img).unwrap();
    let mut pm = Pm::open(&m.image, &MapOptions::default()).unwrap();
    let r = pktfs_fsck::repair(&mut pm, &Options::yes());
    assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
    assert!(
        r.damaged
            .iter()
            .any(|d| (d.start, d.end) == (REC, 2 * REC) && d.lost.is_some()),
        "{}",
        r.to_text()
    );
    drop(pm);

    // Through the mount.
    m.mount();
    let f = fs::File::open(m.p("a")).unwrap();
    let mut buf = vec![0u8; 4096];
    for off in [0, REC - 4096, 2 * REC, 3 * REC - 4096] {
        f.read_exact_at(&mut buf, off).unwrap();
        assert_eq!(buf, a[off as usize..off as usize + 4096], "at {off}");
    }
    for off in [REC, REC + 5000, 2 * REC - 4096, REC - 100] {
        let e = f.read_exact_at(&mut buf, off).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "at {off}: {e}");
    }
    let e = fs::read(m.p("a")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    drop(f);
    m.unmount();

    // Over HTTP: the lost range answers 500, never a 200 or 206 of zeros.
    // (A GET of any part of a file holding damage answers 500: its ETag is
    // the checksum of the whole file.) The file beside it is served.
    let vol = Arc::new(Volume::open(&m.image, &OpenOptions::default()).unwrap());
    let s = serve(tempfile::tempdir().unwrap(), vol, |_| {});
    let range = |a: u64, b: u64| format!("bytes={a}-{}", b - 1);
    for (from, to) in [
        (REC, REC + 10),
        (REC - 10, REC + 10),
        (2 * REC - 1, 2 * REC),
    ] {
        let r = http(s.http, "GET", "/a", &[("Range", &range(from, to))], b"");
        assert_eq!(r.status, 500, "[{from}, {to})");
    }
    let r = http(s.http, "GET", "/a", &[], b"");
    assert_eq!(r.status, 500, "{:?}", String::from_utf8_lossy(&r.body));
    let r = http(s.http, "GET", "/b", &[], b"");
    assert_eq!((r.status, r.body == b), (200, true));
}
