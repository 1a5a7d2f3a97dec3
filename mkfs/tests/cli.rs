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
    pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
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

/// A directory, a FIFO or a socket is refused with a message, at once: a
/// FIFO used to be opened for reading, which waits for a writer forever.
#[test]
fn refuses_what_cannot_be_an_image_without_hanging() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let sock = d.path().join("sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for (path, kind) in [
        (d.path().to_path_buf(), "is a directory"),
        (fifo, "is a FIFO"),
        (sock, "is a socket"),
    ] {
        let mut child = mkfs()
            .arg(&path)
            .args(["--size", "16M", "--force"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                panic!("mkfs.pktfs {path:?} did not return");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        assert!(!status.success(), "{path:?} formatted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(kind) && !err.contains("panicked"), "{err}");
    }
}

/// Every size option takes the same forms (`4G`, `4GiB`, `1M`, `512K`,
/// bytes), and the label is refused, not cut, when it does not fit.
#[test]
fn size_forms_and_label_limit() {
    let d = tempfile::tempdir().unwrap();
    for (size, buf, want_len, want_buf) in [
        ("16M", "4K", 16u64 << 20, 4096u32),
        ("16MiB", "1M", 16 << 20, 1 << 20),
        ("16777216", "512", 16 << 20, 512),
        ("0.5G", "2048", 512 << 20, 2048),
    ] {
        let img = d.path().join(format!("{size}-{buf}.img"));
        let out = mkfs()
            .arg(&img)
            .args(["--size", size, "--buffer-size", buf, "-q"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "--size {size} --buffer-size {buf}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::metadata(&img).unwrap().len(), want_len);
        let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
        assert_eq!(v.geometry().buffer_size_bytes, want_buf, "{buf}");
        v.close().unwrap();
        std::fs::remove_file(&img).unwrap();
    }

    let help = mkfs().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("4GiB") && help.contains("powers of 1024"),
        "{help}"
    );

    let img = d.path().join("label.img");
    let long = "l".repeat(32);
    let out = mkfs()
        .arg(&img)
        .args(["--size", "8M", "--label", &long])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 31 bytes"), "{err}");
    assert_eq!(err.matches(&long).count(), 1, "names the value once: {err}");
    assert!(!img.exists(), "nothing created");
    let ok = mkfs()
        .arg(&img)
        .args(["--size", "8M", "-q", "--label", &long[..31]])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

/// `mkfs.pktfs --gen-docs DIR` (for scripts/install.sh): its man page and
/// completions.
#[test]
fn man_page_and_completions() {
    let d = tempfile::tempdir().unwrap();
    let out = mkfs().arg("--gen-docs").arg(d.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(d.path().join("man8/mkfs.pktfs.8")).unwrap();
    assert!(
        page.contains("buffer\\-size") && page.contains("4GiB"),
        "{page}"
    );
    for f in ["bash/mkfs.pktfs", "zsh/_mkfs.pktfs", "fish/mkfs.pktfs.fish"] {
        let c = std::fs::read_to_string(d.path().join(f)).unwrap();
        assert!(c.contains("label"), "{f}");
    }
}
