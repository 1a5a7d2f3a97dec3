//! The FUSE mount driven with ordinary file calls: every operation of the
//! issue, and the errno POSIX names for each misuse.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;

use rustix::fs::{self as rfs, FallocateFlags, RenameFlags, Timespec, Timestamps, CWD};

use crate::fuse_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

#[test]
fn files_read_write_append_truncate() {
    require!(prereq::fuse());
    let m = Mounted::new("files", 64 * MIB);
    let p = m.p("a.txt");
    fs::write(&p, b"hello world").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"hello world");
    // Overwrite in the middle through one descriptor, read through another:
    // the page cache must show the new bytes.
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let g = File::open(&p).unwrap();
    let mut buf = [0u8; 11];
    g.read_exact_at(&mut buf, 0).unwrap();
    f.write_all_at(b"WORLD", 6).unwrap();
    g.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"hello WORLD");
    drop((f, g));
    assert_eq!(fs::read(&p).unwrap(), b"hello WORLD");

    // O_APPEND.
    let mut f = OpenOptions::new().append(true).open(&p).unwrap();
    f.write_all(b"!!").unwrap();
    f.write_all(b"??").unwrap();
    drop(f);
    assert_eq!(fs::read(&p).unwrap(), b"hello WORLD!!??");

    // Truncate down, then up: the tail reads as zeros.
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(5).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"hello");
    f.set_len(8).unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"hello\0\0\0");
    drop(f);

    // O_TRUNC empties; O_EXCL refuses an existing name.
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    assert_eq!(fs::metadata(&p).unwrap().len(), 0);
    expect_errno(
        OpenOptions::new().write(true).create_new(true).open(&p),
        libc::EEXIST,
    );

    // A large file in odd-sized pieces, read back in other odd pieces.
    let big = pattern(5 * MIB as usize + 12345, 7);
    let mut f = File::create(m.p("big")).unwrap();
    for c in big.chunks(777_777) {
        f.write_all(c).unwrap();
    }
    drop(f);
    let mut f = File::open(m.p("big")).unwrap();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 300_001];
    loop {
        let n = f.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(got.len(), big.len());
    assert!(got == big, "big file reads back");
    // Sparse: a write far past the end leaves a hole that reads as zeros.
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("sparse"))
        .unwrap();
    f.write_all_at(b"end", 10 * MIB).unwrap();
    let md = f.metadata().unwrap();
    assert_eq!(md.len(), 10 * MIB + 3);
    assert!(
        md.blocks() < 64,
        "a hole takes no space: {} blocks",
        md.blocks()
    );
    let mut b = vec![1u8; 4096];
    f.read_exact_at(&mut b, 5 * MIB).unwrap();
    assert!(b.iter().all(|&x| x == 0));
}

#[test]
fn directories_and_errors() {
    require!(prereq::fuse());
    let m = Mounted::new("dirs", 32 * MIB);
    fs::create_dir(m.p("d")).unwrap();
    fs::create_dir(m.p("d/e")).unwrap();
    fs::write(m.p("d/f"), b"x").unwrap();
    assert_eq!(
        fs::metadata(m.p("d")).unwrap().nlink(),
        3,
        "a directory's nlink is 2 + subdirectories"
    );
    expect_errno(fs::create_dir(m.p("d")), libc::EEXIST);
    expect_errno(fs::remove_dir(m.p("d")), libc::ENOTEMPTY);
    expect_errno(fs::remove_dir(m.p("d/f")), libc::ENOTDIR);
    expect_errno(fs::remove_file(m.p("d/e")), libc::EISDIR);
    expect_errno(fs::metadata(m.p("nope")), libc::ENOENT);
    expect_errno(fs::metadata(m.p("d/f/x")), libc::ENOTDIR);
    expect_errno(File::create(m.p("nope/x")), libc::ENOENT);
    expect_errno(OpenOptions::new().write(true).open(m.p("d")), libc::EISDIR);
    // Names: 255 bytes fine, 256 too long.
    let ok = "n".repeat(255);
    fs::write(m.p(&ok), b"").unwrap();
    assert!(m.p(&ok).exists());
    expect_errno(fs::write(m.p(&"n".repeat(256)), b""), libc::ENAMETOOLONG);
    expect_errno(fs::create_dir(m.p(&"n".repeat(256))), libc::ENAMETOOLONG);
    expect_errno(fs::metadata(m.p(&"n".repeat(256))), libc::ENAMETOOLONG);
    fs::remove_file(m.p("d/f")).unwrap();
    fs::remove_dir(m.p("d/e")).unwrap();
    assert_eq!(fs::metadata(m.p("d")).unwrap().nlink(), 2);
    fs::remove_dir(m.p("d")).unwrap();
    assert!(!m.p("d").exists());
    // A symlink loop.
    std::os::unix::fs::symlink("l2", m.p("l1")).unwrap();
    std::os::unix::fs::symlink("l1", m.p("l2")).unwrap();
    expect_errno(File::open(m.p("l1")), libc::ELOOP);
}

