//! mkfs.pktfs as a user runs it.

use std::process::Command;

fn mkfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mkfs-pktfs"))
}

#[test]
fn creates_then_refuses_to_overwrite_without_force() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("a.img");
    let out = mkfs().arg(&img).args(["--size", "16M"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(
        so.contains("packet buffers") && so.contains("records"),
        "geometry printed: {so}"
    );
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 16 << 20);
    let before = std::fs::read(&img).unwrap();

    let out = mkfs().arg(&img).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already holds a pktfs image") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&img).unwrap(),
        before,
        "refused format must not write"
    );

    let out = mkfs().arg(&img).arg("--force").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    pktfs::Volume::open(&img, &Default::default()).unwrap();
}

#[test]
fn refuses_other_data_and_bad_geometry() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("data");
    std::fs::write(&img, b"precious user data").unwrap();
    let out = mkfs().arg(&img).args(["--size", "8M"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("other data"));
    assert_eq!(std::fs::read(&img).unwrap(), b"precious user data");

    let fresh = d.path().join("x.img");
    for bad in [
        &["--size", "100K"][..],
        &["--size", "8M", "--buffer-size", "3000"],
        &["--size", "lots"],
    ] {
        let out = mkfs().arg(&fresh).args(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{err}");
    }
}
