//! A holder (a Volume on an image file) and readers of the same file.

use std::path::PathBuf;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};

/// An image file formatted in a fresh temporary directory (on /dev/shm
/// when there is one, as pktfs runs on PM), and the Volume holding it.
pub struct Held {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub vol: Volume,
}

pub fn held(size: u64) -> Held {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").expect("a directory on /dev/shm")
    } else {
        tempfile::tempdir().expect("a temporary directory")
    };
    let path = dir.path().join("img");
    let params = pktfs_layout::GeometryParams::for_size(size);
    Volume::format(
        &path,
        &FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .expect("format");
    let vol = Volume::open(&path, &OpenOptions::default()).expect("open");
    Held {
        _dir: dir,
        path,
        vol,
    }
}

/// Deterministic bytes for a file: `n` bytes seeded by `seed`.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
