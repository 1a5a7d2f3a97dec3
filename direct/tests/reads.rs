//! Reads through the direct library against a Volume holding the image:
//! contents, holes, names, attributes, changes made by the holder, damage.

use pktfs_direct::{Error, Image, OpenOptions, VerifyMode};
use pktfs_fs::{SetAttr, VerifyMode as HolderVerify};

use crate::common::{held, pattern};

#[test]
fn contents_match_the_holders_at_every_offset_and_length() {
    let h = held(64 << 20);
    let v = &h.vol;
    let root = v.root();
    let sizes = [0usize, 1, 100, 4095, 4096, 300_000, 1 << 20];
    let mut files = Vec::new();
    for (k, &n) in sizes.iter().enumerate() {
        let name = format!("f{k}");
        let ino = v.create(root, name.as_bytes(), 0o640, 0, 0).unwrap().ino;
        let data = pattern(k as u64, n);
        // Written in pieces of assorted sizes, so the chain has many records.
        let mut at = 0;
        for (i, chunk) in data.chunks(70_001).enumerate() {
            v.write(ino, at, chunk).unwrap();
            at += chunk.len() as u64;
            let _ = i;
        }
        files.push((name, data));
    }
    let img = Image::open(&h.path).unwrap();
    for (name, data) in &files {
        let f = img.open_file(name).unwrap();
        assert_eq!(f.len().unwrap(), data.len() as u64);
        for off in [0usize, 1, 4095, 4096, 65_536, 131_071, 299_999, 1 << 20] {
            for len in [0usize, 1, 17, 4096, 100_000, 2 << 20] {
                let mut buf = vec![0xAAu8; len];
                let n = f.read_at(&mut buf, off as u64).unwrap();
                let want = &data[off.min(data.len())..(off + len).min(data.len())];
                assert_eq!(n, want.len(), "{name} at {off}+{len}");
                assert_eq!(&buf[..n], want, "{name} at {off}+{len}");
            }
        }
    }
}

#[test]
fn holes_read_as_zeros_and_the_end_is_the_size() {
    let h = held(16 << 20);
    let v = &h.vol;
    let ino = v.create(v.root(), b"sparse", 0o644, 0, 0).unwrap().ino;
    v.write(ino, 10_000, b"middle").unwrap();
    let grow = SetAttr {
        size: Some(50_000),
        ..Default::default()
    };
    v.setattr(ino, &grow).unwrap();
    let img = Image::open(&h.path).unwrap();
    let f = img.open_file("/sparse").unwrap();
    let mut buf = vec![0xFFu8; 60_000];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 50_000);
    assert!(buf[..10_000].iter().all(|&b| b == 0));
    assert_eq!(&buf[10_000..10_006], b"middle");
    assert!(buf[10_006..50_000].iter().all(|&b| b == 0));
    assert_eq!(f.read_at(&mut buf, 50_000).unwrap(), 0);
    let e = f.read_exact_at(&mut buf[..10], 49_995).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn names_symlinks_and_listings() {
    let h = held(16 << 20);
    let v = &h.vol;
    let a = v.mkdir(v.root(), b"a", 0o755, 0, 0).unwrap().ino;
    let b = v.mkdir(a, b"b", 0o700, 5, 6).unwrap().ino;
    let f = v.create(b, b"file", 0o600, 5, 6).unwrap().ino;
    v.write(f, 0, b"deep").unwrap();
    v.symlink(a, b"rel", b"b/file", 0, 0).unwrap();
    v.symlink(a, b"up", b"../a/./b", 0, 0).unwrap();
    v.symlink(v.root(), b"abs", b"/etc/passwd", 0, 0).unwrap();
    v.symlink(v.root(), b"loop", b"loop", 0, 0).unwrap();
    let img = Image::open(&h.path).unwrap();
    let read = |p: &str| {
        let f = img.open_file(p).unwrap();
        let mut b = vec![0u8; 16];
        let n = f.read_at(&mut b, 0).unwrap();
        b.truncate(n);
        b
    };
    assert_eq!(read("/a/b/file"), b"deep");
    assert_eq!(read("a//b/./file"), b"deep");
    assert_eq!(read("/a/rel"), b"deep");
    assert_eq!(read("/a/up/file"), b"deep");
    assert_eq!(read("/a/b/../b/file"), b"deep");
    assert_eq!(img.lookup("/a/b/file").unwrap(), f);
    assert_eq!(img.lookup("/").unwrap(), v.root());
    assert_eq!(img.lookup("/..").unwrap(), v.root());
    assert_eq!(img.read_link("/a/rel").unwrap(), b"b/file");
    assert_eq!(
        img.lstat_path("/a/rel").unwrap().kind,
        pktfs_direct::FileType::Symlink
    );
    let errno = |e: Error| e.errno();
    assert_eq!(errno(img.open_file("/nope").unwrap_err()), libc::ENOENT);
    assert_eq!(
        errno(img.open_file("/a/b/file/x").unwrap_err()),
        libc::ENOTDIR
    );
    assert_eq!(errno(img.open_file("/a").unwrap_err()), libc::EISDIR);
    assert_eq!(errno(img.open_file("/abs").unwrap_err()), libc::EXDEV);
    assert_eq!(errno(img.open_file("/loop").unwrap_err()), libc::ELOOP);
    let mut names: Vec<Vec<u8>> = img
        .read_dir("/a")
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, vec![b"b".to_vec(), b"rel".to_vec(), b"up".to_vec()]);
    let mut holder = Vec::new();
    v.readdir(a, 0, |e| {
        holder.push((e.name.to_vec(), e.ino));
        true
    })
    .unwrap();
    let mut ours: Vec<(Vec<u8>, u64)> = img
        .read_dir("/a")
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.ino))
        .collect();
    holder.sort();
    ours.sort();
    assert_eq!(ours, holder);
}

