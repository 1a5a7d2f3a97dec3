//! The fsck.pktfs binary: modes, exit codes, JSON output.

use std::path::Path;
use std::process::Command;

use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_layout::GeometryParams;

fn fsck(args: &[&str], img: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fsck-pktfs"))
        .args(args)
        .arg(img)
        .output()
        .expect("run fsck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Open an image this test just closed. Another test's process spawn may
/// hold a copy of the closed descriptor (and so the image lock) for the
/// instant between its fork and exec: wait that out.
fn open(p: &Path) -> Volume {
    let t0 = std::time::Instant::now();
    loop {
        match Volume::open(p, &OpenOptions::default()) {
            Err(pktfs_fs::FsError::Media(pktfs_fs::media::MediaError::Locked { .. }))
                if t0.elapsed().as_secs() < 2 =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            r => return r.unwrap(),
        }
    }
}

fn make(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: GeometryParams::for_size(4 << 20),
            label: Some("cli".into()),
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = open(&p);
    let d = v.mkdir(v.root(), b"d", 0o755, 0, 0).unwrap();
    let f = v.create(d.ino, b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &vec![3u8; 10_000]).unwrap();
    v.close().unwrap();
    p
}

#[test]
fn exit_codes_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let img = make(dir.path());
    let (code, out) = fsck(&["-n"], &img);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean"), "{out}");
    let (code, out) = fsck(&["-n", "--json"], &img);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["exit_code"], 0);
    assert_eq!(j["mode"], "check");
    assert_eq!(j["superblock"]["label"], "cli");
    assert!(j["counts"]["payload_bytes_checked"].as_u64().unwrap() >= 10_000);

    // Damage the primary superblock: -n reports it (4), -p restores it (1), then clean (0).
    let mut b = std::fs::read(&img).unwrap();
    b[200] ^= 0xff;
    std::fs::write(&img, &b).unwrap();
    let (code, out) = fsck(&["-n"], &img);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("superblock.primary"), "{out}");
    assert_eq!(std::fs::read(&img).unwrap(), b, "-n must not write");
    let (code, out) = fsck(&["-p", "--json"], &img);
    assert_eq!(code, 1, "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["what"].as_str().unwrap().contains("primary superblock")));
    assert!(j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["code"] == "superblock.primary" && f["fixed"] == true));
    let (code, out) = fsck(&["-n"], &img);
    assert_eq!(code, 0, "{out}");

    // A mounted image cannot be repaired (the lock), only checked.
    let v = open(&img);
    let (code, out) = fsck(&["-y"], &img);
    assert_eq!(code, 8, "{out}");
    // -n does not read a live image behind its holder's back either: it
    // says so and points at the live check.
    let o = Command::new(env!("CARGO_BIN_EXE_fsck-pktfs"))
        .arg("-n")
        .arg(&img)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(8), "{err}");
    assert!(
        err.contains("in use") && err.contains("pktfs scrub"),
        "{err}"
    );
    drop(v);
    assert_eq!(
        fsck(&["-n"], &img).0,
        0,
        "free again once the holder is gone"
    );

    // Not an image at all; a missing file.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    assert_eq!(fsck(&["-n"], &junk).0, 8);
    assert_eq!(fsck(&["-n"], &dir.path().join("missing")).0, 8);
    // -n and -y together is a usage error.
    assert_ne!(fsck(&["-n", "-y"], &img).0, 0);
}

/// A damaged payload: `-n --json` lists it by path and range, `-y` keeps it
/// marked (exit 1, then 0), `-y --drop-damaged` turns it into a hole.
#[test]
fn damaged_data_by_path_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let img = make(dir.path());
    let v = open(&img);
    let d = v.lookup(v.root(), b"d").unwrap();
    let f = v.lookup(d.ino, b"f").unwrap();
    let chain = v.chain(f.ino).unwrap();
    let (off, image_off, len) = (chain[0].file_off, chain[0].image_off, chain[0].len);
    v.close().unwrap();
    let mut b = std::fs::read(&img).unwrap();
    b[image_off as usize + 3] ^= 0x10;
    std::fs::write(&img, &b).unwrap();
    let (code, out) = fsck(&["-n", "--json"], &img);
    assert_eq!(code, 4, "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let dmg = &j["damaged"][0];
    assert_eq!(dmg["path"], "/d/f");
    assert_eq!(dmg["start"], off);
    assert_eq!(dmg["end"], off + len as u64);
    assert_eq!(dmg["state"], "found");
    let (code, out) = fsck(&["-n"], &img);
    assert_eq!(code, 4);
    assert!(
        out.contains(&format!(
            "/d/f: bytes [{off}, {}) damaged: payload checksum mismatch",
            off + len as u64
        )),
        "{out}"
    );
    let (code, out) = fsck(&["-y"], &img);
    assert_eq!(code, 1, "{out}");
    let (code, out) = fsck(&["-n"], &img);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("marked damaged"), "{out}");
    let (code, out) = fsck(&["-y", "--drop-damaged"], &img);
    assert_eq!(code, 1, "{out}");
    let (code, out) = fsck(&["-n", "--json"], &img);
    assert_eq!(code, 0, "{out}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["damaged"].as_array().unwrap().is_empty(), "{out}");
}

