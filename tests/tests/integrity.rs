//! Trust the bytes: damaged payload never reaches a caller, damage stays in
//! its record's range, splits never launder it, and a fault stops the
//! Volume without losing anything acknowledged.

use pktfs_fs::{FormatOptions, FsError, OpenOptions, VerifyMode, Volume};
use pktfs_layout::GeometryParams;

fn fresh(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: GeometryParams::for_size(16 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    p
}

fn open(p: &std::path::Path) -> Volume {
    Volume::open(p, &OpenOptions::default()).unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// Flip one byte of the image file at `off` (the volume is closed).
fn flip(p: &std::path::Path, off: u64) {
    let mut b = std::fs::read(p).unwrap();
    b[off as usize] ^= 0x5a;
    std::fs::write(p, b).unwrap();
}

/// An image with files a (three records of 64 KiB, written separately) and
/// b; returns the image offset of a byte inside a's middle record.
fn damaged_image(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let p = fresh(dir);
    let v = open(&p);
    let a = v.create(v.root(), b"a", 0o644, 0, 0).unwrap();
    for k in 0..3u64 {
        v.write(a.ino, k * 65536, &pattern(65536, k as u8)).unwrap();
    }
    let b = v.create(v.root(), b"b", 0o644, 0, 0).unwrap();
    v.write(b.ino, 0, &pattern(100_000, 9)).unwrap();
    let chain = v.chain(a.ino).unwrap();
    let mid = chain
        .iter()
        .find(|c| c.file_off == 65536)
        .expect("a record starts at 64 KiB");
    assert_eq!(mid.len, 65536);
    let at = mid.image_off + 1000;
    v.close().unwrap();
    flip(&p, at);
    (p, at)
}

fn is_damaged(e: &FsError, start: u64, end: u64) -> bool {
    matches!(*e, FsError::Damaged { start: s, end: t, .. } if s == start && t == end)
        && e.errno() == libc::EIO
}

#[test]
fn damaged_record_fails_reads_of_its_range_only() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = damaged_image(d.path());
    for mode in [VerifyMode::Once, VerifyMode::Always] {
        let v = open(&p);
        v.set_verify_mode(mode);
        let a = v.lookup(v.root(), b"a").unwrap().ino;
        // Twice: the verified-once state must not let the second read through.
        for _ in 0..2 {
            let e = v
                .read(a, 65536 + 5, 10)
                .expect_err("damaged range must fail");
            assert!(is_damaged(&e, 65536, 131072), "{e:?}");
            let e = v.read(a, 0, 200_000).expect_err("a read spanning it fails");
            assert!(is_damaged(&e, 65536, 131072), "{e:?}");
            // The records around it, and the other file, read back intact.
            assert_eq!(v.read(a, 0, 65536).unwrap(), pattern(65536, 0));
            assert_eq!(v.read(a, 131072, 65536).unwrap(), pattern(65536, 2));
            let b = v.lookup(v.root(), b"b").unwrap().ino;
            assert_eq!(v.read(b, 0, 100_000).unwrap(), pattern(100_000, 9));
            // Transmit holds (HTTP GET, pktfs send) are checked the same way.
            let e = v.tx_hold(a, 60_000, 10_000).expect_err("hold of damage");
            assert!(is_damaged(&e, 65536, 131072), "{e:?}");
            let h = v.tx_hold(a, 131072, 65536).unwrap();
            v.tx_release(h);
        }
        let chain = v.chain(a).unwrap();
        let bad: Vec<u64> = chain
            .iter()
            .filter(|c| c.damaged)
            .map(|c| c.file_off)
            .collect();
        assert_eq!(
            bad,
            vec![65536],
            "pktfs chain shows exactly the damaged record"
        );
        v.close().unwrap();
    }
    // With verification off the bytes come back unchecked (the documented
    // trade): proves the check above is what refused them.
    let v = Volume::open(
        &p,
        &OpenOptions {
            verify: VerifyMode::Off,
            ..Default::default()
        },
    )
    .unwrap();
    let a = v.lookup(v.root(), b"a").unwrap().ino;
    let got = v.read(a, 65536, 65536).unwrap();
    assert_ne!(got, pattern(65536, 1));
    assert_eq!(got.len(), 65536);
}

#[test]
fn splitting_a_damaged_record_keeps_the_damage_marked() {
    let d = tempfile::tempdir().unwrap();
    let (p, _) = damaged_image(d.path());
    let v = open(&p);
    let a = v.lookup(v.root(), b"a").unwrap().ino;
    // Overwrite 100 bytes far from the flipped byte (which is at 65536+1000):
    // the write splits the damaged record; its remnants must not get fresh
    // CRCs that vouch for the wrong byte.
    v.write(a, 65536 + 30_000, &[7u8; 100]).unwrap();
    let e = v
        .read(a, 65536, 2000)
        .expect_err("left remnant still damaged");
    assert!(matches!(e, FsError::Damaged { .. }), "{e:?}");
    let e = v
        .read(a, 65536 + 30_100, 100)
        .expect_err("right remnant too");
    assert!(matches!(e, FsError::Damaged { .. }), "{e:?}");
    assert_eq!(v.read(a, 65536 + 30_000, 100).unwrap(), vec![7u8; 100]);
    // copy_file_range of damaged bytes makes a damaged copy, not a clean one.
    let c = v.create(v.root(), b"c", 0o644, 0, 0).unwrap();
    v.copy_range(a, 65536, c.ino, 0, 2000).unwrap();
    assert!(matches!(v.read(c.ino, 0, 10), Err(FsError::Damaged { .. })));
    // Rewriting the damaged range whole repairs the file.
    v.write(a, 65536, &pattern(65536, 1)).unwrap();
    assert_eq!(v.read(a, 0, 196_608).unwrap().len(), 196_608);
    assert_eq!(v.read(a, 65536, 65536).unwrap(), pattern(65536, 1));
    v.check_invariants().unwrap();
    v.close().unwrap();
    // The marks persist: after a remount the copy is still damaged, the
    // repaired file is whole.
    let v = open(&p);
    let c = v.lookup(v.root(), b"c").unwrap().ino;
    assert!(matches!(v.read(c, 0, 10), Err(FsError::Damaged { .. })));
    let a = v.lookup(v.root(), b"a").unwrap().ino;
    assert_eq!(v.read(a, 65536, 65536).unwrap(), pattern(65536, 1));
    v.check_invariants().unwrap();
}

#[test]
fn a_panic_inside_an_operation_stops_the_volume() {
    let d = tempfile::tempdir().unwrap();
    let p = fresh(d.path());
    let v = open(&p);
    let f = v.create(v.root(), b"acked", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, b"acknowledged").unwrap();
    let r: Result<(), FsError> = v.guard("test op", || panic!("injected fault"));
    let e = r.expect_err("the panic becomes an error");
    assert!(matches!(e, FsError::Failed(_)), "{e:?}");
    assert!(e.to_string().contains("injected fault"), "{e}");
    assert_eq!(e.errno(), libc::EIO);
    // Every later call fails, reads included: nothing is served from DRAM
    // state the panic may have left half-changed.
    assert!(matches!(v.read(f.ino, 0, 5), Err(FsError::Failed(_))));
    assert!(matches!(
        v.create(v.root(), b"new", 0o644, 0, 0),
        Err(FsError::Failed(_))
    ));
    assert!(matches!(
        v.lookup(v.root(), b"acked"),
        Err(FsError::Failed(_))
    ));
    assert!(v.failure().unwrap().contains("injected fault"));
    // Close refuses to mark the image clean.
    assert!(matches!(v.close(), Err(FsError::Failed(_))));
    let sb = pktfs_layout::superblock::raw_from_bytes(&std::fs::read(&p).unwrap()[..256]).unwrap();
    assert_ne!(sb.state.get(), pktfs_layout::superblock::STATE_CLEAN);
    // The next open recovers; what was acknowledged is there; fsck is clean.
    let v = open(&p);
    let f = v.lookup(v.root(), b"acked").unwrap();
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"acknowledged");
    assert!(v.lookup(v.root(), b"new").is_err());
    v.close().unwrap();
    let mut pm = pktfs_fs::media::Pm::open(&p, &Default::default()).unwrap();
    let rep = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    assert!(rep.clean(), "{rep:?}");
}