#[test]
fn renames_all_forms() {
    require!(prereq::fuse());
    let m = Mounted::new("rename", 32 * MIB);
    fs::write(m.p("a"), b"A").unwrap();
    fs::write(m.p("b"), b"B").unwrap();
    fs::create_dir_all(m.p("d1/sub")).unwrap();
    fs::create_dir(m.p("d2")).unwrap();
    // Plain, and over an existing file.
    fs::rename(m.p("a"), m.p("c")).unwrap();
    assert!(!m.p("a").exists());
    fs::rename(m.p("c"), m.p("b")).unwrap();
    assert_eq!(fs::read(m.p("b")).unwrap(), b"A");
    // A directory across directories: link counts follow.
    fs::rename(m.p("d1/sub"), m.p("d2/sub")).unwrap();
    assert_eq!(fs::metadata(m.p("d1")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(m.p("d2")).unwrap().nlink(), 3);
    // Over an empty directory; not over a non-empty one.
    fs::create_dir(m.p("empty")).unwrap();
    fs::rename(m.p("d1"), m.p("empty")).unwrap();
    fs::create_dir(m.p("empty/x")).unwrap();
    expect_errno(fs::rename(m.p("d2"), m.p("empty")), libc::ENOTEMPTY);
    // Kind mismatches.
    expect_errno(fs::rename(m.p("b"), m.p("d2")), libc::EISDIR);
    expect_errno(fs::rename(m.p("d2"), m.p("b")), libc::ENOTDIR);
    // Into itself.
    expect_errno(fs::rename(m.p("d2"), m.p("d2/sub/inside")), libc::EINVAL);
    // renameat2: NOREPLACE.
    fs::write(m.p("f1"), b"1").unwrap();
    fs::write(m.p("f2"), b"2").unwrap();
    expect_rerrno(
        rfs::renameat_with(CWD, m.p("f1"), CWD, m.p("f2"), RenameFlags::NOREPLACE),
        libc::EEXIST,
    );
    rfs::renameat_with(CWD, m.p("f1"), CWD, m.p("f3"), RenameFlags::NOREPLACE).unwrap();
    // EXCHANGE: two files, then a file and a directory across parents.
    rfs::renameat_with(CWD, m.p("f2"), CWD, m.p("f3"), RenameFlags::EXCHANGE).unwrap();
    assert_eq!(fs::read(m.p("f2")).unwrap(), b"1");
    assert_eq!(fs::read(m.p("f3")).unwrap(), b"2");
    let d2_nlink = fs::metadata(m.p("d2")).unwrap().nlink();
    rfs::renameat_with(CWD, m.p("f2"), CWD, m.p("d2/sub"), RenameFlags::EXCHANGE).unwrap();
    assert!(m.p("f2").is_dir());
    assert_eq!(fs::read(m.p("d2/sub")).unwrap(), b"1");
    assert_eq!(fs::metadata(m.p("d2")).unwrap().nlink(), d2_nlink - 1);
    expect_rerrno(
        rfs::renameat_with(CWD, m.p("f3"), CWD, m.p("missing"), RenameFlags::EXCHANGE),
        libc::ENOENT,
    );
    expect_rerrno(
        rfs::renameat_with(
            CWD,
            m.p("f3"),
            CWD,
            m.p("b"),
            RenameFlags::EXCHANGE | RenameFlags::NOREPLACE,
        ),
        libc::EINVAL,
    );
    // Renaming a file onto a hard link of itself does nothing.
    fs::hard_link(m.p("f3"), m.p("f3link")).unwrap();
    fs::rename(m.p("f3"), m.p("f3link")).unwrap();
    assert!(m.p("f3").exists() && m.p("f3link").exists());
}

#[test]
fn links_symlinks_and_special_files() {
    require!(prereq::fuse());
    let m = Mounted::new("links", 32 * MIB);
    fs::write(m.p("t"), b"target").unwrap();
    fs::hard_link(m.p("t"), m.p("h")).unwrap();
    assert_eq!(fs::metadata(m.p("t")).unwrap().nlink(), 2);
    assert_eq!(
        fs::metadata(m.p("t")).unwrap().ino(),
        fs::metadata(m.p("h")).unwrap().ino()
    );
    expect_errno(fs::hard_link(m.p("t"), m.p("h")), libc::EEXIST);
    fs::create_dir(m.p("dir")).unwrap();
    expect_errno(fs::hard_link(m.p("dir"), m.p("dirlink")), libc::EPERM);
    fs::remove_file(m.p("t")).unwrap();
    assert_eq!(fs::metadata(m.p("h")).unwrap().nlink(), 1);
    assert_eq!(fs::read(m.p("h")).unwrap(), b"target");

    std::os::unix::fs::symlink("h", m.p("s")).unwrap();
    assert_eq!(fs::read_link(m.p("s")).unwrap().to_str(), Some("h"));
    assert_eq!(fs::read(m.p("s")).unwrap(), b"target");
    let long_target = "x/".repeat(1000);
    std::os::unix::fs::symlink(&long_target, m.p("long")).unwrap();
    assert_eq!(
        fs::read_link(m.p("long")).unwrap().to_str(),
        Some(long_target.as_str())
    );
    assert_eq!(
        fs::symlink_metadata(m.p("long")).unwrap().len(),
        long_target.len() as u64
    );

    // FIFO: mknod through the mount, then a writer and a reader.
    rfs::mknodat(
        CWD,
        m.p("fifo"),
        rfs::FileType::Fifo,
        rfs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let md = fs::symlink_metadata(m.p("fifo")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&md.file_type()));
    let fifo = m.p("fifo");
    let w = std::thread::spawn(move || fs::write(fifo, b"through the pipe").unwrap());
    assert_eq!(fs::read(m.p("fifo")).unwrap(), b"through the pipe");
    w.join().unwrap();
    // A socket node.
    let l = UnixListener::bind(m.p("sock")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(
        &fs::symlink_metadata(m.p("sock")).unwrap().file_type()
    ));
    drop(l);
    // Device nodes as special inodes (as root).
    if rustix::process::geteuid().is_root() {
        let dev = rfs::makedev(1, 3);
        rfs::mknodat(
            CWD,
            m.p("null"),
            rfs::FileType::CharacterDevice,
            rfs::Mode::from_raw_mode(0o666),
            dev,
        )
        .unwrap();
        rfs::mknodat(
            CWD,
            m.p("blk"),
            rfs::FileType::BlockDevice,
            rfs::Mode::from_raw_mode(0o600),
            rfs::makedev(7, 0),
        )
        .unwrap();
        let md = fs::symlink_metadata(m.p("null")).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_char_device(
            &md.file_type()
        ));
        assert_eq!(md.rdev(), dev);
        assert!(std::os::unix::fs::FileTypeExt::is_block_device(
            &fs::symlink_metadata(m.p("blk")).unwrap().file_type()
        ));
    }
}

