//! Volume unit tests: every operation, checked against the media after each
//! step (`check_invariants`) and across a reopen.

use super::*;
use crate::media::Pm;
use pktfs_layout::GeometryParams;

pub(crate) fn fresh(size: u64) -> Volume {
    fresh_with(GeometryParams::for_size(size))
}

pub(crate) fn fresh_with(params: GeometryParams) -> Volume {
    Volume::in_memory(params).unwrap()
}

/// Reopen from the current bytes (what a clean restart sees).
pub(crate) fn reopen(v: Volume) -> Volume {
    let img = v.pm.slice(0, v.pm.len() as usize).to_vec();
    drop(v);
    Volume::open_pm(Pm::from_bytes(img), false).unwrap()
}

/// The media agree with the Volume's state (`check_invariants`).
pub(crate) fn ok(v: &Volume) {
    v.check_invariants().unwrap();
}

#[test]
fn files_dirs_links_xattrs_survive_reopen() {
    let v = fresh(8 << 20);
    let root = v.root();
    let d = v.mkdir(root, b"dir", 0o755, 1, 2).unwrap();
    assert_eq!(v.getattr(root).unwrap().nlink, 3);
    let f = v.create(d.ino, b"f", 0o644, 1, 2).unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    v.write(f.ino, 0, &data).unwrap();
    ok(&v);
    // Partial overwrite in the middle splits the record.
    v.write(f.ino, 3000, b"hello").unwrap();
    ok(&v);
    let mut want = data.clone();
    want[3000..3005].copy_from_slice(b"hello");
    assert_eq!(v.read(f.ino, 0, 20_000).unwrap(), want);
    assert_eq!(v.chain(f.ino).unwrap().len(), 3);
    // Hole, then truncate.
    v.write(f.ino, 20_000, b"tail").unwrap();
    assert_eq!(v.getattr(f.ino).unwrap().size, 20_004);
    assert_eq!(&v.read(f.ino, 15_000, 10).unwrap()[..], &[0u8; 10]);
    v.setattr(
        f.ino,
        &SetAttr {
            size: Some(5000),
            ..Default::default()
        },
    )
    .unwrap();
    ok(&v);
    assert_eq!(v.read(f.ino, 0, 99_999).unwrap(), want[..5000].to_vec());
    // Links, symlinks, xattrs, special files.
    v.link(f.ino, root, b"hard").unwrap();
    assert_eq!(v.getattr(f.ino).unwrap().nlink, 2);
    let s = v.symlink(root, b"sym", b"dir/f", 0, 0).unwrap();
    assert_eq!(v.readlink(s.ino).unwrap(), b"dir/f");
    v.setxattr(f.ino, b"user.a", b"1", XattrFlags::default())
        .unwrap();
    v.setxattr(f.ino, b"user.b", &[7u8; 3000], XattrFlags::default())
        .unwrap();
    v.setxattr(
        f.ino,
        b"user.a",
        b"22",
        XattrFlags {
            replace: true,
            create: false,
        },
    )
    .unwrap();
    assert!(matches!(
        v.setxattr(
            f.ino,
            b"user.a",
            b"x",
            XattrFlags {
                create: true,
                replace: false
            }
        ),
        Err(FsError::Exists)
    ));
    v.mknod(root, b"fifo", FileType::Fifo, 0o600, 0, 0, 0)
        .unwrap();
    v.mknod(root, b"dev", FileType::CharDevice, 0o600, 0, 0, 0x0501)
        .unwrap();
    ok(&v);
    let v = reopen(v);
    ok(&v);
    let f2 = v.lookup(root, b"hard").unwrap();
    assert_eq!(f2.ino, f.ino);
    assert_eq!(f2.nlink, 2);
    assert_eq!(v.read(f.ino, 0, 99_999).unwrap(), want[..5000].to_vec());
    assert_eq!(v.getxattr(f.ino, b"user.a").unwrap(), b"22");
    assert_eq!(
        v.listxattr(f.ino).unwrap(),
        vec![b"user.a".to_vec(), b"user.b".to_vec()]
    );
    assert_eq!(v.lookup(root, b"dev").unwrap().rdev, 0x0501);
    assert_eq!(v.lookup(root, b"fifo").unwrap().kind, FileType::Fifo);
    // Unlink one name, then the other: the inode and its space go.
    let free0 = v.statfs();
    v.unlink(d.ino, b"f").unwrap();
    assert_eq!(v.getattr(f.ino).unwrap().nlink, 1);
    v.unlink(root, b"hard").unwrap();
    assert!(matches!(v.getattr(f.ino), Err(FsError::NotFound)));
    ok(&v);
    assert!(v.statfs().files_free > free0.files_free);
    assert!(matches!(v.rmdir(root, b"nope"), Err(FsError::NotFound)));
    v.rmdir(root, b"dir").unwrap();
    assert_eq!(v.getattr(root).unwrap().nlink, 2);
    ok(&v);
}