#[test]
fn a_failed_persist_stops_the_volume_before_it_acknowledges() {
    let d = tempfile::tempdir().unwrap();
    let p = fresh(d.path());
    let v = open(&p);
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, b"first").unwrap();
    v.pm().inject_persist_failure();
    let r = v.guard("write", || v.write(f.ino, 0, b"second, never acknowledged"));
    let e = r.expect_err("a failed persist must not acknowledge");
    assert!(e.to_string().contains("persist"), "{e}");
    assert!(matches!(v.read(f.ino, 0, 5), Err(FsError::Failed(_))));
    assert!(matches!(v.write(f.ino, 0, b"x"), Err(FsError::Failed(_))));
    drop(v);
    let v = open(&p);
    let f = v.lookup(v.root(), b"f").unwrap();
    let got = v.read(f.ino, 0, 100).unwrap();
    // The unacknowledged write may or may not have reached its commit
    // point; either way the file is one of the two whole versions.
    assert!(
        got == b"first" || got == b"second, never acknowledged",
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    v.check_invariants().unwrap();
}

/// One damaged inode, one damaged record and one damaged dirent name, in
/// different places: each makes only its own file (or directory) answer
/// EIO; the image opens (read-only, saying why) and every other file reads
/// back byte-identical.
#[test]
fn structural_damage_stays_local() {
    let d = tempfile::tempdir().unwrap();
    let p = fresh(d.path());
    let v = open(&p);
    let g = *v.geometry();
    let root = v.root();
    let mut want = Vec::new();
    for k in 0..12u8 {
        let name = format!("f{k}");
        let f = v.create(root, name.as_bytes(), 0o644, 0, 0).unwrap();
        let body = pattern(3000 + k as usize * 1000, k);
        v.write(f.ino, 0, &body).unwrap();
        want.push((name, f.ino, body));
    }
    let sub = v.mkdir(root, b"sub", 0o755, 0, 0).unwrap();
    let inner = v.create(sub.ino, b"inner", 0o644, 0, 0).unwrap();
    v.write(inner.ino, 0, b"inside a damaged directory")
        .unwrap();
    // Targets: f1's inode slot, f2's first data record, sub's dirent name.
    let f1 = want[1].1;
    let f2 = want[2].1;
    let rec = v.chain(f2).unwrap()[0].record;
    let name_at = v.chain(sub.ino).unwrap()[0].image_off;
    v.close().unwrap();
    // Inside both attribute slots (either may be the live one).
    for slot in 0..2 {
        let at = pktfs_layout::inode::SLOTS_OFF + slot * pktfs_layout::inode::SLOT_SIZE + 8;
        flip(&p, g.inode_pos(f1 as u32).0 + at);
    }
    flip(&p, g.record_pos(pktfs_layout::RecordId(rec)).0 + 20); // payload_crc field: record CRC fails
    flip(&p, name_at); // "inner" no longer matches its name CRC
    let before = std::fs::read(&p).unwrap();

    let v = open(&p);
    let rep = v.open_report();
    let bad: Vec<u32> = rep.damaged_inodes.iter().map(|(i, _)| *i).collect();
    assert_eq!(bad.len(), 3, "{:?}", rep.damaged_inodes);
    assert!(
        bad.contains(&(f1 as u32)) && bad.contains(&(f2 as u32)) && bad.contains(&(sub.ino as u32))
    );
    assert!(v.is_read_only(), "structural damage opens read-only");
    assert!(rep
        .read_only_because
        .as_deref()
        .unwrap()
        .contains("fsck.pktfs"));
    for (name, ino, body) in &want {
        let r = v.lookup(root, name.as_bytes());
        if *ino == f1 || *ino == f2 {
            let e = r.expect_err("damaged inode");
            assert!(matches!(e, FsError::DamagedInode { .. }), "{e:?}");
            assert_eq!(e.errno(), libc::EIO);
        } else {
            let a = r.unwrap();
            assert_eq!(&v.read(a.ino, 0, 1 << 20).unwrap(), body, "{name}");
        }
    }
    // The damaged directory is listed in its parent but answers EIO.
    let names: Vec<Vec<u8>> = v
        .list_dir(root)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(names.contains(&b"sub".to_vec()));
    assert_eq!(v.lookup(root, b"sub").unwrap_err().errno(), libc::EIO);
    assert!(matches!(
        v.create(root, b"x", 0o644, 0, 0),
        Err(FsError::ReadOnly)
    ));
    drop(v);
    assert_eq!(
        std::fs::read(&p).unwrap(),
        before,
        "a damaged open wrote nothing"
    );
}

/// A fault on the mapping (here: the image file truncated under a live
/// Volume) ends the process with SIGBUS, as it must (nothing can resume
/// from it), but first names the image and the offset on stderr.
#[test]
fn sigbus_on_the_mapping_is_named_before_the_process_dies() {
    use std::os::unix::process::ExitStatusExt;
    const CHILD: &str = "PKTFS_TEST_SIGBUS_IMAGE";
    if let Ok(p) = std::env::var(CHILD) {
        let p = std::path::PathBuf::from(p);
        let v = open(&p);
        let f = v.lookup(v.root(), b"big").unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(8192)
            .unwrap();
        let _ = v.read(f.ino, 0, 1 << 20);
        unreachable!("the read of a truncated mapping must fault");
    }
    let d = tempfile::tempdir().unwrap();
    let p = fresh(d.path());
    let v = open(&p);
    let f = v.create(v.root(), b"big", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &pattern(1 << 20, 3)).unwrap();
    v.close().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &crate::harness::test_name(), "--nocapture"])
        .env(CHILD, &p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGBUS),
        "{:?}\n{err}",
        out.status
    );
    let want = format!(
        "fault (SIGBUS) on the mapping of {} at image offset",
        p.display()
    );
    assert!(err.contains(&want), "{err}");
}
