//! `pktfs ls|cat|get|put|rm IMAGE PATH` on an image nothing holds, and
//! their refusal, with a hint, of an image a server holds.

use std::process::{Command, Output};

use crate::cli_common::*;

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(PKTFS).args(args).output().unwrap()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

macro_rules! args {
    ($($a:expr),*) => { &[$(std::ffi::OsStr::new($a)),*] };
}

/// A formatted image of `bytes` in a new temporary directory.
fn fresh_image(bytes: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    pktfs_fs::Volume::format(
        &img,
        &pktfs_fs::FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    (dir, img)
}

#[test]
fn put_ls_cat_get_rm_round_trip() {
    let (dir, img) = fresh_image(32 << 20);
    let src = dir.path().join("data.bin");
    let body: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 1000) as u8)
        .collect();
    std::fs::write(&src, &body).unwrap();
    let i = img.as_os_str();

    ok(&run(args!("put", i, src.as_os_str())));
    ok(&run(args!("put", i, src.as_os_str(), "/copy")));
    let e = err(&run(args!("put", i, src.as_os_str(), "/copy")));
    assert!(e.contains("/copy exists") && e.contains("--force"), "{e}");
    ok(&run(args!("put", "--force", i, src.as_os_str(), "/copy")));

    let ls = ok(&run(args!("ls", i)));
    assert_eq!(ls.lines().collect::<Vec<_>>(), ["data.bin", "copy"], "{ls}");
    let long = ok(&run(args!("ls", "-l", i, "/copy")));
    assert!(long.contains("3000000") && long.starts_with('-'), "{long}");

    let cat = run(args!("cat", i, "/data.bin"));
    assert!(cat.status.success());
    assert!(cat.stdout == body, "cat gives the bytes back");
    let got = dir.path().join("got");
    ok(&run(args!("get", i, "/copy", got.as_os_str())));
    assert!(
        std::fs::read(&got).unwrap() == body,
        "get gives the bytes back"
    );

    ok(&run(args!("rm", i, "/copy")));
    let e = err(&run(args!("cat", i, "/copy")));
    assert_eq!(e.matches("/copy").count(), 1, "{e}");
    let e = err(&run(args!("rm", i, "/")));
    assert!(e.contains("root"), "{e}");

    // The image was closed cleanly every time and is consistent.
    let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
    assert!(v.open_report().was_clean);
    v.close().unwrap();

    // Held by a server: refused, with the way to reach it instead.
    let addr = free_port();
    let (child, _) = start(
        Command::new(PKTFS)
            .arg("serve")
            .arg(&img)
            .args(["--listen", &addr.to_string()]),
    );
    wait_listening(addr);
    for a in [
        &args!("ls", i)[..],
        args!("put", i, src.as_os_str(), "/x"),
        args!("rm", i, "/data.bin"),
    ] {
        let e = err(&run(a));
        assert!(
            e.contains("held by a pktfs server") && e.contains("HTTP"),
            "{e}"
        );
    }
    interrupt(child);
}

/// A put that fails part way (the image runs out of space) leaves the
/// image as it was: with --force the file it would have replaced is still
/// there, whole, and without it no partial file appears; the space the
/// failed copy took is free again.
#[test]
fn a_failed_put_changes_nothing() {
    let (dir, img) = fresh_image(8 << 20);
    let i = img.as_os_str();
    let small = dir.path().join("small");
    std::fs::write(&small, b"the file that must survive").unwrap();
    ok(&run(args!("put", i, small.as_os_str(), "/f")));
    let free_before = {
        let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
        let f = v.statfs().blocks_free;
        v.close().unwrap();
        f
    };
    // Larger than the whole image.
    let big = dir.path().join("big");
    std::fs::write(&big, vec![7u8; 12 << 20]).unwrap();
    for force in [true, false] {
        let target = if force { "/f" } else { "/g" };
        let a: &[&std::ffi::OsStr] = if force {
            args!("put", "--force", i, big.as_os_str(), target)
        } else {
            args!("put", i, big.as_os_str(), target)
        };
        let e = err(&run(a));
        assert!(e.contains("no space"), "{e}");
        let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
        assert_eq!(
            v.statfs().blocks_free,
            free_before,
            "the failed copy's space is free again"
        );
        v.close().unwrap();
        let cat = run(args!("cat", i, "/f"));
        assert!(cat.status.success());
        assert_eq!(cat.stdout, b"the file that must survive");
        let ls = ok(&run(args!("ls", i)));
        assert_eq!(ls.lines().collect::<Vec<_>>(), ["f"], "{ls}");
    }
}

/// A `get` that fails (the file is damaged) leaves no partial file behind
/// and a file already at the destination as it was; one that succeeds
/// replaces it.
#[test]
fn a_failed_get_leaves_the_destination_as_it_was() {
    use std::os::unix::fs::FileExt;
    let (dir, img) = fresh_image(16 << 20);
    let i = img.as_os_str();
    let src = dir.path().join("src");
    let body: Vec<u8> = (0..3_000_000u32).map(|k| (k * 7) as u8).collect();
    std::fs::write(&src, &body).unwrap();
    ok(&run(args!("put", i, src.as_os_str(), "/f")));
    ok(&run(args!("put", i, src.as_os_str(), "/good")));
    // Damage a record in the middle of /f behind the file system's back.
    let off = {
        let v = pktfs_fs::Volume::open(&img, &Default::default()).unwrap();
        let ino = v.lookup(v.root(), b"f").unwrap().ino;
        let chain = v.chain(ino).unwrap();
        let off = chain[chain.len() / 2].image_off;
        v.close().unwrap();
        off
    };
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .write_all_at(b"XX", off + 5)
        .unwrap();
    let fresh = dir.path().join("fresh");
    let e = err(&run(args!("get", i, "/f", fresh.as_os_str())));
    assert!(e.contains("damaged"), "{e}");
    let kept = dir.path().join("kept");
    std::fs::write(&kept, b"the local file that must survive").unwrap();
    let e = err(&run(args!("get", i, "/f", kept.as_os_str())));
    assert!(e.contains("damaged"), "{e}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!fresh.exists(), "a partial file was left: {left:?}");
    assert!(
        !left.iter().any(|n| n.contains("pktfs-get")),
        "a temporary file was left: {left:?}"
    );
    assert_eq!(
        std::fs::read(&kept).unwrap(),
        b"the local file that must survive"
    );
    // A get that works replaces the file.
    ok(&run(args!("get", i, "/good", kept.as_os_str())));
    assert_eq!(std::fs::read(&kept).unwrap(), body);
}