#[test]
fn readdir_while_the_directory_changes() {
    require!(prereq::fuse());
    let m = Mounted::new("readdir", 64 * MIB);
    let dir = m.p("d");
    fs::create_dir(&dir).unwrap();
    const N: usize = 2000;
    for i in 0..N {
        File::create(dir.join(format!("keep-{i:05}"))).unwrap();
    }
    // Another thread creates and removes other names while we list.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let p = dir.join(format!("tmp-{i}"));
                File::create(&p).unwrap();
                if i.is_multiple_of(2) {
                    fs::remove_file(&p).unwrap();
                }
                i += 1;
            }
            i
        })
    };
    for _round in 0..5 {
        let mut seen = std::collections::HashMap::new();
        for e in fs::read_dir(&dir).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            *seen.entry(name).or_insert(0u32) += 1;
        }
        for i in 0..N {
            assert_eq!(
                seen.get(&format!("keep-{i:05}")),
                Some(&1),
                "every untouched entry exactly once"
            );
        }
        assert!(seen.values().all(|&c| c == 1), "no entry twice");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let made = churn.join().unwrap();
    let total = fs::read_dir(&dir).unwrap().count();
    assert_eq!(total as u64, N as u64 + made / 2);
    // `ls -la` style: readdirplus then stat of every entry.
    for e in fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        assert_eq!(
            e.metadata().unwrap().ino(),
            fs::metadata(e.path()).unwrap().ino()
        );
    }
}

