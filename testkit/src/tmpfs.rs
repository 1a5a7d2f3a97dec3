//! A small tmpfs of a chosen size, mounted for one test and always unmounted
//! (the guard unmounts in Drop, so a failing assertion still cleans up).
//!
//! Mounting needs root. Without it the prerequisite rule applies
//! ([`crate::prereq::fail_or_skip`]): a failure under CI, elsewhere a skip
//! with its SKIPPED line and the tally at exit.

use std::path::Path;
use std::process::Command;

#[derive(Debug)]
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

/// Why `test` cannot run here: the prerequisite rule
/// ([`crate::prereq::fail_or_skip`]), and no tmpfs.
#[track_caller]
fn cannot_run(test: &str, why: &str) -> Option<Tmpfs> {
    crate::prereq::fail_or_skip(test, why);
    None
}

impl Tmpfs {
    /// Mount a tmpfs of `size_bytes` on a fresh directory, or say why not
    /// (see the module docs) and return `None`.
    pub fn mount(test: &str, size_bytes: u64) -> Option<Tmpfs> {
        if let Err(why) = crate::prereq::root() {
            return cannot_run(test, &format!("mounting a tmpfs needs root: {why}"));
        }
        let dir = tempfile::tempdir().expect("temporary directory for the mount point");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size_bytes},mode=0755"))
            .arg("pktfs-test")
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => cannot_run(
                test,
                &format!(
                    "mount -t tmpfs failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            ),
            Err(e) => cannot_run(test, &format!("cannot run mount: {e}")),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let p = self.dir.path();
        let ok = Command::new("umount")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still has a file open there (a failed test's
            // leftovers): detach it so the mount does not outlive the test.
            let lazy = Command::new("umount").arg("-l").arg(p).status();
            if !lazy.is_ok_and(|s| s.success()) {
                eprintln!("could not unmount the test tmpfs at {}", p.display());
            }
        }
    }
}