#[test]
fn rename_forms() {
    let v = fresh(8 << 20);
    let r = v.root();
    let a = v.mkdir(r, b"a", 0o755, 0, 0).unwrap();
    let b = v.mkdir(r, b"b", 0o755, 0, 0).unwrap();
    let x = v.create(a.ino, b"x", 0o644, 0, 0).unwrap();
    let y = v.create(b.ino, b"y", 0o644, 0, 0).unwrap();
    v.write(y.ino, 0, b"yy").unwrap();
    // Plain move across directories.
    v.rename(a.ino, b"x", b.ino, b"x2", RenameFlags::default())
        .unwrap();
    ok(&v);
    assert!(v.lookup(a.ino, b"x").is_err());
    assert_eq!(v.lookup(b.ino, b"x2").unwrap().ino, x.ino);
    // NOREPLACE refuses, replace frees the victim.
    assert!(matches!(
        v.rename(
            b.ino,
            b"x2",
            b.ino,
            b"y",
            RenameFlags {
                noreplace: true,
                exchange: false
            }
        ),
        Err(FsError::Exists)
    ));
    v.rename(b.ino, b"x2", b.ino, b"y", RenameFlags::default())
        .unwrap();
    ok(&v);
    assert_eq!(v.lookup(b.ino, b"y").unwrap().ino, x.ino);
    assert!(v.getattr(y.ino).is_err());
    // Exchange a directory and a file across parents.
    let sub = v.mkdir(a.ino, b"sub", 0o755, 0, 0).unwrap();
    assert_eq!(v.getattr(a.ino).unwrap().nlink, 3);
    v.rename(
        a.ino,
        b"sub",
        b.ino,
        b"y",
        RenameFlags {
            exchange: true,
            noreplace: false,
        },
    )
    .unwrap();
    ok(&v);
    assert_eq!(v.lookup(b.ino, b"y").unwrap().ino, sub.ino);
    assert_eq!(v.lookup(a.ino, b"sub").unwrap().ino, x.ino);
    assert_eq!(v.getattr(a.ino).unwrap().nlink, 2);
    assert_eq!(v.getattr(b.ino).unwrap().nlink, 3);
    assert_eq!(v.parent_of(sub.ino).unwrap(), b.ino);
    // Into itself.
    assert!(matches!(
        v.rename(r, b"b", sub.ino, b"loop", RenameFlags::default()),
        Err(FsError::Invalid(_))
    ));
    // Directory over a non-empty directory, dir over file, file over dir.
    v.create(sub.ino, b"inner", 0o644, 0, 0).unwrap();
    assert!(matches!(
        v.rename(r, b"a", b.ino, b"y", RenameFlags::default()),
        Err(FsError::NotEmpty)
    ));
    assert!(matches!(
        v.rename(b.ino, b"y", a.ino, b"sub", RenameFlags::default()),
        Err(FsError::NotDir)
    ));
    assert!(matches!(
        v.rename(a.ino, b"sub", b.ino, b"y", RenameFlags::default()),
        Err(FsError::IsDir)
    ));
    // Directory over an empty directory in another parent.
    let e = v.mkdir(r, b"empty", 0o755, 0, 0).unwrap();
    v.rename(b.ino, b"y", r, b"empty", RenameFlags::default())
        .unwrap();
    assert!(v.getattr(e.ino).is_err());
    assert_eq!(v.getattr(r).unwrap().nlink, 5);
    assert_eq!(v.getattr(b.ino).unwrap().nlink, 2);
    ok(&v);
    let v = reopen(v);
    ok(&v);
    assert_eq!(v.lookup(r, b"empty").unwrap().ino, sub.ino);
}

