//! `pktfs mount` and the mount.pktfs helper as a person uses them: the
//! command returns once the mount is live, a second mount of the same image
//! is refused with a clear message, and SIGTERM, SIGINT, `umount` and
//! `fusermount3 -u` all end the daemon with the image marked clean.
//!
//! Lives in the pktfs package so cargo builds the binaries it runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pktfs_fs::{OpenOptions, Volume};

use crate::fuse_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

/// FUSE must be usable (`prereq`); then the binaries of this package,
/// which cargo builds for its tests.
macro_rules! need_bins {
    () => {{
        require!(prereq::fuse());
        (
            PathBuf::from(env!("CARGO_BIN_EXE_pktfs")),
            PathBuf::from(env!("CARGO_BIN_EXE_mount-pktfs")),
        )
    }};
}

struct Setup {
    image: PathBuf,
    mnt: tempfile::TempDir,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let image = image_path(tag);
        format(&image, 32 * MIB);
        Setup {
            image,
            mnt: tempfile::Builder::new().prefix("pktfs-").tempdir().unwrap(),
        }
    }
    fn mp(&self) -> &Path {
        self.mnt.path()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if is_mountpoint(self.mp()) {
            let _ = Command::new("umount").arg("-l").arg(self.mp()).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Pids whose command line has `--daemon-child` and the image path.
fn daemons(image: &Path) -> Vec<i32> {
    let want = image.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "--daemon-child") && args.contains(&want) {
            v.push(pid);
        }
    }
    v
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Open the image; retry briefly while the lock is held: a process that
/// another test thread is starting may still hold a copy of our descriptor
/// between its fork and its exec.
fn open_image(image: &Path) -> Volume {
    let t = Instant::now();
    loop {
        match Volume::open(image, &OpenOptions::default()) {
            Ok(v) => return v,
            Err(pktfs_fs::FsError::Media(pktfs_fs::media::MediaError::Locked { .. }))
                if t.elapsed() < Duration::from_secs(5) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the image opens after the daemon exits: {e}"),
        }
    }
}

fn image_is_clean(image: &Path) -> bool {
    let v = open_image(image);
    let clean = v.open_report().was_clean;
    v.close().unwrap();
    clean
}

fn signal(pid: i32, sig: rustix::process::Signal) {
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), sig).unwrap();
}

