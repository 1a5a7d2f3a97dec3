//! fsx, the File System eXerciser (Alan Somers's Rust port of the Apple /
//! FreeBSD tool, `cargo install --locked fsx`), against real mounts made by
//! the `pktfs` binary: long random sequences of pread / pwrite, mmap reads
//! and writes, truncate up and down, posix_fallocate, hole punching,
//! copy_file_range, sendfile, fsync, fdatasync, fadvise and close / reopen,
//! every read checked byte for byte against fsx's own copy of the file.
//!
//! Three mounts, because they reach different code:
//! - the defaults (direct I/O: every read and write is a FUSE request, while
//!   mmap goes through the page cache, so the two must stay coherent);
//! - `no_direct_io` (reads and writes through the kernel's page cache);
//! - an image of 512-byte packet buffers with `verify=always` (records that
//!   span many buffers; every read checks the payload's CRC32C).
//!
//! Two fsx run at once on each mount, on different files and with different
//! operation sizes. Then the image is unmounted, `fsck.pktfs` must call it
//! clean, and after a second mount every file reads as before the unmount.
//! `.ci/run` installs fsx; under CI its absence is a failure.
//!
//! Seeds are fixed so a failure reproduces; `PKTFS_FSX_SEED` adds an offset
//! and `PKTFS_FSX_OPS` sets the operations per fsx (default 30,000).
//! Lives in the pktfs-cli package so cargo builds the binaries it runs.

#[path = "../../tests/tests/fuse_common/mod.rs"]
mod fuse_common;
#[path = "../../tests/tests/prereq/mod.rs"]
mod prereq;

use std::path::{Path, PathBuf};
use std::process::Command;

use fuse_common::{crc, image_path, is_mountpoint};
use layout::GeometryParams;
use pktfs::{FormatOptions, Volume};

const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");

/// fsx on PATH or where `cargo install` puts it.
fn fsx_bin() -> Option<PathBuf> {
    let home = std::env::var("HOME")
        .map(|h| PathBuf::from(h).join(".cargo/bin/fsx"))
        .ok();
    prereq::on_path("fsx").or(home.filter(|p| p.is_file()))
}

/// fsck.pktfs, built beside pktfs by `cargo test --workspace`.
fn fsck_bin() -> PathBuf {
    Path::new(PKTFS).with_file_name("fsck-pktfs")
}

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// An fsx configuration: every operation fsx knows, `max_op_bytes` the
/// largest read or write, `file_bytes` the largest file.
///
/// `opsize.min` is 1, not fsx's 0: fsx 0.3 then calls posix_fallocate with
/// a length of 0, which POSIX and Linux answer EINVAL (before the file
/// system is asked; tmpfs fails the same way), and fsx takes that for
/// "not supported".
fn config(max_op_bytes: u64, file_bytes: u64) -> String {
    format!(
        "flen = {file_bytes}\n\
         [opsize]\nmax = {max_op_bytes}\nmin = 1\nalign = 1\n\
         [weights]\n\
         close_open = 1\nread = 10\nwrite = 10\nmapread = 10\nmapwrite = 10\n\
         invalidate = 1\ntruncate = 3\nfsync = 1\nfdatasync = 1\n\
         posix_fallocate = 2\npunch_hole = 2\nsendfile = 2\nposix_fadvise = 1\n\
         copy_file_range = 3\n"
    )
}

/// A mount made by `pktfs mount` (the detached daemon), unmounted and the
/// image removed on drop.
struct Mnt {
    image: PathBuf,
    dir: tempfile::TempDir,
    opts: String,
    log: PathBuf,
}

