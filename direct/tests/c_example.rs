//! examples/pktfs_cat.c (the C ABI's example), built with the system's C compiler against
//! include/pktfs_direct.h and libpktfs_direct.so, prints files of an image
//! byte for byte (by copies and by lends), with and without a holder, and
//! fails with errno and a message where it should.

use std::path::{Path, PathBuf};
use std::process::Command;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_testkit::prereq;

/// The directory cargo put libpktfs_direct.so in for this test run.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    for d in [deps, deps.parent().expect("target/<profile>")] {
        if d.join("libpktfs_direct.so").is_file() {
            return d.to_path_buf();
        }
    }
    panic!("libpktfs_direct.so is not next to {}", exe.display());
}

/// Build the example once per test into `dir`.
fn build(dir: &Path) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let out = dir.join("pktfs_cat");
    let st = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(manifest.join("include"))
        .arg(manifest.join("examples/pktfs_cat.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lpktfs_direct")
        .arg("-o")
        .arg(&out)
        .status()
        .expect("running cc");
    assert!(st.success(), "building the C example failed");
    out
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 300) as u8).collect()
}

#[test]
fn the_c_example_reads_files_byte_for_byte() {
    pktfs_testkit::require!(prereq::tool("cc"));
    let dir = tempfile::tempdir().unwrap();
    let cat = build(dir.path());
    let img = dir.path().join("img");
    let params = pktfs_layout::GeometryParams::for_size(32 << 20);
    Volume::format(
        &img,
        &FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let data = pattern(1_500_000);
    {
        let v = Volume::open(&img, &OpenOptions::default()).unwrap();
        let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap().ino;
        let f = v.create(d, b"f", 0o644, 0, 0).unwrap().ino;
        v.write(f, 0, &data).unwrap();
        v.write(f, 2_000_000, b"end").unwrap(); // a hole before it
        v.close().unwrap();
    }
    let mut want = data.clone();
    want.resize(2_000_000, 0);
    want.extend_from_slice(b"end");
    let run = |args: &[&str]| {
        Command::new(&cat)
            .arg(&img)
            .args(args)
            .output()
            .expect("running the example")
    };
    // No holder: by copies, and lent under the image's shared lock.
    for mode in [&["/d/f"][..], &["/d/f", "--lend"][..]] {
        let o = run(mode);
        assert!(
            o.status.success(),
            "{mode:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.stdout == want, "{mode:?}: the bytes differ");
    }
    // With a holder: copies from the mapping.
    let v = Volume::open(&img, &OpenOptions::default()).unwrap();
    let o = run(&["/d/f"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout == want, "with a holder: the bytes differ");
    drop(v);
    // Errors: errno and a message.
    let o = run(&["/d/nope"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no such file") && err.contains(&format!("errno {}", libc::ENOENT)),
        "{err}"
    );
    let o = run(&["/d"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("errno {}", libc::EISDIR)), "{err}");
    let o = Command::new(&cat)
        .arg(dir.path().join("missing.img"))
        .arg("/d/f")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("errno {}", libc::ENOENT)), "{err}");
}