#[test]
fn xattrs() {
    require!(prereq::fuse());
    let m = Mounted::new("xattr", 32 * MIB);
    let p = m.p("f");
    fs::write(&p, b"some data").unwrap();
    rfs::setxattr(&p, "user.a", b"1", rfs::XattrFlags::empty()).unwrap();
    rfs::setxattr(&p, "user.b", &vec![7u8; 60000], rfs::XattrFlags::CREATE).unwrap();
    expect_rerrno(
        rfs::setxattr(&p, "user.a", b"2", rfs::XattrFlags::CREATE),
        libc::EEXIST,
    );
    expect_rerrno(
        rfs::setxattr(&p, "user.zz", b"2", rfs::XattrFlags::REPLACE),
        libc::ENODATA,
    );
    rfs::setxattr(&p, "user.a", b"22", rfs::XattrFlags::REPLACE).unwrap();
    assert_eq!(getx(&p, "user.a").unwrap(), b"22");
    assert_eq!(rfs::getxattr_query(&p, "user.b").unwrap(), 60000);
    let mut small = [0u8; 1];
    expect_rerrno(rfs::getxattr(&p, "user.a", &mut small[..]), libc::ERANGE);
    let list = listx(&p).unwrap();
    assert_eq!(list, b"user.a\0user.b\0");
    rfs::removexattr(&p, "user.a").unwrap();
    expect_rerrno(getx(&p, "user.a"), libc::ENODATA);
    expect_rerrno(rfs::removexattr(&p, "user.a"), libc::ENODATA);
    // Namespaces other file systems take; others are refused as ext4 and
    // tmpfs refuse them.
    rfs::setxattr(&p, "trusted.t", b"1", rfs::XattrFlags::empty()).unwrap();
    rfs::setxattr(&p, "security.s", b"1", rfs::XattrFlags::empty()).unwrap();
    for bad in ["foo.k", "system.foo", "com.apple.FinderInfo"] {
        expect_rerrno(
            rfs::setxattr(&p, bad, b"1", rfs::XattrFlags::empty()),
            libc::EOPNOTSUPP,
        );
    }
    expect_rerrno(
        rfs::setxattr(&p, "user.", b"1", rfs::XattrFlags::empty()),
        libc::EINVAL,
    );
    rfs::removexattr(&p, "trusted.t").unwrap();
    rfs::removexattr(&p, "security.s").unwrap();
    // On a directory too.
    rfs::setxattr(m.path(), "user.dir", b"yes", rfs::XattrFlags::empty()).unwrap();
    assert_eq!(getx(m.path(), "user.dir").unwrap(), b"yes");
    // The chain, read-only and not listed.
    let chain = getx(&p, pktfs_fuse::CHAIN_XATTR).unwrap();
    let chain = String::from_utf8(chain).unwrap();
    assert!(
        chain.starts_with('[') && chain.contains("\"record\"") && chain.contains("\"crc32c\""),
        "{chain}"
    );
    expect_rerrno(
        rfs::setxattr(&p, pktfs_fuse::CHAIN_XATTR, b"x", rfs::XattrFlags::empty()),
        libc::EPERM,
    );
    assert!(!listx(&p).unwrap().windows(5).any(|w| w == b"pktfs"));
}

