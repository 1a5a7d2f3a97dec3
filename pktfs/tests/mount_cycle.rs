//! A mount's life as scripts and units see it: `umount DIR` and then at
//! once `fsck.pktfs` or another mount works (the departing daemon is
//! waited for), and a detached daemon's log survives it: where it goes is
//! said at start, and what ended it, or why it refused an image, is in it.
//!
//! Lives in the pktfs package so cargo builds the binaries it runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fuse_common::*;
use crate::prereq;

const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");

/// fsck.pktfs, built beside pktfs: cargo builds it for its own package's
/// tests (`cargo test --workspace`), not for this package's alone.
fn fsck_bin() -> std::path::PathBuf {
    Path::new(PKTFS).with_file_name("fsck-pktfs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Wait until `mp` is mounted by `child`, which must not end first.
fn wait_mounted(mp: &Path, child: &mut std::process::Child) {
    let t0 = Instant::now();
    while !is_mountpoint(mp) {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!(
                "mount -f ended ({st}) before {} was mounted: {err}",
                mp.display()
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} never mounted",
            mp.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn umount(mp: &Path) {
    let out = Command::new("umount").arg(mp).output().unwrap();
    assert!(out.status.success(), "umount: {}", text(&out.stderr));
}

/// Unmounts what a failed test left mounted, removes the image.
struct Cleanup<'a>(&'a Path, &'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if is_mountpoint(self.1) {
            let _ = Command::new("umount").arg("-l").arg(self.1).status();
        }
        let _ = std::fs::remove_file(self.0);
    }
}

#[test]
fn umount_then_fsck_and_mount_at_once() {
    let fsck = fsck_bin();
    require!(
        prereq::fuse(),
        prereq::file(
            &fsck,
            "cargo build -p pktfs-fsck, or cargo test --workspace"
        )
    );
    let image = image_path("cycle");
    format(&image, 32 << 20);
    let mnt = tempfile::tempdir().unwrap();
    let mp = mnt.path();
    let _c = Cleanup(&image, mp);
    for i in 0..10 {
        // A foreground mount run in the background, as a unit runs it.
        let mut fg = Command::new(PKTFS)
            .args(["mount", "-f"])
            .arg(&image)
            .arg(mp)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_mounted(mp, &mut fg);
        std::fs::write(mp.join(format!("f{i}")), format!("round {i}")).unwrap();
        umount(mp);

        for mode in ["-n", "-y"] {
            let out = Command::new(&fsck).arg(mode).arg(&image).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "round {i}: fsck {mode} right after umount: {}{}",
                text(&out.stdout),
                text(&out.stderr)
            );
        }
        let out = Command::new(PKTFS)
            .arg("mount")
            .arg(&image)
            .arg(mp)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "round {i}: mount right after umount and fsck: {}",
            text(&out.stderr)
        );
        for k in 0..=i {
            assert_eq!(
                std::fs::read_to_string(mp.join(format!("f{k}"))).unwrap(),
                format!("round {k}")
            );
        }
        umount(mp);
        let st = fg.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut fg.stderr.take().unwrap(), &mut err).unwrap();
        assert!(st.success(), "round {i}: mount -f ended with {st}: {err}");
    }
    // The last daemon lets go in its own time; the next open waits for it.
    let out = Command::new(&fsck).arg("-y").arg(&image).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn a_detached_daemon_logs_where_it_says() {
    require!(prereq::fuse());
    let image = image_path("log");
    format(&image, 32 << 20);
    let mnt = tempfile::tempdir().unwrap();
    let mp = mnt.path();
    let _c = Cleanup(&image, mp);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("mount.log");

    let out = Command::new(PKTFS)
        .arg("mount")
        .arg(&image)
        .arg(mp)
        .arg("-o")
        .arg(format!("log=debug,log_file={}", log.display()))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("logs to {}", log.display())), "{err}");
    umount(mp);
    let t0 = Instant::now();
    loop {
        let l = std::fs::read_to_string(&log).unwrap_or_default();
        if l.contains("unmounted") {
            assert!(l.contains("mounted on"), "{l}");
            assert!(l.contains("DEBUG"), "log=debug: {l}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no end in the log: {l}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // A daemon that refuses the image logs why, with --log-file this
    // time (the same as -o log_file=).
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let refused = logs.path().join("refused.log");
    let out = Command::new(PKTFS)
        .arg("mount")
        .arg(&image)
        .arg(mp)
        .arg("--log-file")
        .arg(&refused)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "a zeroed image mounted");
    let l = std::fs::read_to_string(&refused).unwrap();
    assert!(l.contains("ERROR"), "the refusal is logged: {l}");
    // The message the user saw is the one logged.
    let reason = err.lines().last().unwrap().trim_start_matches("pktfs: ");
    assert!(l.contains(reason), "log: {l}\nstderr: {err}");

    // A bad level is a usage error, before anything is mounted.
    let out = Command::new(PKTFS)
        .arg("mount")
        .arg(&image)
        .arg(mp)
        .args(["-o", "log=loud="])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!is_mountpoint(mp));
}