#[test]
fn readdir_cookies_survive_changes() {
    let v = fresh(8 << 20);
    let r = v.root();
    for i in 0..50 {
        v.create(r, format!("f{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
    }
    let mut first = Vec::new();
    v.readdir(r, 0, |e| {
        first.push(e);
        first.len() < 10
    })
    .unwrap();
    let resume = first.last().unwrap().cookie;
    // Remove an entry already seen and one not yet seen; add one.
    v.unlink(r, b"f0").unwrap();
    v.unlink(r, b"f20").unwrap();
    v.create(r, b"new", 0o644, 0, 0).unwrap();
    let mut rest = Vec::new();
    v.readdir(r, resume, |e| {
        rest.push(String::from_utf8(e.name).unwrap());
        true
    })
    .unwrap();
    assert_eq!(rest.len(), 50 - 10 - 1 + 1);
    assert!(!rest.contains(&"f20".to_string()) && rest.contains(&"new".to_string()));
    assert!(!rest
        .iter()
        .any(|n| first.iter().any(|f| f.name == n.as_bytes())));
}

#[test]
fn enospc_harms_nothing_and_space_is_reused() {
    let v = fresh(2 << 20);
    let r = v.root();
    let f = v.create(r, b"big", 0o644, 0, 0).unwrap();
    let chunk = vec![0xabu8; 64 << 10];
    let mut written = 0u64;
    loop {
        match v.write(f.ino, written, &chunk) {
            Ok(n) => written += n as u64,
            Err(FsError::NoSpace(_)) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written > 0);
    ok(&v);
    let g = v.create(r, b"other", 0o644, 0, 0).unwrap();
    assert!(matches!(
        v.write(g.ino, 0, &chunk),
        Err(FsError::NoSpace(_))
    ));
    assert_eq!(v.getattr(f.ino).unwrap().size, written);
    assert!(v
        .read(f.ino, 0, written)
        .unwrap()
        .iter()
        .all(|&b| b == 0xab));
    ok(&v);
    v.unlink(r, b"big").unwrap();
    v.write(g.ino, 0, &chunk).unwrap();
    ok(&v);
    let v = reopen(v);
    ok(&v);
}

#[test]
fn small_files_share_buffers() {
    let v = fresh_with(GeometryParams {
        inode_count: Some(12_000),
        ..GeometryParams::for_size(64 << 20)
    });
    let r = v.root();
    let before = v.statfs().blocks_free;
    let n = 10_000u64;
    for i in 0..n {
        let f = v
            .create(r, format!("small{i}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        v.write(f.ino, 0, &[i as u8; 100]).unwrap();
    }
    // Everything: file data and the dirents' names.
    let used = before - v.statfs().blocks_free;
    let ratio = used as f64 / n as f64;
    println!(
        "{n} files of 100 bytes use {used} buffers of 2 KiB: {:.1}% of one buffer per file",
        ratio * 100.0
    );
    assert!(ratio < 0.25, "used {used} buffers");
    ok(&v);
}

#[test]
fn fallocate_punch_seek_copy() {
    let v = fresh(8 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &[1u8; 8192]).unwrap();
    v.fallocate(
        f.ino,
        2048,
        2048,
        FallocMode {
            keep_size: true,
            punch_hole: true,
        },
    )
    .unwrap();
    ok(&v);
    assert_eq!(v.seek(f.ino, 0, false).unwrap(), 2048);
    assert_eq!(v.seek(f.ino, 2048, true).unwrap(), 4096);
    let d = v.read(f.ino, 0, 8192).unwrap();
    assert!(
        d[..2048].iter().all(|&b| b == 1)
            && d[2048..4096].iter().all(|&b| b == 0)
            && d[4096..].iter().all(|&b| b == 1)
    );
    // KEEP_SIZE never allocates past the end of file (also from past it).
    v.fallocate(
        f.ino,
        4096,
        1 << 20,
        FallocMode {
            keep_size: true,
            punch_hole: false,
        },
    )
    .unwrap();
    v.fallocate(
        f.ino,
        1 << 20,
        4096,
        FallocMode {
            keep_size: true,
            punch_hole: false,
        },
    )
    .unwrap();
    assert_eq!(v.getattr(f.ino).unwrap().size, 8192);
    ok(&v);
    v.fallocate(f.ino, 0, 16384, FallocMode::default()).unwrap();
    ok(&v);
    assert_eq!(v.getattr(f.ino).unwrap().size, 16384);
    assert_eq!(v.seek(f.ino, 0, false).unwrap(), 16384);
    let g = v.create(r, b"g", 0o644, 0, 0).unwrap();
    assert_eq!(v.copy_range(f.ino, 1000, g.ino, 10, 4000).unwrap(), 4000);
    ok(&v);
    assert_eq!(
        v.read(g.ino, 10, 4000).unwrap(),
        v.read(f.ino, 1000, 4000).unwrap()
    );
    // The copy shares buffer space: overwriting the source leaves it intact.
    v.write(f.ino, 0, &[9u8; 8192]).unwrap();
    assert_eq!(v.read(g.ino, 10, 1048).unwrap(), vec![1u8; 1048]);
    ok(&v);
    let v = reopen(v);
    ok(&v);
}

#[test]
fn errors_are_posix() {
    let v = fresh(8 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o644, 0, 0).unwrap();
    assert!(matches!(
        v.create(r, b"f", 0o644, 0, 0),
        Err(FsError::Exists)
    ));
    assert!(matches!(
        v.create(f.ino, b"x", 0o644, 0, 0),
        Err(FsError::NotDir)
    ));
    assert!(matches!(
        v.create(r, &[b'a'; 256], 0o644, 0, 0),
        Err(FsError::NameTooLong)
    ));
    assert!(matches!(
        v.lookup(r, &[b'a'; 256]),
        Err(FsError::NameTooLong)
    ));
    assert!(matches!(v.unlink(r, b"nope"), Err(FsError::NotFound)));
    let d = v.mkdir(r, b"d", 0o755, 0, 0).unwrap();
    assert!(matches!(v.unlink(r, b"d"), Err(FsError::IsDir)));
    assert!(matches!(v.rmdir(r, b"f"), Err(FsError::NotDir)));
    v.create(d.ino, b"x", 0o644, 0, 0).unwrap();
    assert!(matches!(v.rmdir(r, b"d"), Err(FsError::NotEmpty)));
    assert!(matches!(
        v.link(d.ino, r, b"dl"),
        Err(FsError::NotPermitted(_))
    ));
    assert!(matches!(v.write(d.ino, 0, b"x"), Err(FsError::IsDir)));
    assert!(matches!(
        v.getxattr(f.ino, b"user.none"),
        Err(FsError::NoXattr)
    ));
    assert!(matches!(
        v.write(f.ino, u64::MAX - 1, b"xx"),
        Err(FsError::TooBig)
    ));
    assert!(matches!(v.seek(f.ino, 0, true), Err(FsError::Nxio)));
    assert!(matches!(v.getattr(999_999), Err(FsError::NotFound)));
    assert!(matches!(v.getattr(0), Err(FsError::NotFound)));
}

#[test]
fn unlinked_open_file_lives_until_unpinned() {
    let v = fresh(8 << 20);
    let r = v.root();
    let f = v.create(r, b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, b"still here").unwrap();
    v.pin(f.ino).unwrap();
    v.unlink(r, b"f").unwrap();
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"still here");
    v.write(f.ino, 10, b"!").unwrap();
    v.unpin(f.ino, 1);
    assert!(v.getattr(f.ino).is_err());
    ok(&v);
}

/// setxattr takes the namespaces the kernel's file systems take: user.,
/// trusted., security. (and the system. ACLs); anything else is
/// NotSupported (EOPNOTSUPP), a bare namespace Invalid (EINVAL), and
/// neither changes the file.
#[test]
fn setxattr_refuses_unknown_namespaces() {
    let v = fresh(8 << 20);
    let root = v.root();
    let f = v.create(root, b"f", 0o644, 0, 0).unwrap();
    for name in [&b"user.a"[..], b"trusted.b", b"security.c"] {
        v.setxattr(f.ino, name, b"1", XattrFlags::default())
            .unwrap();
    }
    for name in [
        &b"foo.k"[..],
        b"system.foo",
        b"com.apple.FinderInfo",
        b"user",
    ] {
        assert!(
            matches!(
                v.setxattr(f.ino, name, b"1", XattrFlags::default()),
                Err(FsError::NotSupported(_))
            ),
            "{}",
            String::from_utf8_lossy(name)
        );
    }
    for name in [&b"user."[..], b"trusted.", b"security."] {
        assert!(matches!(
            v.setxattr(f.ino, name, b"1", XattrFlags::default()),
            Err(FsError::Invalid(_))
        ));
    }
    let mut names = v.listxattr(f.ino).unwrap();
    names.sort();
    assert_eq!(
        names,
        vec![
            b"security.c".to_vec(),
            b"trusted.b".to_vec(),
            b"user.a".to_vec()
        ]
    );
    // A restore puts back what an older image held, and it reads back.
    v.restore_xattr(f.ino, b"foo.k", b"old").unwrap();
    assert_eq!(v.getxattr(f.ino, b"foo.k").unwrap(), b"old");
    v.removexattr(f.ino, b"foo.k").unwrap();
}