#[test]
fn attributes_are_the_mounts() {
    let h = held(16 << 20);
    let v = &h.vol;
    let d = v.mkdir(v.root(), b"d", 0o751, 7, 8).unwrap().ino;
    let f = v.create(d, b"f", 0o4640, 7, 8).unwrap().ino;
    v.write(f, 0, &pattern(1, 123_456)).unwrap();
    let s = v.symlink(d, b"s", b"f", 7, 8).unwrap().ino;
    let img = Image::open(&h.path).unwrap();
    for (ino, path) in [(d, "/d"), (f, "/d/f"), (s, "/d/s"), (v.root(), "/")] {
        let a = v.getattr(ino).unwrap();
        let st = img.stat(ino).unwrap();
        assert_eq!(st.ino, a.ino, "{path}");
        assert_eq!(st.kind, a.kind, "{path}");
        assert_eq!(st.perm, a.perm, "{path}");
        assert_eq!(
            (st.uid, st.gid, st.nlink),
            (a.uid, a.gid, a.nlink),
            "{path}"
        );
        assert_eq!(st.size, a.size, "{path}");
        assert_eq!(st.blocks, a.blocks, "{path}");
        assert_eq!(st.blksize, a.blksize, "{path}");
        assert_eq!(
            (st.atime_ns, st.mtime_ns, st.ctime_ns),
            (a.atime_ns, a.mtime_ns, a.ctime_ns),
            "{path}"
        );
        assert_eq!(st.rdev, a.rdev, "{path}");
    }
    assert_eq!(img.stat_path("/d/s").unwrap().ino, f);
}