/// fallocate mode 0 takes the space it names (the file's blocks, the file
/// system's free count) or fails with ENOSPC having changed nothing. The
/// adapter once split it into KEEP_SIZE pieces, which allocate nothing past
/// the end of file: a file grew by fallocate had no blocks, and 100 MiB
/// "fitted" on a 64 MiB image.
#[test]
fn fallocate_takes_the_space_or_fails_with_enospc() {
    require!(prereq::fuse());
    let m = Mounted::new("falloc_space", 64 * MIB);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("f"))
        .unwrap();
    let free_bytes = || {
        let s = rfs::statvfs(m.path()).unwrap();
        s.f_bfree * s.f_frsize
    };
    let before = free_bytes();
    rfs::fallocate(&f, FallocateFlags::empty(), 0, 8 * MIB).unwrap();
    let meta = f.metadata().unwrap();
    assert_eq!(meta.len(), 8 * MIB);
    assert!(
        meta.blocks() * 512 >= 8 * MIB,
        "a file grown by fallocate has its blocks ({} sectors)",
        meta.blocks()
    );
    let after = free_bytes();
    assert!(
        before - after >= 8 * MIB,
        "fallocate took {} bytes of the file system, not 8 MiB",
        before - after
    );
    let mut b = vec![1u8; 4096];
    f.read_exact_at(&mut b, 5 * MIB).unwrap();
    assert!(b.iter().all(|&x| x == 0), "allocated space reads as zeros");
    // More than is free: refused, and neither the file nor the free space
    // changed.
    expect_rerrno(
        rfs::fallocate(&f, FallocateFlags::empty(), 8 * MIB, 100 * MIB),
        libc::ENOSPC,
    );
    assert_eq!(f.metadata().unwrap().len(), 8 * MIB);
    assert_eq!(free_bytes(), after);
    // Data written over the allocated range reads back.
    f.write_all_at(&pattern(MIB as usize, 5), 2 * MIB).unwrap();
    let mut got = vec![0u8; MIB as usize];
    f.read_exact_at(&mut got, 2 * MIB).unwrap();
    assert_eq!(got, pattern(MIB as usize, 5));
}

