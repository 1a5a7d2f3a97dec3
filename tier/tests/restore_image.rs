//! `restore_image` (what `pktfs restore` runs) against an image file that
//! already holds data: a restore that fails part way, or meets an image in
//! use, leaves that image as it was; one that succeeds replaces it whole.

use std::path::{Path, PathBuf};

use pktfs_fs::{OpenOptions, Volume};
use pktfs_layout::GeometryParams;
use pktfs_tier::restore::{restore_image, RestoreOptions};
use pktfs_tier::snapshot::capture;

/// A directory of its own under the temp dir, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("pktfs-restore-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An image at `path` holding `/keep` with `body`.
fn old_image(path: &Path, body: &[u8]) {
    Volume::format(
        path,
        &pktfs_fs::FormatOptions {
            params: GeometryParams::for_size(8 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = Volume::open(path, &OpenOptions::default()).unwrap();
    let f = v.create(v.root(), b"keep", 0o644, 0, 0).unwrap().ino;
    v.write(f, 0, body).unwrap();
    v.close().unwrap();
}

fn read_keep(path: &Path) -> Vec<u8> {
    let v = Volume::open(path, &OpenOptions::default()).unwrap();
    let ino = v.lookup(v.root(), b"keep").unwrap().ino;
    let size = v.getattr(ino).unwrap().size;
    let out = v.read(ino, 0, size).unwrap();
    v.close().unwrap();
    out
}

/// A snapshot of a tree of `files` empty files (restorable from the
/// snapshot alone: no bytes in PM).
fn snapshot_of(files: usize) -> Vec<u8> {
    let v = Volume::in_memory(GeometryParams::for_size(64 << 20)).unwrap();
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
    for k in 0..files {
        v.create(d, format!("f{k}").as_bytes(), 0o644, 0, 0)
            .unwrap();
    }
    capture(&v, 1).unwrap().bytes
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pktfs-restore"))
        .collect()
}

#[test]
fn a_failed_restore_leaves_the_old_image_as_it_was() {
    let dir = Dir::new("fail");
    let img = dir.0.join("img");
    let body: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    old_image(&img, &body);
    let force = RestoreOptions { force: true };
    // 300 names do not fit a 2 MiB image (128 inodes): the restore fails
    // part way, after formatting and filling its image.
    let snap = snapshot_of(300);
    let e = restore_image(&img, Some(2 << 20), &snap, &force).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("is as it was"), "{msg}");
    assert_eq!(read_keep(&img), body);
    assert_eq!(leftovers(&dir.0), Vec::<String>::new());
    // Without --force nothing is tried.
    let e = restore_image(&img, None, &snap, &RestoreOptions { force: false }).unwrap_err();
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(read_keep(&img), body);
}

#[test]
fn an_image_in_use_is_refused_and_a_good_restore_replaces_it() {
    let dir = Dir::new("use");
    let img = dir.0.join("img");
    old_image(&img, b"old data");
    let snap = snapshot_of(20);
    let force = RestoreOptions { force: true };
    {
        // A mount or server holds it.
        let _held = Volume::open(&img, &OpenOptions::default()).unwrap();
        let e = restore_image(&img, None, &snap, &force).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
        assert_eq!(leftovers(&dir.0), Vec::<String>::new());
    }
    assert_eq!(read_keep(&img), b"old data");
    // Through a symlink: the file it names is replaced, the link stays.
    let link = dir.0.join("link");
    std::os::unix::fs::symlink(&img, &link).unwrap();
    let rep = restore_image(&link, None, &snap, &force).unwrap();
    assert_eq!(rep.snapshot, 1);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let v = Volume::open(&img, &OpenOptions::default()).unwrap();
    assert!(v.lookup(v.root(), b"keep").is_err());
    let d = v.lookup(v.root(), b"d").unwrap().ino;
    assert_eq!(v.list_dir(d).unwrap().len(), 20);
    v.close().unwrap();
    assert_eq!(leftovers(&dir.0), Vec::<String>::new());
}

#[test]
fn a_directory_is_not_an_image() {
    let dir = Dir::new("dir");
    let e = restore_image(
        &dir.0,
        None,
        &snapshot_of(1),
        &RestoreOptions { force: true },
    )
    .unwrap_err();
    assert!(e.to_string().contains("is a directory"), "{e}");
}