#[test]
fn an_open_handle_follows_the_holders_changes() {
    let h = held(16 << 20);
    let v = &h.vol;
    let ino = v.create(v.root(), b"f", 0o644, 0, 0).unwrap().ino;
    v.write(ino, 0, &pattern(1, 200_000)).unwrap();
    let img = Image::open(&h.path).unwrap();
    let f = img.open_file("/f").unwrap();
    let all = |f: &pktfs_direct::File| {
        let mut b = vec![0u8; 1 << 20];
        let n = f.read_at(&mut b, 0).unwrap();
        b.truncate(n);
        b
    };
    assert_eq!(all(&f), pattern(1, 200_000));
    // Overwrite in the middle (copy-on-write: a split record).
    v.write(ino, 50_000, &pattern(2, 10_000)).unwrap();
    let mut want = pattern(1, 200_000);
    want[50_000..60_000].copy_from_slice(&pattern(2, 10_000));
    assert_eq!(all(&f), want);
    // Append, then truncate.
    v.write(ino, 200_000, b"tail").unwrap();
    want.extend_from_slice(b"tail");
    assert_eq!(all(&f), want);
    v.setattr(
        ino,
        &SetAttr {
            size: Some(1000),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(all(&f), want[..1000].to_vec());
    // Renamed: the handle is the file, not the name.
    v.rename(v.root(), b"f", v.root(), b"g", Default::default())
        .unwrap();
    assert_eq!(all(&f), want[..1000].to_vec());
    // Deleted: nothing keeps a library handle's file alive.
    v.unlink(v.root(), b"g").unwrap();
    let mut b = [0u8; 10];
    assert!(matches!(f.read_at(&mut b, 0), Err(Error::Stale(_))));
    // The number reused by another file is not the handle's file.
    let other = v.create(v.root(), b"other", 0o644, 0, 0).unwrap().ino;
    v.write(other, 0, b"someone else").unwrap();
    assert!(matches!(f.read_at(&mut b, 0), Err(Error::Stale(_))));
    assert_eq!(img.open_file("/g").unwrap_err().errno(), libc::ENOENT);
}

#[test]
fn damage_is_an_error_never_data() {
    let mut h = held(16 << 20);
    let ino = h.vol.create(h.vol.root(), b"f", 0o644, 0, 0).unwrap().ino;
    let data = pattern(3, 8192);
    h.vol.write(ino, 0, &data).unwrap();
    let chain = h.vol.chain(ino).unwrap();
    let g = *h.vol.geometry();
    let pos = g.buffer_pos(chain[0].buffer, chain[0].buf_off).0 + 100;
    let mut byte = [0u8];
    h.vol.pm_exclusive().read(pos, &mut byte);
    h.vol.pm_exclusive().write(pos, &[byte[0] ^ 0x40]);
    let img = Image::open(&h.path).unwrap();
    let f = img.open_file("/f").unwrap();
    let mut buf = vec![0u8; 10];
    // Bytes far from the flipped one are in the same record: it fails whole.
    let e = f.read_at(&mut buf, 8000).unwrap_err();
    assert!(matches!(e, Error::Damaged { .. }), "{e}");
    assert_eq!(e.errno(), libc::EIO);
    // Off: the bytes as they are (the program asked for that).
    let off = Image::open_with(
        &h.path,
        &OpenOptions {
            verify: Some(VerifyMode::Off),
        },
    )
    .unwrap();
    let f = off.open_file("/f").unwrap();
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 10);
    assert_eq!(&buf[..], &data[..10]);
}

#[test]
fn the_holders_verify_mode_is_followed() {
    let h = held(16 << 20);
    let img = Image::open(&h.path).unwrap();
    assert_eq!(img.verify_mode(), VerifyMode::Once);
    h.vol.set_verify_mode(HolderVerify::Always);
    assert_eq!(img.verify_mode(), VerifyMode::Always);
    h.vol.set_verify_mode(HolderVerify::Off);
    assert_eq!(img.verify_mode(), VerifyMode::Off);
    let chosen = Image::open_with(
        &h.path,
        &OpenOptions {
            verify: Some(VerifyMode::Always),
        },
    )
    .unwrap();
    assert_eq!(chosen.verify_mode(), VerifyMode::Always);
}

#[test]
fn a_handle_survives_a_holder_restart_and_sees_what_changed_meanwhile() {
    let mut h = held(16 << 20);
    let ino = h.vol.create(h.vol.root(), b"f", 0o644, 0, 0).unwrap().ino;
    h.vol.write(ino, 0, b"first").unwrap();
    h.vol.create(h.vol.root(), b"gone", 0o644, 0, 0).unwrap();
    let img = Image::open(&h.path).unwrap();
    let f = img.open_file("/f").unwrap();
    let gone = img.open_file("/gone").unwrap();
    let mut b = [0u8; 5];
    assert_eq!(f.read_at(&mut b, 0).unwrap(), 5);
    // The holder stops; another starts (a new epoch), and changes things.
    let path = h.path.clone();
    let placeholder =
        pktfs_fs::Volume::in_memory(pktfs_layout::GeometryParams::for_size(1 << 20)).unwrap();
    drop(std::mem::replace(&mut h.vol, placeholder));
    let v2 = pktfs_fs::Volume::open(&path, &Default::default()).unwrap();
    v2.write(ino, 0, b"again").unwrap();
    v2.unlink(v2.root(), b"gone").unwrap();
    assert_eq!(f.read_at(&mut b, 0).unwrap(), 5);
    assert_eq!(&b, b"again");
    assert!(matches!(gone.read_at(&mut b, 0), Err(Error::Stale(_))));
}

#[test]
fn images_without_live_words_are_refused_clearly() {
    let h = held(16 << 20);
    let mut bytes = std::fs::read(&h.path).unwrap();
    // Clear CHANGE_COUNTERS in both superblocks, with their CRCs.
    for off in [0usize, 4096] {
        let mut raw = pktfs_layout::superblock::raw_from_bytes(&bytes[off..off + 256]).unwrap();
        let bit = pktfs_layout::superblock::RoCompatFeatures::CHANGE_COUNTERS.bits();
        raw.ro_compat = (raw.ro_compat.get() & !bit).into();
        pktfs_layout::superblock::seal(&mut raw);
        bytes[off..off + 256].copy_from_slice(pktfs_layout::superblock::raw_bytes(&raw));
    }
    let e = Image::from_bytes(&bytes, &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NoLiveWords { .. }), "{e}");
    let e = Image::from_bytes(&bytes[..100], &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NotAnImage { .. }), "{e}");
}
