//! Direct reading through the holder: zero-copy lends held by the holder
//! (or under the image's shared lock when none runs), and the ranges a
//! reader cannot serve from the mapping (the tier) fetched by it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pktfs_direct::{Error, Image, Seg};
use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_netpath::control::Control;
use pktfs_tests::model::tier;

fn image(tag: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("pktfs-direct-{tag}-"))
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let path = dir.path().join("img");
    let params = pktfs_layout::GeometryParams::for_size(64 << 20);
    Volume::format(
        &path,
        &FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    (dir, path)
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A holder: the Volume and its control socket.
fn hold(path: &Path) -> (Arc<Volume>, Control) {
    let vol = Arc::new(Volume::open(path, &OpenOptions::default()).unwrap());
    let ctl = Control::start(vol.clone(), path).unwrap();
    (vol, ctl)
}

/// The pieces as one byte string.
fn flat(segs: &[Seg<'_>]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in segs {
        match *s {
            Seg::Data(d) => v.extend_from_slice(d),
            Seg::Zero(n) => v.extend(std::iter::repeat_n(0u8, n)),
        }
    }
    v
}

#[test]
fn a_lend_under_the_holder_keeps_its_bytes_while_the_file_is_rewritten() {
    let (_d, path) = image("lend");
    let (vol, _ctl) = hold(&path);
    let ino = vol.create(vol.root(), b"f", 0o644, 0, 0).unwrap().ino;
    let old = pattern(1, 600_000);
    vol.write(ino, 0, &old).unwrap();
    let img = Image::open(&path).unwrap();
    let f = img.open_file("/f").unwrap();
    let new = pattern(2, 600_000);
    let seen = f
        .read_with(1000, 500_000, |segs| {
            let before = flat(segs);
            // The holder rewrites the whole file and frees the old space
            // while the slices are lent: they must not change.
            vol.write(ino, 0, &new).unwrap();
            let filler = vol.create(vol.root(), b"filler", 0o644, 0, 0).unwrap().ino;
            vol.write(filler, 0, &pattern(9, 2 << 20)).unwrap();
            assert_eq!(flat(segs), before, "lent bytes changed under the lend");
            before
        })
        .unwrap();
    assert_eq!(seen, old[1000..501_000].to_vec());
    // The hold is gone with the closure: the file reads new, and no buffer
    // reference is left behind once the holder has seen the connection end.
    let mut b = vec![0u8; 10];
    f.read_at(&mut b, 1000).unwrap();
    assert_eq!(b, new[1000..1010].to_vec());
    let t0 = std::time::Instant::now();
    while vol.stray_buffer_refs() != 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "the hold's references outlived its connection: {}",
            vol.stray_buffer_refs()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_lend_without_a_holder_takes_the_shared_lock() {
    let (_d, path) = image("nolock");
    {
        let vol = Volume::open(&path, &OpenOptions::default()).unwrap();
        let ino = vol.create(vol.root(), b"f", 0o644, 0, 0).unwrap().ino;
        vol.write(ino, 0, &pattern(3, 100_000)).unwrap();
        vol.write(ino, 300_000, b"after a hole").unwrap();
        vol.close().unwrap();
    }
    let img = Image::open(&path).unwrap();
    let f = img.open_file("/f").unwrap();
    let got = f
        .read_with(90_000, 300_000, |segs| {
            assert!(segs.iter().any(|s| matches!(s, Seg::Zero(_))), "the hole");
            // No holder can start while the bytes are lent.
            let e = Volume::open(&path, &OpenOptions::default()).unwrap_err();
            assert!(
                e.to_string().contains("in use") || e.to_string().contains("lock"),
                "{e}"
            );
            flat(segs)
        })
        .unwrap();
    let mut want = pattern(3, 100_000)[90_000..].to_vec();
    want.resize(300_000 - 90_000, 0);
    want.extend_from_slice(b"after a hole");
    assert_eq!(got, want[..want.len().min(300_000)].to_vec());
    // And after it, one can.
    Volume::open(&path, &OpenOptions::default()).unwrap();
    assert!(matches!(
        f.read_with(0, pktfs_direct::MAX_HOLD_BYTES + 1, |_| ()),
        Err(Error::TooLong { .. })
    ));
}

#[test]
fn tiered_ranges_come_through_the_holder_or_fail_clearly() {
    let (_d, path) = image("tier");
    let data = pattern(4, 700_000);
    {
        let (vol, _ctl) = hold(&path);
        let ino = vol.create(vol.root(), b"cold", 0o644, 0, 0).unwrap().ino;
        vol.write(ino, 0, &data).unwrap();
        assert!(tier::tier_out(&vol, ino).unwrap() > 0);
        let img = Image::open(&path).unwrap();
        let f = img.open_file("/cold").unwrap();
        let mut b = vec![0u8; 300_000];
        assert_eq!(f.read_at(&mut b, 200_000).unwrap(), 300_000);
        assert_eq!(b, data[200_000..500_000].to_vec());
        let lent = f.read_with(650_000, 100_000, flat).unwrap();
        assert_eq!(lent, data[650_000..].to_vec());
    }
    // Nobody holds it now: nothing can fetch the tier's bytes.
    let img = Image::open(&path).unwrap();
    let f = img.open_file("/cold").unwrap();
    let mut b = vec![0u8; 10];
    let e = f.read_at(&mut b, 0).unwrap_err();
    assert!(matches!(e, Error::Remote { .. }), "{e}");
    assert_eq!(e.errno(), libc::EREMOTE);
}
