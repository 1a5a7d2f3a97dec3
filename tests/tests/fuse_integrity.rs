//! Trust the bytes through a real mount: damaged payload reads as EIO
//! (only its range), a copy of it stays damaged, and a failed persist
//! stops the mount from serving anything more.

use std::fs;
use std::io::Read;
use std::os::unix::fs::FileExt;

use crate::fuse_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

#[test]
fn damaged_payload_is_eio_through_the_mount() {
    require!(prereq::fuse());
    let mut m = Mounted::new("integrity", 64 * MIB);
    let a = pattern(3 * 65536, 1);
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(m.p("a"))
        .unwrap();
    // Three separate writes: three records of 64 KiB.
    for k in 0..3u64 {
        f.write_all_at(
            &a[(k * 65536) as usize..((k + 1) * 65536) as usize],
            k * 65536,
        )
        .unwrap();
    }
    drop(f);
    fs::write(m.p("b"), pattern(100_000, 2)).unwrap();
    let ino = fs::metadata(m.p("a"))
        .map(|md| std::os::unix::fs::MetadataExt::ino(&md))
        .unwrap();
    let rec = m
        .vol()
        .chain(ino)
        .unwrap()
        .into_iter()
        .find(|c| c.file_off == 65536)
        .expect("a record at 64 KiB");
    m.unmount();
    let mut img = fs::read(&m.image).unwrap();
    img[(rec.image_off + 777) as usize] ^= 0xff;
    fs::write(&m.image, img).unwrap();
    m.mount();

    let f = fs::File::open(m.p("a")).unwrap();
    let mut buf = vec![0u8; 4096];
    // The damaged record's range: EIO, every time.
    for _ in 0..2 {
        let e = f.read_exact_at(&mut buf, 65536 + 4096).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    }
    // `cat` of the whole file fails instead of printing wrong bytes.
    let mut all = Vec::new();
    let e = fs::File::open(m.p("a"))
        .unwrap()
        .read_to_end(&mut all)
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    // The other records and the other file read back intact.
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, a[..4096]);
    f.read_exact_at(&mut buf, 2 * 65536).unwrap();
    assert_eq!(buf, a[2 * 65536..2 * 65536 + 4096]);
    assert_eq!(fs::read(m.p("b")).unwrap(), pattern(100_000, 2));
    // copy_file_range shares the damaged bytes: the copy fails the same way.
    let src = fs::File::open(m.p("a")).unwrap();
    let dst = fs::File::create(m.p("c")).unwrap();
    let n = rustix::fs::copy_file_range(&src, Some(&mut 65536u64), &dst, Some(&mut 0u64), 4096);
    match n {
        Ok(_) => {
            let e = fs::read(m.p("c")).unwrap_err();
            assert_eq!(
                e.raw_os_error(),
                Some(libc::EIO),
                "the copy of damage reads back"
            );
        }
        Err(e) => assert_eq!(e.raw_os_error(), libc::EIO),
    }
}

#[test]
fn a_failed_persist_stops_the_mount() {
    require!(prereq::fuse());
    let m = Mounted::new("failstop", 32 * MIB);
    fs::write(m.p("acked"), b"acknowledged").unwrap();
    // The next flush fails as a failed msync would.
    m.vol().pm().inject_persist_failure();
    let e = fs::write(m.p("later"), b"never acknowledged").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    // Stopped: every request fails, reads included.
    let e = fs::read(m.p("acked")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(m.vol().failure().unwrap().contains("persist"));
    drop(m); // unmounts; the image is recovered by the next open
}