#[test]
fn mount_refuse_second_and_sigterm() {
    let (pktfs, _) = need_bins!();
    let s = Setup::new("cli-term");
    let t = Instant::now();
    let out = Command::new(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(s.mp())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pktfs mount: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Live when the command returns.
    assert!(
        is_mountpoint(s.mp()),
        "mounted when `pktfs mount` returns ({:?})",
        t.elapsed()
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    let line = mounts
        .lines()
        .find(|l| l.contains(s.mp().to_str().unwrap()))
        .unwrap();
    assert!(
        line.contains("fuse.pktfs") && line.contains("default_permissions"),
        "{line}"
    );
    std::fs::write(s.mp().join("kept"), b"survives the daemon").unwrap();

    // The same image again: refused, with the reason, non-zero exit.
    let other = tempfile::tempdir().unwrap();
    let out = Command::new(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(other.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in use by another pktfs process"),
        "message: {err}"
    );
    assert!(!is_mountpoint(other.path()));

    let pids = daemons(&s.image);
    assert_eq!(pids.len(), 1, "one daemon");
    signal(pids[0], rustix::process::Signal::TERM);
    wait_until("unmounted after SIGTERM", || !is_mountpoint(s.mp()));
    wait_until("daemon exits", || daemons(&s.image).is_empty());
    assert!(image_is_clean(&s.image), "SIGTERM closes the image cleanly");
    let v = open_image(&s.image);
    let ino = v.lookup(v.root(), b"kept").unwrap().ino;
    assert_eq!(v.read(ino, 0, 100).unwrap(), b"survives the daemon");
}

#[test]
fn umount_and_fusermount_end_the_daemon() {
    let (pktfs, _) = need_bins!();
    let s = Setup::new("cli-umount");
    for how in ["umount", "fusermount3"] {
        if how == "fusermount3"
            && !prereq::part_met("fusermount3 -u", &[prereq::tool("fusermount3")])
        {
            continue;
        }
        let st = Command::new(&pktfs)
            .arg("mount")
            .arg(&s.image)
            .arg(s.mp())
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::write(s.mp().join(how), how).unwrap();
        let st = if how == "umount" {
            Command::new("umount").arg(s.mp()).status().unwrap()
        } else {
            Command::new("fusermount3")
                .arg("-u")
                .arg(s.mp())
                .status()
                .unwrap()
        };
        assert!(st.success(), "{how}");
        wait_until("daemon exits", || daemons(&s.image).is_empty());
        assert!(image_is_clean(&s.image), "{how} ends the daemon cleanly");
    }
}

#[test]
fn foreground_and_sigint() {
    let (pktfs, _) = need_bins!();
    let s = Setup::new("cli-fg");
    let mut child = Command::new(&pktfs)
        .arg("mount")
        .arg("-f")
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("fsname=fgtest,noatime")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("mounted in the foreground", || is_mountpoint(s.mp()));
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        mounts
            .lines()
            .any(|l| l.starts_with("fgtest ") && l.contains("noatime")),
        "{mounts}"
    );
    assert!(child.try_wait().unwrap().is_none(), "-f stays attached");
    signal(child.id() as i32, rustix::process::Signal::INT);
    let st = child.wait().unwrap();
    assert!(
        st.success(),
        "Ctrl-C ends the foreground mount cleanly: {st}"
    );
    assert!(!is_mountpoint(s.mp()));
    assert!(image_is_clean(&s.image));
}

#[test]
fn read_only_mount_and_bad_arguments() {
    let (pktfs, _) = need_bins!();
    let s = Setup::new("cli-ro");
    let st = Command::new(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("ro")
        .status()
        .unwrap();
    assert!(st.success());
    expect_errno(std::fs::write(s.mp().join("x"), b"x"), libc::EROFS);
    assert!(std::fs::read_dir(s.mp()).is_ok());
    Command::new("umount").arg(s.mp()).status().unwrap();
    wait_until("daemon exits", || daemons(&s.image).is_empty());

    let out = Command::new(&pktfs)
        .arg("mount")
        .arg("/nonexistent/image")
        .arg(s.mp())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/image"),
        "names the missing image"
    );
    let out = Command::new(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("bogus_option")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus_option"));
    let out = Command::new(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(&s.image)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    assert!(daemons(&s.image).is_empty());
}

#[test]
fn mount_helper_and_remount() {
    let (_, helper) = need_bins!();
    let s = Setup::new("cli-helper");
    // As mount(8) calls it.
    let st = Command::new(&helper)
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("rw,defaults,noauto")
        .status()
        .unwrap();
    assert!(st.success());
    assert!(is_mountpoint(s.mp()));
    std::fs::write(s.mp().join("f"), b"1").unwrap();
    // `mount -o remount,ro` goes through the helper too.
    let st = Command::new(&helper)
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("remount,ro")
        .status()
        .unwrap();
    assert!(st.success());
    expect_errno(std::fs::write(s.mp().join("g"), b"1"), libc::EROFS);
    let st = Command::new(&helper)
        .arg(&s.image)
        .arg(s.mp())
        .arg("-o")
        .arg("remount,rw")
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(s.mp().join("g"), b"1").unwrap();
    // -f is mount(8)'s "fake": nothing happens.
    let other = tempfile::tempdir().unwrap();
    let st = Command::new(&helper)
        .arg(&s.image)
        .arg(other.path())
        .arg("-f")
        .status()
        .unwrap();
    assert!(st.success() && !is_mountpoint(other.path()));
    Command::new("umount").arg(s.mp()).status().unwrap();
    wait_until("daemon exits", || daemons(&s.image).is_empty());
    assert!(image_is_clean(&s.image));
    // `mount -t pktfs`: mount(8) finds the helper only in /sbin, where
    // scripts/install.sh (run by .ci/run) puts it.
    if prereq::part_met(
        "mount -t pktfs",
        &[
            prereq::root(),
            prereq::file(
                Path::new("/sbin/mount.pktfs"),
                "scripts/install.sh installs it",
            ),
        ],
    ) {
        let st = Command::new("mount")
            .arg("-t")
            .arg("pktfs")
            .arg(&s.image)
            .arg(s.mp())
            .status()
            .unwrap();
        assert!(st.success(), "mount -t pktfs");
        assert!(s.mp().join("g").exists());
        Command::new("umount").arg(s.mp()).status().unwrap();
        wait_until("daemon exits", || daemons(&s.image).is_empty());
    }
}

#[test]
fn ordinary_user_through_fusermount3() {
    let (pktfs, _) = need_bins!();
    require!(
        prereq::root(),
        prereq::tool("runuser"),
        prereq::tool("fusermount3"),
        prereq::user("tests"),
    );
    let uid = prereq::user_id("tests").unwrap();
    let s = Setup::new("cli-user");
    let owner = Some(rustix::fs::Uid::from_raw(uid));
    rustix::fs::chown(&s.image, owner, None).unwrap();
    rustix::fs::chown(s.mp(), owner, None).unwrap();
    // The binary must be reachable by that user.
    let probe = Command::new("runuser")
        .args(["-u", "tests", "--"])
        .arg(&pktfs)
        .arg("--version")
        .output()
        .unwrap();
    require!(prereq::holds(probe.status.success(), || format!(
        "user `tests` cannot run {} (every directory above it must be \
         searchable by others: chmod o+x)",
        pktfs.display()
    )));
    let out = Command::new("runuser")
        .args(["-u", "tests", "--"])
        .arg(&pktfs)
        .arg("mount")
        .arg(&s.image)
        .arg(s.mp())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Containers often create /dev/fuse 0600, keeping it from ordinary
    // users even through the setuid fusermount3 (Debian's udev makes it
    // 0666). `.ci/run` gives it the standard mode.
    let blocked = !out.status.success() && err.contains("fusermount3") && err.contains("/dev/fuse");
    require!(prereq::holds(!blocked, || format!(
        "fusermount3 cannot open /dev/fuse for an ordinary user \
         (chmod 0666 /dev/fuse, as .ci/run does): {err}"
    )));
    assert!(out.status.success(), "mount as an ordinary user: {err}");
    assert!(is_mountpoint(s.mp()));
    let st = Command::new("runuser")
        .args(["-u", "tests", "--", "fusermount3", "-u"])
        .arg(s.mp())
        .status()
        .unwrap();
    assert!(st.success());
    wait_until("daemon exits", || daemons(&s.image).is_empty());
    assert!(image_is_clean(&s.image));
}
