//! `pktfs up` creates its image through the same code as mkfs.pktfs, so a
//! size the file system cannot hold is refused at once with the same
//! message, and no file is left behind.

use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::tmpfs;

#[test]
fn up_refuses_an_image_the_file_system_cannot_hold() {
    let Some(fs) = tmpfs::Tmpfs::mount(
        "up_space::up_refuses_an_image_the_file_system_cannot_hold",
        32 << 20,
    ) else {
        return;
    };
    let img = fs.path().join("img");
    let up = |size: &str| {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_pktfs"))
            .args([
                "up",
                "--no-mount",
                "--listen",
                "127.0.0.1:0",
                "--size",
                size,
            ])
            .arg("--image")
            .arg(&img)
            .output()
            .expect("run pktfs up");
        (out, t.elapsed())
    };
    let (out, took) = up("256M");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches(&*img.display().to_string()).count(),
        1,
        "path named once: {err}"
    );
    assert!(
        err.starts_with(&format!(
            "pktfs: {}: 256.0 MiB asked for but the file system holding it has only",
            img.display()
        )) && err.contains(" free; choose --size at most "),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "refusal took {took:?}");
    assert!(!img.exists(), "a refused up left {}", img.display());

    // A size that fits is made fully allocated (the server is not left
    // running: --size 16M then stop it once it says it is up).
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pktfs"))
        .args([
            "up",
            "--no-mount",
            "--listen",
            "127.0.0.1:0",
            "--size",
            "16M",
        ])
        .arg("--image")
        .arg(&img)
        // `up` makes its token under $HOME: this test's own.
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("pktfs is up: created"), "{line}");
    let meta = std::fs::metadata(&img).unwrap();
    assert_eq!(meta.len(), 16 << 20);
    assert!(meta.blocks() * 512 >= 16 << 20);
}
