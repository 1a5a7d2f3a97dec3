//! The POSIX suite pjdfstest (the Rust rewrite) against a real mount, run by
//! `scripts/pjdfstest.sh` with this package's binaries: every test must
//! pass, then the tree must survive an unmount and remount unchanged.
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
    let out = Command::new("bash")
        .arg(&script)
        .env("PKTFS_BIN_DIR", bin_dir)
        .env("PKTFS_IMAGE", &img)
        .env("PJD_LOG", dir.path().join("pjdfstest.log"))
        .output()
        .unwrap();
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
