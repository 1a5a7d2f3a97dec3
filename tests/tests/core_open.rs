//! Opening bad images: a clear error naming the problem, never a panic,
//! never a write into an image pktfs does not understand.

use pktfs_fs::{FormatOptions, FsError, OpenOptions, Volume};
use pktfs_layout::superblock::{BACKUP_OFFSET, FORMAT_VERSION};
use pktfs_layout::{GeometryParams, SuperblockRaw};

fn image(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: GeometryParams::for_size(8 << 20),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let f = v.create(v.root(), b"keep", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, b"stored data").unwrap();
    v.close().unwrap();
    p
}

fn open_err(p: &std::path::Path) -> String {
    let before = std::fs::read(p).unwrap();
    let e = Volume::open(p, &OpenOptions::default()).expect_err("must refuse");
    assert_eq!(
        std::fs::read(p).unwrap(),
        before,
        "a refused open wrote into the image"
    );
    e.to_string()
}

fn patch_sb(p: &std::path::Path, off: u64, f: impl Fn(&mut SuperblockRaw)) {
    use zerocopy_shim::*;
    let mut b = std::fs::read(p).unwrap();
    let mut raw = read_sb(&b[off as usize..]);
    f(&mut raw);
    write_sb(&mut b[off as usize..], raw);
    std::fs::write(p, b).unwrap();
}

/// Raw superblock edits with the CRC recomputed, as a newer or foreign
/// pktfs would have written them.
mod zerocopy_shim {
    use pktfs_layout::SuperblockRaw;
    pub fn read_sb(b: &[u8]) -> SuperblockRaw {
        pktfs_layout::superblock::raw_from_bytes(&b[..256]).unwrap()
    }
    pub fn write_sb(b: &mut [u8], mut raw: SuperblockRaw) {
        pktfs_layout::superblock::seal(&mut raw);
        b[..256].copy_from_slice(pktfs_layout::superblock::raw_bytes(&raw));
    }
}

#[test]
fn not_pktfs() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("junk");
    std::fs::write(&p, vec![0x5au8; 4 << 20]).unwrap();
    let e = open_err(&p);
    assert!(e.contains("not a pktfs image"), "{e}");
    // Not something fsck could repair: the advice is about the path.
    assert!(e.contains("mkfs.pktfs") && !e.contains("fsck"), "{e}");
    std::fs::write(&p, vec![0u8; 100]).unwrap();
    let e = open_err(&p);
    assert!(e.contains("too small"), "{e}");
}

#[test]
fn truncated() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(5 << 20).unwrap();
    let e = open_err(&p);
    assert!(e.contains("truncated"), "{e}");
    // How to get back to an image fsck can repair.
    assert!(
        e.contains("truncate -s") && e.contains("fsck.pktfs -y"),
        "{e}"
    );
}

#[test]
fn newer_version_and_unknown_features() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    for off in [0, BACKUP_OFFSET] {
        patch_sb(&p, off, |r| r.version = (FORMAT_VERSION + 1).into());
    }
    let e = open_err(&p);
    assert!(e.contains("newer pktfs") && e.contains("upgrade"), "{e}");

    let p = image(d.path());
    for off in [0, BACKUP_OFFSET] {
        patch_sb(&p, off, |r| {
            r.incompat = (r.incompat.get() | 1 << 20).into()
        });
    }
    let e = open_err(&p);
    assert!(e.contains("features this build does not know"), "{e}");

    // An unknown read-only-compatible feature: a writable open is refused
    // without writing; a read-only open works and reads the data.
    let p = image(d.path());
    for off in [0, BACKUP_OFFSET] {
        patch_sb(&p, off, |r| {
            r.ro_compat = (r.ro_compat.get() | 1 << 20).into()
        });
    }
    let e = open_err(&p);
    assert!(
        e.contains("can only read") && e.contains("read-only"),
        "{e}"
    );
    let before = std::fs::read(&p).unwrap();
    let ro = OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let v = Volume::open(&p, &ro).unwrap();
    let f = v.lookup(v.root(), b"keep").unwrap();
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"stored data");
    drop(v);
    assert_eq!(std::fs::read(&p).unwrap(), before, "read-only open wrote");
}

/// An image made before the dirent-carried directory times (ro_compat 0)
/// opens as before, and its first writable open records the feature.
#[test]
fn older_image_gains_the_dir_time_feature() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    for off in [0, BACKUP_OFFSET] {
        patch_sb(&p, off, |r| r.ro_compat = 0.into());
    }
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let f = v.lookup(v.root(), b"keep").unwrap();
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"stored data");
    v.close().unwrap();
    let b = std::fs::read(&p).unwrap();
    for off in [0, BACKUP_OFFSET as usize] {
        let raw = pktfs_layout::superblock::raw_from_bytes(&b[off..off + 256]).unwrap();
        assert_eq!(
            raw.ro_compat.get(),
            pktfs_layout::superblock::RO_COMPAT_SUPPORTED.bits()
        );
    }
}