impl Mnt {
    fn new(tag: &str, buffer_size_bytes: u32, opts: &str, work: &Path) -> Mnt {
        let image = image_path(tag);
        Volume::format(
            &image,
            &FormatOptions {
                params: GeometryParams {
                    buffer_size_bytes,
                    ..GeometryParams::for_size(512 << 20)
                },
                label: None,
            },
            &mut |_, _| {},
        )
        .expect("format");
        let m = Mnt {
            image,
            dir: tempfile::Builder::new()
                .prefix("pktfs-fsx-")
                .tempdir()
                .unwrap(),
            opts: opts.to_string(),
            log: work.join(format!("{tag}.mount.log")),
        };
        m.mount();
        m
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn mount(&self) {
        let mut cmd = Command::new(PKTFS);
        cmd.arg("mount").arg(&self.image).arg(self.path());
        if !self.opts.is_empty() {
            cmd.args(["-o", &self.opts]);
        }
        let out = cmd.arg("--log-file").arg(&self.log).output().unwrap();
        assert!(
            out.status.success(),
            "pktfs mount -o {}: {}",
            self.opts,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(is_mountpoint(self.path()), "mounted when pktfs mount returns");
    }

    /// `umount` (which returns once the daemon has let go of the image),
    /// then fsck.pktfs must find the image clean.
    fn umount_and_fsck(&self) {
        let out = Command::new("umount").arg(self.path()).output().unwrap();
        assert!(
            out.status.success(),
            "umount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = Command::new(fsck_bin()).arg(&self.image).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("clean (exit 0)"),
            "fsck.pktfs after fsx ({}):\n{said}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every regular file at the top of the mount: name -> (length, checksum).
    fn contents(&self) -> Vec<(String, usize, u32)> {
        let mut v: Vec<(String, usize, u32)> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let d = std::fs::read(e.path()).unwrap();
                (e.file_name().to_string_lossy().into_owned(), d.len(), crc(&d))
            })
            .collect();
        v.sort();
        v
    }
}

impl Drop for Mnt {
    fn drop(&mut self) {
        if is_mountpoint(self.path()) {
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// One fsx run: `ops` operations with `seed` on `file`, configured by
/// `cfg`; artifacts (the good copy and the log fsx writes on a failure)
/// go to `work`. Returns fsx's verdict as a result.
fn fsx(fsx: &Path, cfg: &Path, work: &Path, file: &Path, seed: u64, ops: u64) -> Result<(), String> {
    let out = Command::new(fsx)
        .arg("-f")
        .arg(cfg)
        .arg("-N")
        .arg(ops.to_string())
        .arg("-S")
        .arg(seed.to_string())
        .arg("-P")
        .arg(work)
        .arg(file)
        .output()
        .map_err(|e| format!("running {}: {e}", fsx.display()))?;
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && all.contains("All operations completed A-OK!") {
        return Ok(());
    }
    let tail: Vec<&str> = all.lines().rev().take(60).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "fsx -S {seed} -N {ops} on {} failed ({}); artifacts in {}; its last lines:\n{}",
        file.display(),
        out.status,
        work.display(),
        tail.join("\n")
    ))
}

#[test]
fn fsx_on_three_kinds_of_mount() {
    let fsck = fsck_bin();
    require!(
        prereq::holds(fsx_bin().is_some(), || {
            "fsx is not installed (cargo install --locked fsx --version 0.3.2)".into()
        }),
        prereq::fuse(),
        prereq::file(&fsck, "cargo build -p pktfs-fsck, or cargo test --workspace"),
    );
    let fsx_path = fsx_bin().unwrap();
    let ops = env_u64("PKTFS_FSX_OPS", 30_000);
    let seed0 = env_u64("PKTFS_FSX_SEED", 0);
    // Kept on a failure (see the message): fsx's artifacts and the logs.
    let work = tempfile::Builder::new()
        .prefix("pktfs-fsx-work-")
        .tempdir()
        .unwrap()
        .keep();
    // Small operations on a 256 KiB file (many records per file, much
    // splitting and merging), and large ones on a 4 MiB file.
    let small = work.join("small.toml");
    std::fs::write(&small, config(8 << 10, 256 << 10)).unwrap();
    let large = work.join("large.toml");
    std::fs::write(&large, config(256 << 10, 4 << 20)).unwrap();

    let mounts = [
        ("direct", 2048, ""),
        ("paged", 2048, "no_direct_io"),
        ("buf512", 512, "verify=always"),
    ];
    for (i, (tag, buf, opts)) in mounts.into_iter().enumerate() {
        let m = Mnt::new(&format!("fsx-{tag}"), buf, opts, &work);
        let seed = seed0 + 1 + 2 * i as u64;
        let runs = [
            (small.clone(), m.path().join("small"), seed, ops),
            // Large operations take longer each: a sixth as many.
            (large.clone(), m.path().join("large"), seed + 1, ops.div_ceil(6)),
        ];
        let failures: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = runs
                .iter()
                .map(|(cfg, file, seed, n)| {
                    let (fsx_path, work) = (&fsx_path, &work);
                    s.spawn(move || fsx(fsx_path, cfg, work, file, *seed, *n))
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().unwrap().err())
                .collect()
        });
        assert!(
            failures.is_empty(),
            "mount {tag} (-o {opts:?}, {buf}-byte buffers):\n{}",
            failures.join("\n\n")
        );
        let before = m.contents();
        assert_eq!(before.len(), 2, "the two files fsx made: {before:?}");
        m.umount_and_fsck();
        m.mount();
        assert_eq!(
            m.contents(),
            before,
            "mount {tag}: the files after unmount, fsck and mount"
        );
        eprintln!(
            "fsx on the {tag} mount: {ops} + {} operations (seeds {seed}, {}), fsck clean, same after remount",
            ops.div_ceil(6),
            seed + 1
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}
