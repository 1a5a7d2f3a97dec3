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
//!
//! A fourth mount tiers to Garage (an S3 store) while fsx runs: a high
//! watermark of 1% makes the policy tier fsx's own files out every second,
//! so reads go through the tier and writes land over remote records; the
//! test checks that it did, and fsck checks the store's every record
//! (`--remote --remote-deep`).
//!
//! And six times, the mount daemon is SIGKILLed while fsx works: fsck must
//! find nothing that mounting does not repair, and be clean after.
//! `.ci/run` installs fsx and Garage; under CI their absence is a failure.
//!
//! And fsx's reads through the direct-reading shim: fsx with
//! libpktfs_preload.so preloaded (its writes go to the kernel, its reads
//! come from the image, every one checked by fsx against its own copy).
//!
//! Seeds are fixed so a failure reproduces; `PKTFS_FSX_SEED` adds an offset
//! and `PKTFS_FSX_OPS` sets the operations per fsx (default 30,000).
//! Lives in the pktfs package so cargo builds the binaries it runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pktfs_fs::media::{MapOptions, Pm};
use pktfs_fs::{FormatOptions, Volume};
use pktfs_layout::GeometryParams;
use pktfs_tier::garage::Garage;

use crate::fuse_common;
use crate::fuse_common::{crc, image_path, is_mountpoint};
use crate::prereq;

const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");

fn fsx_bin() -> Option<PathBuf> {
    prereq::cargo_bin("fsx")
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
    config_mapwrite(max_op_bytes, file_bytes, 10)
}

