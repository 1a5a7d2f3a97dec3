//! The POSIX suite pjdfstest (the Rust rewrite) against a real mount, run by
//! `scripts/pjdfstest.sh` with this package's binaries: every test must
//! pass, then the tree must survive an unmount and remount unchanged. Once
//! plainly, and once with the direct-reading shim preloaded into pjdfstest,
//! where every test must pass the same (and the shim must have served the
//! files pjdfstest opened for reading).
//! `.ci/run` installs pjdfstest; in CI its absence is a failure, not a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use pktfs_fs::{FormatOptions, Volume};
use pktfs_layout::GeometryParams;

use crate::prereq;

fn pjdfstest() -> Option<PathBuf> {
    prereq::cargo_bin("pjdfstest")
}

#[test]
fn pjdfstest_passes_on_a_mount() {
    run_suite(None);
}

#[test]
fn pjdfstest_passes_the_same_under_the_direct_reading_shim() {
    let stats = tempfile::NamedTempFile::new().unwrap();
    run_suite(Some(stats.path()));
    let opened: u64 = std::fs::read_to_string(stats.path())
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("a stats line")["opened"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert!(opened > 0, "the shim served none of pjdfstest's opens");
}

/// The shim as cargo built it for these tests.
fn shim() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    [deps, deps.parent().expect("target/<profile>")]
        .iter()
        .map(|d| d.join("libpktfs_preload.so"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libpktfs_preload.so is not next to {}", exe.display()))
}

/// Run the suite (under the shim when `shim_stats` names where it reports).
/// One at a time: the script links the mount helpers into /sbin for a run
/// and removes them after, which would pull them from under another run.
fn run_suite(shim_stats: Option<&Path>) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    require!(
        prereq::holds(pjdfstest().is_some(), || {
            "pjdfstest is not installed (cargo install --locked pjdfstest)".into()
        }),
        prereq::fuse(),
        prereq::root(), // pjdfstest switches users (the script adds `tests`)
    );
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("pjd.img");
    Volume::format(
        &img,
        &FormatOptions {
            params: GeometryParams::for_size(512 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pktfs")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pjdfstest.sh");
    let mut cmd = Command::new("bash");
    cmd.arg(&script)
        .env("PKTFS_BIN_DIR", bin_dir)
        .env("PKTFS_IMAGE", &img)
        .env("PJD_LOG", dir.path().join("pjdfstest.log"));
    if let Some(stats) = shim_stats {
        cmd.env("PJD_PRELOAD", shim())
            .env("PKTFS_PRELOAD_STATS", stats);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("pjdfstest, both passes:"))
        .unwrap_or_else(|| panic!("no summary line\n{stdout}\n{stderr}"));
    eprintln!("{summary}");
    let failed: u64 = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" failed"))
        .and_then(|n| n.trim().parse().ok())
        .expect("failed count");
    let passed: u64 = summary
        .split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("passed count");
    assert!(
        out.status.success() && failed == 0,
        "{summary}\n{stdout}\n{stderr}"
    );
    assert!(passed > 350, "too few pjdfstest cases ran: {summary}");
}