#[test]
fn bad_primary_opens_from_backup_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    let mut b = std::fs::read(&p).unwrap();
    b[40] ^= 0xff; // inside the primary superblock: CRC mismatch
    std::fs::write(&p, &b).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let note = v
        .open_report()
        .used_backup_superblock
        .clone()
        .expect("report says the backup was used");
    assert!(
        note.contains("backup") && note.contains("checksum"),
        "{note}"
    );
    let f = v.lookup(v.root(), b"keep").unwrap();
    assert_eq!(v.read(f.ino, 0, 100).unwrap(), b"stored data");
    v.close().unwrap();
    // The primary was rewritten from the backup.
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert!(v.open_report().used_backup_superblock.is_none());
    drop(v);
    // Both bad: refused with the primary's problem.
    let mut b = std::fs::read(&p).unwrap();
    b[40] ^= 0xff;
    b[BACKUP_OFFSET as usize + 40] ^= 0xff;
    std::fs::write(&p, &b).unwrap();
    let e = open_err(&p);
    assert!(e.contains("checksum mismatch"), "{e}");
}

#[test]
fn second_opener_gets_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let e = Volume::open(&p, &OpenOptions::default()).unwrap_err();
    assert!(matches!(e, FsError::Media(_)), "{e:?}");
    assert!(
        e.to_string().contains("in use by another pktfs process"),
        "{e}"
    );
    // Read-only without the lock still works (tools like `pktfs chain`).
    let ro = Volume::open(
        &p,
        &OpenOptions {
            read_only: true,
            no_lock: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(ro.lookup(ro.root(), b"keep").is_ok());
    assert!(matches!(
        ro.create(ro.root(), b"x", 0o644, 0, 0),
        Err(FsError::ReadOnly)
    ));
    drop(v);
}

#[test]
fn damaged_chain_opens_read_only_with_fsck_advice() {
    let d = tempfile::tempdir().unwrap();
    let p = image(d.path());
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let f = v.lookup(v.root(), b"keep").unwrap();
    let rec = v.chain(f.ino).unwrap()[0].record;
    let pos = v.geometry().record_offset + rec * 64;
    v.close().unwrap();
    let mut b = std::fs::read(&p).unwrap();
    b[pos as usize + 20] ^= 1; // payload CRC field: record CRC now wrong
    std::fs::write(&p, &b).unwrap();
    // Damage stays local: the image opens, read-only (writing could reuse
    // what the damaged chain still owns), and the file answers EIO with
    // the cause and fsck advice. Nothing is written.
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert!(v.is_read_only());
    let e = v.lookup(v.root(), b"keep").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("checksum mismatch") && msg.contains("fsck.pktfs"),
        "{msg}"
    );
    assert_eq!(e.errno(), libc::EIO);
    drop(v);
    assert_eq!(
        std::fs::read(&p).unwrap(),
        b,
        "a damaged open wrote into the image"
    );
}

/// More wrong link counts than one journal slot has entries (60): open
/// commits its fixes in chunks, fixes them all, and fsck is clean after.
#[test]
fn open_fixes_more_link_counts_than_a_journal_slot_holds() {
    use pktfs_layout::inode::SLOTS_OFF;
    use pktfs_layout::{AttrSlot, PmOffset};
    let dir = tempfile::tempdir().unwrap();
    let p = image(dir.path());
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let g = *v.geometry();
    let inos: Vec<u64> = (0..200)
        .map(|k| {
            let f = v
                .create(v.root(), format!("f{k}").as_bytes(), 0o644, 0, 0)
                .unwrap();
            v.write(f.ino, 0, &[k as u8; 10]).unwrap();
            f.ino
        })
        .collect();
    v.close().unwrap();
    // Raw-edit each live attribute slot: nlink 7, CRC recomputed.
    let mut b = std::fs::read(&p).unwrap();
    for &ino in &inos {
        let pos = g.inode_pos(ino as u32).0 as usize;
        let sel = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
        let (generation, live) = (sel >> 1, (sel & 1) as usize);
        let so = pos + SLOTS_OFF as usize + live * 64;
        let mut a = AttrSlot::from_bytes(&b[so..so + 64], PmOffset(so as u64), generation).unwrap();
        a.nlink = 7;
        b[so..so + 64].copy_from_slice(&a.to_bytes(generation));
    }
    std::fs::write(&p, &b).unwrap();
    let r = pktfs_fsck::check(
        &mut pktfs_fs::media::Pm::from_bytes(b.clone()),
        &pktfs_fsck::Options::check(),
    );
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| f.code == "inode.nlink")
            .count(),
        200
    );
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert_eq!(v.open_report().nlink_fixed, 200);
    for &ino in &inos {
        assert_eq!(v.getattr(ino).unwrap().nlink, 1);
    }
    v.check_invariants().unwrap();
    v.close().unwrap();
    let mut pm = pktfs_fs::media::Pm::from_bytes(std::fs::read(&p).unwrap());
    let r = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    assert!(r.clean(), "{}", r.to_text());
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert_eq!(v.open_report().nlink_fixed, 0, "the fixes were durable");
}