/// [`config`] with `mapread`, `mapwrite` and `invalidate` (which maps the
/// file too) weighing `maps`.
fn config_mapwrite(max_op_bytes: u64, file_bytes: u64, maps: u32) -> String {
    let invalidate = maps.min(1);
    format!(
        "flen = {file_bytes}\n\
         [opsize]\nmax = {max_op_bytes}\nmin = 1\nalign = 1\n\
         [weights]\n\
         close_open = 1\nread = 10\nwrite = 10\nmapread = {maps}\nmapwrite = {maps}\n\
         invalidate = {invalidate}\ntruncate = 3\nfsync = 1\nfdatasync = 1\n\
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
    /// More flags for `pktfs mount` and `fsck.pktfs`, and their
    /// environment (the tier's).
    extra: Vec<String>,
    fsck_extra: Vec<String>,
    env: Vec<(String, String)>,
}

impl Mnt {
    fn new(tag: &str, buffer_size_bytes: u32, opts: &str, work: &Path) -> Mnt {
        Self::with(tag, 512 << 20, buffer_size_bytes, opts, work, |_| ())
    }

    fn with(
        tag: &str,
        image_bytes: u64,
        buffer_size_bytes: u32,
        opts: &str,
        work: &Path,
        set: impl FnOnce(&mut Mnt),
    ) -> Mnt {
        let image = image_path(tag);
        Volume::format(
            &image,
            &FormatOptions {
                params: GeometryParams {
                    buffer_size_bytes,
                    ..GeometryParams::for_size(image_bytes)
                },
                label: None,
            },
            &mut |_, _| {},
        )
        .expect("format");
        let mut m = Mnt {
            image,
            dir: tempfile::Builder::new()
                .prefix("pktfs-fsx-")
                .tempdir()
                .unwrap(),
            opts: opts.to_string(),
            log: work.join(format!("{tag}.mount.log")),
            extra: Vec::new(),
            fsck_extra: Vec::new(),
            env: Vec::new(),
        };
        set(&mut m);
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
        let out = cmd
            .args(&self.extra)
            .envs(self.env.iter().cloned())
            .arg("--log-file")
            .arg(&self.log)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pktfs mount -o {}: {}",
            self.opts,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            is_mountpoint(self.path()),
            "mounted when pktfs mount returns"
        );
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
        let out = Command::new(fsck_bin())
            .args(&self.fsck_extra)
            .arg(&self.image)
            .envs(self.env.iter().cloned())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        let remote_clean = self.fsck_extra.is_empty() || said.contains("remote: clean");
        assert!(
            out.status.success() && said.contains("clean (exit 0)") && remote_clean,
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
                (
                    e.file_name().to_string_lossy().into_owned(),
                    d.len(),
                    crc(&d),
                )
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
fn fsx(
    fsx: &Path,
    cfg: &Path,
    work: &Path,
    file: &Path,
    seed: u64,
    ops: u64,
) -> Result<(), String> {
    fsx_env(fsx, cfg, work, file, (seed, ops), &[])
}

/// [`fsx`] with more environment.
fn fsx_env(
    fsx: &Path,
    cfg: &Path,
    work: &Path,
    file: &Path,
    (seed, ops): (u64, u64),
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<(), String> {
    let out = Command::new(fsx)
        .envs(env.iter().copied())
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

/// What every fsx test needs: fsx, the binaries, a fresh work directory
/// (kept on a failure: fsx's artifacts and the mount logs) with the two
/// configurations in it.
struct Setup {
    fsx: PathBuf,
    ops: u64,
    seed0: u64,
    work: PathBuf,
    small: PathBuf,
    large: PathBuf,
}

fn setup(more: &[prereq::Check]) -> Option<Setup> {
    let mut checks = vec![
        prereq::holds(fsx_bin().is_some(), || {
            "fsx is not installed (cargo install --locked fsx --version 0.3.2)".into()
        }),
        prereq::fuse(),
        prereq::file(
            &fsck_bin(),
            "cargo build -p pktfs-fsck, or cargo test --workspace",
        ),
    ];
    checks.extend(more.iter().cloned());
    if !prereq::met(&checks) {
        return None;
    }
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
    Some(Setup {
        fsx: fsx_bin().unwrap(),
        ops: env_u64("PKTFS_FSX_OPS", 30_000),
        seed0: env_u64("PKTFS_FSX_SEED", 0),
        work,
        small,
        large,
    })
}

impl Setup {
    /// Two fsx at once on `m` (small operations, and a sixth as many large
    /// ones: they take longer each), with seeds `seed` and `seed + 1`; then
    /// unmount, fsck, mount again and compare. `during` runs after fsx, with
    /// the image still mounted.
    fn exercise(&self, m: &Mnt, what: &str, seed: u64, during: impl FnOnce()) {
        let runs = [
            (&self.small, m.path().join("small"), seed, self.ops),
            (
                &self.large,
                m.path().join("large"),
                seed + 1,
                self.ops.div_ceil(6),
            ),
        ];
        let failures: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = runs
                .iter()
                .map(|(cfg, file, seed, n)| {
                    s.spawn(move || fsx(&self.fsx, cfg, &self.work, file, *seed, *n))
                })
                .collect();
            hs.into_iter()
                .filter_map(|h| h.join().unwrap().err())
                .collect()
        });
        assert!(failures.is_empty(), "{what}:\n{}", failures.join("\n\n"));
        during();
        let before = m.contents();
        assert_eq!(before.len(), 2, "the two files fsx made: {before:?}");
        m.umount_and_fsck();
        m.mount();
        assert_eq!(
            m.contents(),
            before,
            "{what}: the files after unmount, fsck and mount"
        );
        eprintln!(
            "fsx on {what}: {} + {} operations (seeds {seed}, {}), fsck clean, same after remount",
            self.ops,
            self.ops.div_ceil(6),
            seed + 1
        );
    }
}

#[test]
fn fsx_on_three_kinds_of_mount() {
    let Some(t) = setup(&[]) else { return };
    let mounts = [
        ("direct", 2048, ""),
        ("paged", 2048, "no_direct_io"),
        ("buf512", 512, "verify=always"),
    ];
    for (i, (tag, buf, opts)) in mounts.into_iter().enumerate() {
        let m = Mnt::new(&format!("fsx-{tag}"), buf, opts, &t.work);
        let what = format!("the {tag} mount (-o {opts:?}, {buf}-byte buffers)");
        t.exercise(&m, &what, t.seed0 + 1 + 2 * i as u64, || ());
    }
    let _ = std::fs::remove_dir_all(&t.work);
}

#[test]
fn fsx_reads_through_the_direct_reading_shim() {
    let Some(t) = setup(&[]) else { return };
    let m = Mnt::new("fsx-shim", 2048, "", &t.work);
    // No mappings: fsx maps its file writable and shared for either kind
    // of mapped operation, and the shim then hands that file to the kernel
    // for good (its stores reach the image only when written back); this
    // test is about the shim's own reads, between fsx's writes, truncates,
    // hole punches, copies and sends through the kernel.
    let cfg = t.work.join("shim.toml");
    std::fs::write(&cfg, config_mapwrite(64 << 10, 1 << 20, 0)).unwrap();
    let stats = t.work.join("shim-stats");
    let so = shim();
    let env: [(&str, &std::ffi::OsStr); 2] = [
        ("LD_PRELOAD", so.as_os_str()),
        ("PKTFS_PRELOAD_STATS", stats.as_os_str()),
    ];
    let file = m.path().join("shimmed");
    if let Err(e) = fsx_env(&t.fsx, &cfg, &t.work, &file, (t.seed0 + 77, t.ops), &env) {
        panic!("fsx under the shim: {e}");
    }
    let said = std::fs::read_to_string(&stats).unwrap_or_default();
    let reads: u64 = said
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("a stats line")["direct_reads"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(reads > 1000, "fsx's reads were not served directly: {said}");
    m.umount_and_fsck();
    let _ = std::fs::remove_dir_all(&t.work);
}

/// libpktfs_preload.so as cargo built it for these tests.
fn shim() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    [deps, deps.parent().expect("target/<profile>")]
        .iter()
        .map(|d| d.join("libpktfs_preload.so"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libpktfs_preload.so is not next to {}", exe.display()))
}

/// `pktfs stat IMAGE` (asking the mount's daemon): the value of `name` on
/// its `tier` lines.
fn tier_stat(image: &Path, name: &str) -> u64 {
    let out = Command::new(PKTFS).arg("stat").arg(image).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "pktfs stat: {said}");
    said.lines()
        .filter_map(|l| l.strip_prefix("tier"))
        .filter_map(|l| l.trim().strip_prefix(name)?.strip_prefix(": "))
        .find_map(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `tier {name}` line from pktfs stat:\n{said}"))
}

#[test]
fn fsx_on_a_mount_that_tiers_out_as_it_writes() {
    let have_garage = prereq::holds(Garage::binary().is_some(), || {
        "`garage` is not installed (cargo install --locked garage; .ci/run does)".into()
    });
    let Some(t) = setup(&[have_garage]) else {
        return;
    };
    let g = Garage::start(1).unwrap();
    let target = g.target("fsx").to_string();
    let m = Mnt::with("fsx-tier", 64 << 20, 2048, "", &t.work, |m| {
        // The detached daemon (no -f), as a user mounts: it once lost
        // --tier on the way. A high watermark of 1% of 64 MiB is below what
        // fsx keeps, so every pass (each second) tiers its least recently
        // used file out, down to nothing in PM.
        m.extra = [
            "--tier",
            &target,
            "--tier-high",
            "1%",
            "--tier-low",
            "0%",
            "--tier-interval",
            "1s",
        ]
        .map(String::from)
        .to_vec();
        m.fsck_extra = ["--remote", &target, "--remote-deep"]
            .map(String::from)
            .to_vec();
        m.env = g.env();
    });
    t.exercise(&m, "a mount tiering to Garage", t.seed0 + 7, || {
        let files = tier_stat(&m.image, "tier_files");
        let fetches = tier_stat(&m.image, "tier_fetches");
        assert!(
            files > 0 && fetches > 0,
            "the tier took part: {files} tier-outs, {fetches} fetches"
        );
        eprintln!("tiering during fsx: {files} tier-outs, {fetches} fetches");
    });
    let _ = std::fs::remove_dir_all(&t.work);
}

/// The image as fsck sees it (the library, read-only, without the lock).
fn fsck_report(image: &Path) -> pktfs_fsck::Report {
    let mut pm = Pm::open(
        image,
        &MapOptions {
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .unwrap();
    pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check())
}

/// SIGKILL the mount daemon while two fsx work on the mount (mmap writes,
/// fallocate, hole punches, copy_file_range, truncates: more kinds of
/// change than `crash_kill`'s writes), at a seeded instant 0.3 to 2.3 s
/// after they started. Then fsck must find nothing that mounting does not
/// repair; the image must mount again (recovery), both files must read
/// through the mount, and fsck after the unmount must call it clean.
/// fsx cannot say what a file should hold after a crash; that every
/// acknowledged write survives is `crash_kill`'s part.
#[test]
fn sigkill_the_mount_daemon_during_fsx() {
    let Some(t) = setup(&[]) else { return };
    let mut rng = t.seed0 ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..6u64 {
        let image = image_path(&format!("fsx-kill{round}"));
        fuse_common::format(&image, 64 << 20);
        let mp = tempfile::Builder::new()
            .prefix("pktfs-fsx-kill-")
            .tempdir()
            .unwrap();
        let mut daemon = Command::new(PKTFS)
            .args(["mount", "-f"])
            .arg(&image)
            .arg(mp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while !is_mountpoint(mp.path()) {
            assert!(daemon.try_wait().unwrap().is_none(), "mount -f ended");
            assert!(t0.elapsed() < Duration::from_secs(20), "never mounted");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Until killed: far more operations than the time allows.
        let mut fsxs: Vec<Child> = [(&t.small, "small"), (&t.large, "large")]
            .into_iter()
            .enumerate()
            .map(|(k, (cfg, name))| {
                let log =
                    std::fs::File::create(t.work.join(format!("kill{round}-{name}.log"))).unwrap();
                Command::new(&t.fsx)
                    .arg("-f")
                    .arg(cfg)
                    .args(["-N", "100000000", "-S"])
                    .arg((t.seed0 + 100 + 2 * round + k as u64).to_string())
                    .arg("-P")
                    .arg(&t.work)
                    .arg(mp.path().join(name))
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .unwrap()
            })
            .collect();
        let delay_ms = 300 + next() % 2000;
        std::thread::sleep(Duration::from_millis(delay_ms));
        for f in &mut fsxs {
            assert!(
                f.try_wait().unwrap().is_none(),
                "round {round}: an fsx ended before the kill (its log is in {})",
                t.work.display()
            );
        }
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        // fsx sees the mount fail (EIO, ENOTCONN, SIGBUS on its mapping).
        for f in &mut fsxs {
            let _ = f.kill();
            let _ = f.wait();
        }
        let st = Command::new("umount")
            .arg("-l")
            .arg(mp.path())
            .status()
            .unwrap();
        assert!(st.success() && !is_mountpoint(mp.path()), "umount -l");
        let before = fsck_report(&image);
        assert!(
            before.errors_beyond_recovery().is_empty(),
            "round {round} (killed after {delay_ms} ms): fsck before recovery:\n{}",
            before.to_text()
        );
        // Recovery is the next mount.
        let out = Command::new(PKTFS)
            .arg("mount")
            .arg(&image)
            .arg(mp.path())
            .arg("--log-file")
            .arg(t.work.join(format!("kill{round}.mount.log")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "round {round}: mount after the kill: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut sizes = Vec::new();
        for name in ["small", "large"] {
            match std::fs::read(mp.path().join(name)) {
                Ok(d) => sizes.push(d.len()),
                // The kill may come before fsx created it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => sizes.push(0),
                Err(e) => panic!("round {round}: reading {name} after recovery: {e}"),
            }
        }
        let st = Command::new("umount").arg(mp.path()).status().unwrap();
        assert!(st.success(), "umount");
        let after = fsck_report(&image);
        assert!(
            after.clean(),
            "round {round}: fsck after recovery:\n{}",
            after.to_text()
        );
        let _ = std::fs::remove_file(&image);
        eprintln!(
            "round {round}: killed the daemon {delay_ms} ms into fsx; fsck clean after recovery; files of {sizes:?} bytes read"
        );
    }
    let _ = std::fs::remove_dir_all(&t.work);
}