#[test]
fn fallocate_seek_data_hole_and_copy_file_range() {
    require!(prereq::fuse());
    let m = Mounted::new("falloc", 64 * MIB);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("f"))
        .unwrap();
    // mode 0 extends, KEEP_SIZE does not.
    rfs::fallocate(&f, FallocateFlags::empty(), 0, MIB).unwrap();
    assert_eq!(f.metadata().unwrap().len(), MIB);
    rfs::fallocate(&f, FallocateFlags::KEEP_SIZE, MIB, MIB).unwrap();
    assert_eq!(f.metadata().unwrap().len(), MIB);
    let mut b = vec![1u8; 4096];
    f.read_exact_at(&mut b, 4096).unwrap();
    assert!(b.iter().all(|&x| x == 0), "allocated space reads as zeros");
    // Data, punch a hole in the middle, then seek around it.
    f.write_all_at(&pattern(MIB as usize, 3), 0).unwrap();
    rfs::fallocate(
        &f,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        256 << 10,
        256 << 10,
    )
    .unwrap();
    assert_eq!(f.metadata().unwrap().len(), MIB);
    f.read_exact_at(&mut b, 300 << 10).unwrap();
    assert!(b.iter().all(|&x| x == 0), "a punched hole reads as zeros");
    f.read_exact_at(&mut b, 0).unwrap();
    assert_eq!(b, pattern(MIB as usize, 3)[..4096]);
    assert_eq!(rfs::seek(&f, rfs::SeekFrom::Data(0)).unwrap(), 0);
    assert_eq!(rfs::seek(&f, rfs::SeekFrom::Hole(0)).unwrap(), 256 << 10);
    assert_eq!(
        rfs::seek(&f, rfs::SeekFrom::Data(256 << 10)).unwrap(),
        512 << 10
    );
    assert_eq!(rfs::seek(&f, rfs::SeekFrom::Hole(512 << 10)).unwrap(), MIB);
    expect_rerrno(rfs::seek(&f, rfs::SeekFrom::Data(MIB)), libc::ENXIO);
    expect_rerrno(
        rfs::fallocate(&f, FallocateFlags::PUNCH_HOLE, 0, 4096),
        libc::EOPNOTSUPP,
    );
    expect_rerrno(
        rfs::fallocate(&f, FallocateFlags::COLLAPSE_RANGE, 0, 4096),
        libc::EOPNOTSUPP,
    );

    // copy_file_range: the copy shares the source's buffers and equals it.
    let src_data = pattern(3 * MIB as usize + 17, 9);
    fs::write(m.p("src"), &src_data).unwrap();
    let src = File::open(m.p("src")).unwrap();
    let dst = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("dst"))
        .unwrap();
    let mut off_in = 0u64;
    let mut off_out = 100u64;
    while off_in < src_data.len() as u64 {
        let n = rfs::copy_file_range(&src, Some(&mut off_in), &dst, Some(&mut off_out), 1 << 30)
            .unwrap();
        assert!(n > 0);
    }
    drop(dst);
    let got = fs::read(m.p("dst")).unwrap();
    assert_eq!(got.len(), src_data.len() + 100);
    assert!(got[100..] == src_data[..] && got[..100].iter().all(|&x| x == 0));
    let before = rfs::statvfs(m.path()).unwrap().f_bfree;
    let mut out = File::create(m.p("copy2")).unwrap();
    let n = std::io::copy(&mut File::open(m.p("src")).unwrap(), &mut out).unwrap();
    assert_eq!(n, src_data.len() as u64);
    let after = rfs::statvfs(m.path()).unwrap().f_bfree;
    assert!(
        before - after < 64,
        "copy_file_range shares buffers ({} blocks used)",
        before - after
    );
    // Lseek whence the kernel handles itself still works.
    let mut f = File::open(m.p("src")).unwrap();
    assert_eq!(f.seek(SeekFrom::End(-17)).unwrap(), 3 * MIB);
}

