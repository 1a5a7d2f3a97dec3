//! The mount over time: a full image (ENOSPC, nothing stored harmed) and an
//! unmount/remount that must give the same tree. (Descriptors and memory
//! over many operations: fuse_resources.rs, alone in its process.)

use std::fs::{self, File, OpenOptions};
use std::io::Write;

use crate::fuse_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

#[test]
fn full_image_gives_enospc_and_harms_nothing() {
    require!(prereq::fuse());
    let m = Mounted::new("enospc", 8 * MIB);
    // Some files that must survive.
    let mut keep = Vec::new();
    for i in 0..20 {
        let d = pattern(10_000 + i * 1000, i as u32);
        fs::write(m.p(&format!("keep{i}")), &d).unwrap();
        keep.push(d);
    }
    fs::create_dir(m.p("dir")).unwrap();
    // Fill with one big file until the image is full.
    let mut f = File::create(m.p("fill")).unwrap();
    let chunk = vec![0xabu8; 256 << 10];
    let mut written = 0u64;
    let err = loop {
        match f.write(&chunk) {
            Ok(n) => written += n as u64,
            Err(e) => break e,
        }
        assert!(written < 64 * MIB, "an 8 MiB image never takes 64 MiB");
    };
    assert_eq!(errno(&err), libc::ENOSPC, "{err}");
    drop(f);
    let md = fs::metadata(m.p("fill")).unwrap();
    assert_eq!(
        md.len(),
        written,
        "the size is what was written, nothing half-done"
    );
    // Many small files until no inode, record or buffer is left.
    let mut small = 0;
    let last = loop {
        match fs::write(m.p(&format!("dir/s{small}")), b"tiny") {
            Ok(()) => small += 1,
            Err(e) => break e,
        }
        assert!(small < 1_000_000);
    };
    assert_eq!(errno(&last), libc::ENOSPC, "{last}");
    let _ = fs::remove_file(m.p(&format!("dir/s{small}")));
    // Metadata operations on a full image fail cleanly too.
    let r = fs::create_dir(m.p("another"));
    if let Err(e) = &r {
        assert_eq!(errno(e), libc::ENOSPC);
    }
    let x = rustix::fs::setxattr(
        m.p("keep0"),
        "user.big",
        &vec![1u8; 8000],
        rustix::fs::XattrFlags::empty(),
    );
    if let Err(e) = x {
        assert_eq!(e.raw_os_error(), libc::ENOSPC);
    }
    // What was stored is intact, through the mount and after a remount.
    let check = |m: &Mounted| {
        for (i, d) in keep.iter().enumerate() {
            assert!(
                fs::read(m.p(&format!("keep{i}"))).unwrap() == *d,
                "keep{i} intact"
            );
        }
        let fill = fs::read(m.p("fill")).unwrap();
        assert_eq!(fill.len() as u64, written);
        assert!(fill.iter().all(|&b| b == 0xab));
        for i in 0..small {
            assert_eq!(fs::read(m.p(&format!("dir/s{i}"))).unwrap(), b"tiny");
        }
    };
    check(&m);
    m.vol().check_invariants().unwrap();
    let mut m = m;
    m.remount();
    check(&m);
    // Freeing space makes writes possible again.
    fs::remove_file(m.p("fill")).unwrap();
    let mut ok = false;
    for _ in 0..100 {
        if fs::write(m.p("after"), vec![1u8; MIB as usize]).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ok, "space is reusable after a delete");
}

#[test]
fn remount_gives_the_same_tree() {
    require!(prereq::fuse());
    let mut m = Mounted::new("remount", 64 * MIB);
    fs::create_dir_all(m.p("a/b/c")).unwrap();
    for i in 0..50 {
        fs::write(m.p(&format!("a/b/f{i}")), pattern(i * 997, i as u32)).unwrap();
    }
    fs::write(m.p("a/big"), pattern(3 * MIB as usize, 1)).unwrap();
    let f = OpenOptions::new().write(true).open(m.p("a/big")).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"patched", 12345).unwrap();
    f.set_len(2 * MIB + 3).unwrap();
    drop(f);
    std::os::unix::fs::symlink("b/f1", m.p("a/link")).unwrap();
    fs::hard_link(m.p("a/b/f2"), m.p("a/hard")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        m.p("a/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    rustix::fs::setxattr(
        m.p("a/b/f3"),
        "user.k",
        b"v",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    fs::rename(m.p("a/b/f4"), m.p("a/b/c/f4")).unwrap();
    fs::remove_file(m.p("a/b/f5")).unwrap();
    std::os::unix::fs::chown(m.p("a/b/f6"), Some(77), Some(88)).unwrap();
    let before = snapshot(m.path());
    assert!(before.len() > 50);
    m.remount();
    assert!(
        m.vol().open_report().was_clean,
        "an unmount closes the image cleanly"
    );
    let after = snapshot(m.path());
    assert_eq!(before, after);
}