/// e2fsck's codes where clap and the shell would give others: a usage
/// error is 16 (not 2), Ctrl-C is 32 (not 130); an image that cannot be
/// opened gets its reason once, on stderr, and no all-zero summary.
#[test]
fn usage_cancel_and_operational_exit_codes() {
    let bin = env!("CARGO_BIN_EXE_fsck-pktfs");
    for bad in [&["--no-such-option", "x"][..], &[], &["-n", "-y", "x"]] {
        let out = Command::new(bin).args(bad).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(16),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let help = Command::new(bin).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("16 usage error"));

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.img");
    let out = Command::new(bin).arg("-n").arg(&missing).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(so.is_empty(), "no summary on stdout: {so}");
    assert!(
        !se.contains("0 inodes") && !se.contains("0 buffers"),
        "{se}"
    );
    assert_eq!(
        se.matches(missing.to_str().unwrap()).count(),
        1,
        "the path named once: {se}"
    );

    // Not a pktfs image: the reason alone, no summary of zeros.
    let zeros = dir.path().join("zeros.img");
    std::fs::write(&zeros, vec![0u8; 1 << 20]).unwrap();
    let out = Command::new(bin).arg("-n").arg(&zeros).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.stdout.is_empty() && se.contains("not a pktfs image"),
        "{se}"
    );
    assert!(!se.contains("0 inodes"), "{se}");

    // A truncated image: exit 8, with the way back to one fsck can repair;
    // after that, fsck -y finds what the image still holds.
    let cut_dir = dir.path().join("cut");
    std::fs::create_dir(&cut_dir).unwrap();
    let cut = make(&cut_dir);
    let len = std::fs::metadata(&cut).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&cut).unwrap();
    f.set_len(len / 2).unwrap();
    let out = Command::new(bin).arg("-y").arg(&cut).output().unwrap();
    assert_eq!(out.status.code(), Some(8));
    let se = String::from_utf8_lossy(&out.stderr);
    assert!(
        se.contains("truncated") && se.contains(&format!("truncate -s {len}")),
        "{se}"
    );
    f.set_len(len).unwrap();
    let out = Command::new(bin).arg("-y").arg(&cut).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // SIGINT while fsck is busy (here: waiting for the lock of an image
    // another process holds, as a mount does; fsck waits 1.5 s for a lock
    // before it says the image is in use): exit 32. The signal is sent once
    // fsck has set up its handling (SIGINT shows in the blocked mask of its
    // main thread).
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&cut)
        .unwrap();
    held.try_lock().unwrap();
    let mut child = Command::new(bin)
        .arg("-n")
        .arg(&cut)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let st = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let blk = st
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .map(|h| u64::from_str_radix(h.trim(), 16).unwrap())
            .unwrap();
        if blk & (1 << (SIGINT - 1)) != 0 {
            break;
        }
        assert!(t0.elapsed().as_secs() < 10, "fsck never blocked SIGINT");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(32), "{status}: {err}");
    assert!(err.contains("cancelled"), "{err}");
}

/// SIGINT's number on Linux.
const SIGINT: u32 = 2;

/// `fsck.pktfs --gen-docs DIR` (for scripts/install.sh): its man page,
/// with the exit codes, and completions.
#[test]
fn man_page_and_completions() {
    let d = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fsck-pktfs"))
        .arg("--gen-docs")
        .arg(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(d.path().join("man8/fsck.pktfs.8")).unwrap();
    assert!(page.contains("16 usage error"), "{page}");
    for f in ["bash/fsck.pktfs", "zsh/_fsck.pktfs", "fish/fsck.pktfs.fish"] {
        let c = std::fs::read_to_string(d.path().join(f)).unwrap();
        assert!(c.contains("drop-damaged"), "{f}");
    }
}
