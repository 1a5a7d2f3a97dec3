//! Shared helpers of the integration tests that mount through FUSE: a
//! fresh image on /dev/shm mounted in a temporary directory, served by the
//! test process (the library's background session), unmounted on drop.
//! Tests using it first `require!(prereq::fuse())`. Feature `fuse`.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_fuse::{MountHandle, MountOptions};

pub fn image_path(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("pktfs-fuse-{tag}-{}-{n}.img", std::process::id()))
}

pub fn format(path: &Path, size: u64) {
    Volume::format(
        path,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(size),
            label: None,
        },
        &mut |_, _| {},
    )
    .expect("format");
}

/// A mounted image.
#[derive(Debug)]
pub struct Mounted {
    pub image: PathBuf,
    pub opts: MountOptions,
    handle: Option<MountHandle>,
    vol: Option<Arc<Volume>>,
    dir: Option<tempfile::TempDir>,
}

impl Mounted {
    pub fn new(tag: &str, size: u64) -> Mounted {
        Self::with_options(tag, size, MountOptions::default())
    }

    pub fn with_options(tag: &str, size: u64, opts: MountOptions) -> Mounted {
        let image = image_path(tag);
        format(&image, size);
        let dir = tempfile::Builder::new()
            .prefix("pktfs-mnt-")
            .tempdir()
            .expect("tempdir");
        let mut m = Mounted {
            image,
            opts,
            handle: None,
            vol: None,
            dir: Some(dir),
        };
        m.mount();
        m
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().expect("mountpoint").path()
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }

    pub fn vol(&self) -> &Arc<Volume> {
        self.vol.as_ref().expect("mounted")
    }

    pub fn mount(&mut self) {
        let vol = Arc::new(Volume::open(&self.image, &OpenOptions::default()).expect("open image"));
        let h = pktfs_fuse::mount(vol.clone(), self.path(), &self.opts).expect("mount");
        assert!(
            is_mountpoint(self.path()),
            "mount is live when mount() returns"
        );
        self.vol = Some(vol);
        self.handle = Some(h);
    }

    /// Unmount, wait for the session to end, close the Volume (clean).
    pub fn unmount(&mut self) {
        if let Some(h) = self.handle.take() {
            h.unmount().expect("unmount");
            h.join().expect("session ends cleanly");
        }
        if let Some(v) = self.vol.take() {
            let v = Arc::try_unwrap(v).expect("the session dropped its Volume reference");
            v.close().expect("close");
        }
    }

    pub fn remount(&mut self) {
        self.unmount();
        self.mount();
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.unmount();
            let _ = h.join();
        }
        self.vol.take();
        let _ = std::fs::remove_file(&self.image);
        // The TempDir is removed after the unmount above.
    }
}

pub fn is_mountpoint(p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.split(' ').nth(4) == Some(p.to_str().unwrap_or("")))
        })
        .unwrap_or(false)
}

/// errno of an io::Error.
pub fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

/// Assert an io result failed with `want`.
#[track_caller]
pub fn expect_errno<T: std::fmt::Debug>(r: std::io::Result<T>, want: i32) {
    match r {
        Ok(v) => panic!("expected errno {want}, got Ok({v:?})"),
        Err(e) => assert_eq!(errno(&e), want, "expected errno {want}, got {e}"),
    }
}

#[track_caller]
pub fn expect_rerrno<T: std::fmt::Debug>(r: rustix::io::Result<T>, want: i32) {
    match r {
        Ok(v) => panic!("expected errno {want}, got Ok({v:?})"),
        Err(e) => assert_eq!(e.raw_os_error(), want, "expected errno {want}, got {e}"),
    }
}

/// What a tree looks like: path -> (kind, mode, uid, gid, size, nlink,
/// mtime, content or symlink target, xattrs).
pub type Tree = BTreeMap<String, String>;

pub fn snapshot(root: &Path) -> Tree {
    let mut t = Tree::new();
    walk(root, root, &mut t);
    t
}

fn walk(root: &Path, dir: &Path, t: &mut Tree) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    for p in names {
        let m = std::fs::symlink_metadata(&p).expect("lstat");
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .into_owned();
        let ft = m.file_type();
        let body = if ft.is_file() {
            let d = std::fs::read(&p).expect("read");
            format!("file crc={:08x}", crc(&d))
        } else if ft.is_symlink() {
            format!(
                "link -> {}",
                std::fs::read_link(&p).expect("readlink").display()
            )
        } else if ft.is_dir() {
            "dir".into()
        } else if ft.is_fifo() {
            "fifo".into()
        } else if ft.is_char_device() || ft.is_block_device() {
            format!("dev {:x}", m.rdev())
        } else {
            "other".into()
        };
        let mut xs = Vec::new();
        if !ft.is_symlink() {
            if let Ok(list) = listx(&p) {
                for n in list.split(|b| *b == 0).filter(|n| !n.is_empty()) {
                    let v = getx(&p, &String::from_utf8_lossy(n)).unwrap_or_default();
                    xs.push(format!("{}={:08x}", String::from_utf8_lossy(n), crc(&v)));
                }
            }
        }
        t.insert(
            rel,
            format!(
                "{body} mode={:o} uid={} gid={} size={} nlink={} mtime={}.{} xattrs=[{}]",
                m.mode(),
                m.uid(),
                m.gid(),
                if ft.is_dir() { 0 } else { m.size() },
                m.nlink(),
                m.mtime(),
                m.mtime_nsec(),
                xs.join(",")
            ),
        );
        if ft.is_dir() {
            walk(root, &p, t);
        }
    }
}

/// A small checksum (FNV-1a) to compare contents without keeping them.
pub fn crc(d: &[u8]) -> u32 {
    let mut h: u32 = 0x811c9dc5;
    for b in d {
        h ^= *b as u32;
        h = h.wrapping_mul(0x01000193);
    }
    h
}

/// Deterministic bytes.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Resident anonymous memory (heap, stacks): the image mapping, which the
/// Volume pre-faults, is not counted.
pub fn anon_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// getxattr into a fresh vector.
pub fn getx(p: &Path, name: &str) -> rustix::io::Result<Vec<u8>> {
    let mut b = vec![0u8; 65536];
    let n = rustix::fs::getxattr(p, name, &mut b[..])?;
    b.truncate(n);
    Ok(b)
}

/// listxattr into a fresh vector.
pub fn listx(p: &Path) -> rustix::io::Result<Vec<u8>> {
    let mut b = vec![0u8; 65536];
    let n = rustix::fs::listxattr(p, &mut b[..])?;
    b.truncate(n);
    Ok(b)
}