#[test]
fn attributes_statfs_and_times() {
    require!(prereq::fuse());
    let m = Mounted::new("attrs", 64 * MIB);
    let p = m.p("f");
    fs::write(&p, b"abc").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o4751);
    std::os::unix::fs::chown(&p, Some(1234), Some(5678)).unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!((md.uid(), md.gid()), (1234, 5678));
    assert_eq!(md.mode() & 0o7777, 0o751, "chown clears suid");
    // utimensat: explicit, UTIME_OMIT, UTIME_NOW.
    let ts = |s, n| Timespec {
        tv_sec: s,
        tv_nsec: n,
    };
    rfs::utimensat(
        CWD,
        &p,
        &Timestamps {
            last_access: ts(1000, 5),
            last_modification: ts(2000, 6),
        },
        rfs::AtFlags::empty(),
    )
    .unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!(
        (md.atime(), md.atime_nsec(), md.mtime(), md.mtime_nsec()),
        (1000, 5, 2000, 6)
    );
    rfs::utimensat(
        CWD,
        &p,
        &Timestamps {
            last_access: ts(0, rfs::UTIME_OMIT),
            last_modification: ts(0, rfs::UTIME_NOW),
        },
        rfs::AtFlags::empty(),
    )
    .unwrap();
    let md = fs::metadata(&p).unwrap();
    assert_eq!(
        (md.atime(), md.atime_nsec()),
        (1000, 5),
        "UTIME_OMIT leaves atime"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((md.mtime() - now).abs() < 5, "UTIME_NOW sets mtime");
    // Negative times.
    rfs::utimensat(
        CWD,
        &p,
        &Timestamps {
            last_access: ts(-10, 0),
            last_modification: ts(-20, 0),
        },
        rfs::AtFlags::empty(),
    )
    .unwrap();
    assert_eq!(fs::metadata(&p).unwrap().mtime(), -20);
    // A write updates mtime and ctime.
    let before = fs::metadata(&p).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    let after = fs::metadata(&p).unwrap();
    assert!(
        after.mtime() > before.mtime()
            && (after.ctime(), after.ctime_nsec()) > (before.ctime(), before.ctime_nsec())
    );

    // statfs.
    let s = rfs::statvfs(m.path()).unwrap();
    assert_eq!(s.f_namemax, 255);
    assert!(s.f_blocks > 0 && s.f_bfree <= s.f_blocks && s.f_files > 0 && s.f_ffree > 0);
    fs::write(m.p("big"), vec![1u8; 4 * MIB as usize]).unwrap();
    let s2 = rfs::statvfs(m.path()).unwrap();
    assert!(
        (s.f_bfree - s2.f_bfree) * s.f_frsize >= 4 * MIB,
        "writing 4 MiB uses 4 MiB"
    );
    assert!(s2.f_ffree < s.f_ffree);
    // access(2): with default_permissions the kernel answers from the mode.
    rfs::accessat(CWD, &p, rfs::Access::READ_OK, rfs::AtFlags::empty()).unwrap();
    expect_rerrno(
        rfs::accessat(
            CWD,
            m.p("missing"),
            rfs::Access::EXISTS,
            rfs::AtFlags::empty(),
        ),
        libc::ENOENT,
    );
}

#[test]
fn setgid_directories_and_modes() {
    require!(prereq::fuse());
    let m = Mounted::new("setgid", 32 * MIB);
    let d = m.p("g");
    fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, None, Some(4242)).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o2775)).unwrap();
    fs::write(d.join("f"), b"").unwrap();
    fs::create_dir(d.join("sub")).unwrap();
    assert_eq!(
        fs::metadata(d.join("f")).unwrap().gid(),
        4242,
        "a file in a setgid directory takes its group"
    );
    let sub = fs::metadata(d.join("sub")).unwrap();
    assert_eq!(sub.gid(), 4242);
    assert!(
        sub.mode() & 0o2000 != 0,
        "a subdirectory inherits the setgid bit"
    );
    // The mode asked for, less the umask, is what we get.
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(m.p("m"))
        .unwrap();
    assert_eq!(f.metadata().unwrap().mode() & 0o777, 0o640 & !umask());
}

