//! mkfs.pktfs allocates the whole image, and refuses at once (leaving no
//! file, and an existing image as it was) when the file system holding it
//! lacks the room: a sparse image would fault (SIGBUS) in the mount daemon
//! once the file system filled up.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::tmpfs;

fn mkfs(img: &Path, args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_mkfs-pktfs"))
        .arg(img)
        .args(args)
        .output()
        .expect("run mkfs.pktfs");
    (out, t.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn allocated_bytes(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

/// The advice in a refusal: "choose --size at most NM".
fn advised_size(err: &str) -> String {
    let rest = err
        .split("choose --size at most ")
        .nth(1)
        .unwrap_or_else(|| panic!("no --size advice in {err:?}"));
    rest.split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn on_a_small_tmpfs_refuses_too_large_and_allocates_what_fits() {
    let Some(fs) = tmpfs::Tmpfs::mount(
        "mkfs::on_a_small_tmpfs_refuses_too_large_and_allocates_what_fits",
        32 << 20,
    ) else {
        return;
    };
    let img = fs.path().join("img");

    // Too large: refused quickly, clearly, with no file left behind.
    let (out, took) = mkfs(&img, &["--size", "256M"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "mkfs.pktfs: {}: 256.0 MiB asked for but the file system holding it has only",
            img.display()
        )) && err.contains(" free; choose --size at most "),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(took < Duration::from_secs(5), "refusal took {took:?}");
    assert!(!img.exists(), "a refused mkfs left {}", img.display());

    // What fits: made, and every byte allocated (no SIGBUS later).
    let (out, _) = mkfs(&img, &["--size", "16M"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 16 << 20);
    assert!(
        allocated_bytes(&img) >= 16 << 20,
        "only {} of 16 MiB allocated",
        allocated_bytes(&img)
    );

    // --force on that image with a size that cannot fit: refused before
    // anything changes, and the advice counts what the image already has.
    let before = std::fs::read(&img).unwrap();
    let blocks_before = allocated_bytes(&img);
    let (out, _) = mkfs(&img, &["--size", "256M", "--force"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("256.0 MiB asked for"), "{err}");
    assert_eq!(std::fs::read(&img).unwrap(), before, "a refused mkfs wrote");
    assert_eq!(allocated_bytes(&img), blocks_before);
    pktfs_fs::Volume::open(&img, &Default::default())
        .expect("the image survives a refused mkfs")
        .close()
        .unwrap();

    // The advice is a size that works.
    let advice = advised_size(&err);
    let (out, _) = mkfs(&img, &["--size", &advice, "--force"]);
    assert!(out.status.success(), "--size {advice}: {}", stderr(&out));
    let len = std::fs::metadata(&img).unwrap().len();
    assert!(len > 16 << 20, "advised {advice}");
    assert!(allocated_bytes(&img) >= len);
}

/// Needs no mount: no ordinary file system holds 16 TiB free, and the
/// statvfs check refuses before creating anything.
#[test]
fn refuses_a_size_no_file_system_here_holds() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("huge.img");
    let (out, took) = mkfs(&img, &["--size", "16T", "--buffer-size", "65536"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("16.0 TiB asked for but the file system holding it has only"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "refusal took {took:?}");
    assert!(!img.exists());
}

/// Re-formatting an image another process has open is refused before the
/// file is resized (shrinking it under a mount would fault the mount).
#[test]
fn refuses_an_image_in_use_without_resizing_it() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("a.img");
    let (out, _) = mkfs(&img, &["--size", "16M"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
    let before = std::fs::read(&img).unwrap();
    for size in ["8M", "32M"] {
        let (out, _) = mkfs(&img, &["--size", size, "--force"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("in use by another pktfs process"), "{err}");
        assert_eq!(std::fs::read(&img).unwrap(), before, "--size {size}");
    }
    v.close().unwrap();
}