fn umask() -> u32 {
    // Read it without changing it.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Umask:"))
                .and_then(|l| u32::from_str_radix(l[6..].trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

#[test]
fn unlinked_open_files_stay_usable() {
    require!(prereq::fuse());
    let m = Mounted::new("unlinked", 32 * MIB);
    let free0 = rfs::statvfs(m.path()).unwrap().f_bfree;
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.p("tmp"))
        .unwrap();
    f.write_all(&vec![5u8; 2 * MIB as usize]).unwrap();
    fs::remove_file(m.p("tmp")).unwrap();
    assert!(!m.p("tmp").exists());
    assert_eq!(f.metadata().unwrap().nlink(), 0);
    // Still readable and writable through the descriptor.
    f.write_all_at(b"after unlink", 10).unwrap();
    let mut b = [0u8; 12];
    f.read_exact_at(&mut b, 10).unwrap();
    assert_eq!(&b, b"after unlink");
    // A new file with the same name is a different file.
    fs::write(m.p("tmp"), b"new").unwrap();
    f.read_exact_at(&mut b, 10).unwrap();
    assert_eq!(&b, b"after unlink");
    drop(f);
    fs::remove_file(m.p("tmp")).unwrap();
    // The space comes back once the last reference is gone (the kernel's
    // forget may come a little after the close).
    let mut back = false;
    for _ in 0..100 {
        if rfs::statvfs(m.path()).unwrap().f_bfree + 4 >= free0 {
            back = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(back, "space of an unlinked file is freed after close");
}

#[test]
fn many_threads_at_once() {
    require!(prereq::fuse());
    let m = Mounted::new("threads", 128 * MIB);
    let root = m.path().to_path_buf();
    let ts: Vec<_> = (0..8)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                let d = root.join(format!("t{t}"));
                fs::create_dir(&d).unwrap();
                for i in 0..200 {
                    let p = d.join(format!("f{i}"));
                    let data = pattern(1000 + i * 37, (t * 1000 + i) as u32);
                    fs::write(&p, &data).unwrap();
                    assert_eq!(fs::read(&p).unwrap(), data);
                    if i % 3 == 0 {
                        fs::rename(&p, root.join(format!("t{t}-moved-{i}"))).unwrap();
                    } else if i % 3 == 1 {
                        fs::remove_file(&p).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let n = fs::read_dir(&root).unwrap().count();
    assert_eq!(n, 8 + 8 * 67);
    m.vol().check_invariants().unwrap();
}

/// atime: relatime by default (the first read after a change updates it,
/// the next does not), every read with `strictatime`, never with
/// `noatime`; a directory listing counts as a read. ctime never moves.
#[test]
fn atime_policies() {
    require!(prereq::fuse());
    fn atime_ns(p: &std::path::Path) -> i128 {
        let md = fs::metadata(p).unwrap();
        md.atime() as i128 * 1_000_000_000 + md.atime_nsec() as i128
    }
    fn read_all(p: &std::path::Path) {
        let mut s = Vec::new();
        File::open(p).unwrap().read_to_end(&mut s).unwrap();
    }
    for (opt, first, second) in [
        ("relatime", true, false),
        ("strictatime", true, true),
        ("noatime", false, false),
    ] {
        let mut opts = pktfs_fuse::MountOptions::default();
        pktfs::mount_options::apply(&mut opts, opt).unwrap();
        let m = Mounted::with_options(&format!("atime-{opt}"), 16 * MIB, opts);
        let p = m.p("f");
        fs::write(&p, b"some bytes").unwrap();
        let ctime = fs::metadata(&p).unwrap().ctime_nsec();
        let t0 = atime_ns(&p);
        std::thread::sleep(std::time::Duration::from_millis(20));
        read_all(&p);
        let t1 = atime_ns(&p);
        assert_eq!(
            t1 > t0,
            first,
            "{opt}: first read moved atime: {t0} -> {t1}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        read_all(&p);
        let t2 = atime_ns(&p);
        assert_eq!(
            t2 > t1,
            second,
            "{opt}: second read moved atime: {t1} -> {t2}"
        );
        assert_eq!(
            fs::metadata(&p).unwrap().ctime_nsec(),
            ctime,
            "{opt}: ctime"
        );
        // A listing of a directory just changed.
        let d = m.p("d");
        fs::create_dir(&d).unwrap();
        fs::write(d.join("x"), b"").unwrap();
        let d0 = atime_ns(&d);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        assert_eq!(atime_ns(&d) > d0, first, "{opt}: readdir moved atime");
    }
}
