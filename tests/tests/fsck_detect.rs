//! fsck on planted damage: each test damages a real image in one way and
//! checks that `-n` reports it (by code, on the right inode), that `-y` (or
//! `-p` for the safe repairs) fixes it with exit 1, that a second `-n` is
//! clean, that the image mounts, and what survives.

use pktfs_fs::media::Pm;
use pktfs_fs::{FsError, Volume};
use pktfs_fsck::{exit, Options, Report, Severity};
use pktfs_layout::inode::SLOTS_OFF;
use pktfs_layout::{AttrSlot, Geometry, PmOffset, Record, RecordId};
use pktfs_tests::model::ace::seeded;
use pktfs_tests::model::crash::{for_each_point, record};
use pktfs_tests::model::{dump, pattern, Op};

#[derive(Clone)]
struct Img {
    b: Vec<u8>,
    g: Geometry,
}

fn base() -> Img {
    let (img, _) = seeded();
    let b = img.to_vec();
    let g = pktfs_layout::Superblock::from_bytes(&b[..256], 0, b.len() as u64)
        .unwrap()
        .geometry;
    Img { b, g }
}

impl Img {
    fn vol(&self) -> Volume {
        Volume::open_pm(Pm::from_bytes(self.b.clone()), false).unwrap()
    }
    fn ino(&self, path: &str) -> u64 {
        let v = self.vol();
        let mut cur = v.root();
        for c in path.split('/').filter(|c| !c.is_empty()) {
            cur = v.lookup(cur, c.as_bytes()).unwrap().ino;
        }
        cur
    }
    /// Record ids of a file's data chain (or a directory's dirents), in order.
    fn chain(&self, path: &str) -> Vec<u64> {
        let v = self.vol();
        v.chain(self.ino(path))
            .unwrap()
            .iter()
            .map(|c| c.record)
            .collect()
    }
    fn rec_off(&self, id: u64) -> usize {
        self.g.record_pos(RecordId(id)).0 as usize
    }
    fn record(&self, id: u64) -> (Record, RecordId) {
        let o = self.rec_off(id);
        Record::from_bytes(&self.b[o..o + 64], PmOffset(o as u64), &self.g).unwrap()
    }
    fn set_record(&mut self, id: u64, f: impl FnOnce(&mut Record)) {
        let (mut r, next) = self.record(id);
        f(&mut r);
        let o = self.rec_off(id);
        self.b[o..o + 64].copy_from_slice(&r.to_bytes(next));
    }
    /// Flip bits `x` of byte `at` of record `id`.
    fn flip_record(&mut self, id: u64, at: usize, x: u8) {
        let o = self.rec_off(id);
        self.b[o + at] ^= x;
    }
    fn set_next(&mut self, id: u64, next: u64) {
        let o = self.rec_off(id);
        self.b[o..o + 8].copy_from_slice(&next.to_le_bytes());
    }
    fn payload_off(&self, id: u64) -> usize {
        let (r, _) = self.record(id);
        self.g.buffer_pos(r.buffer, r.buf_off).0 as usize
    }
    fn inode_off(&self, ino: u64) -> usize {
        self.g.inode_pos(ino as u32).0 as usize
    }
    /// Rewrite the live attribute slot in place (same generation).
    fn set_attr(&mut self, ino: u64, f: impl FnOnce(&mut AttrSlot)) {
        let pos = self.inode_off(ino);
        let sel = u64::from_le_bytes(self.b[pos..pos + 8].try_into().unwrap());
        let (generation, live) = (sel >> 1, (sel & 1) as usize);
        let so = pos + SLOTS_OFF as usize + live * 64;
        let mut a =
            AttrSlot::from_bytes(&self.b[so..so + 64], PmOffset(so as u64), generation).unwrap();
        f(&mut a);
        self.b[so..so + 64].copy_from_slice(&a.to_bytes(generation));
    }
    fn live_slot_off(&self, ino: u64) -> usize {
        let pos = self.inode_off(ino);
        let sel = u64::from_le_bytes(self.b[pos..pos + 8].try_into().unwrap());
        pos + SLOTS_OFF as usize + (sel & 1) as usize * 64
    }
    fn check(&self) -> Report {
        pktfs_fsck::check(&mut Pm::from_bytes(self.b.clone()), &Options::check())
    }
    /// Repair in `opts` mode; returns the report and the repaired image.
    fn repair(&self, opts: &Options) -> (Report, Img) {
        let mut pm = Pm::from_bytes(self.b.clone());
        let r = pktfs_fsck::repair(&mut pm, opts);
        (
            r,
            Img {
                b: pm.snapshot(),
                g: self.g,
            },
        )
    }
}

/// `-n` finds `code` (on inode `ino` if given), exits 4; `opts` repair
/// exits 1 and leaves a clean, mountable image.
fn detect_and_fix(img: &Img, code: &str, ino: Option<u64>, opts: &Options) -> Img {
    let r = img.check();
    assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
    let f = r
        .findings
        .iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code} in:\n{}", r.to_text()));
    if let Some(i) = ino {
        assert_eq!(f.ino, Some(i as u32), "{}", r.to_text());
    }
    assert!(f.repair.is_some(), "no repair offered for {code}");
    let (r2, fixed) = img.repair(opts);
    assert_eq!(r2.exit_code, exit::CORRECTED, "{}", r2.to_text());
    assert!(
        r2.findings.iter().any(|f| f.code == code && f.fixed),
        "{}",
        r2.to_text()
    );
    assert!(!r2.changes.is_empty());
    let r3 = fixed.check();
    assert!(
        r3.clean() && r3.exit_code == exit::CLEAN,
        "not clean after repair:\n{}\n{}",
        r2.to_text(),
        r3.to_text()
    );
    let v = fixed.vol();
    v.check_invariants().unwrap();
    dump_readable(&fixed);
    fixed
}

/// Dump the whole tree (reading every file). Reads of ranges marked
/// damaged fail with EIO, so an image holding some is dumped from a copy
/// with them dropped.
fn dump_readable(img: &Img) {
    if img.check().damaged.is_empty() {
        dump(&img.vol()).unwrap();
        return;
    }
    let (r, holed) = img.repair(&Options {
        drop_damaged: true,
        ..Options::yes()
    });
    assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
    assert!(holed.check().damaged.is_empty());
    dump(&holed.vol()).unwrap();
}

/// `len` bytes of `path` at `off` (a range that holds no damage).
fn read_at(img: &Img, path: &str, off: u64, len: u64) -> Vec<u8> {
    img.vol().read(img.ino(path), off, len).unwrap()
}

fn read(img: &Img, path: &str) -> Vec<u8> {
    let v = img.vol();
    let i = img.ino(path);
    v.read(i, 0, 1 << 30).unwrap()
}

#[test]
fn a_clean_image_is_clean_in_every_mode() {
    let img = base();
    for opts in [Options::check(), Options::preen(), Options::yes()] {
        let (r, after) = img.repair(&opts);
        assert_eq!(r.exit_code, exit::CLEAN, "{}", r.to_text());
        assert!(r.clean() && r.changes.is_empty());
        assert_eq!(after.b, img.b, "a clean image must not be written");
        assert!(
            r.counts.inodes >= 12 && r.counts.payload_bytes_checked > 9000,
            "{:?}",
            r.counts
        );
    }
    assert!(img.check().to_json().contains("\"exit_code\": 0"));
}

#[test]
fn superblocks_are_restored_from_each_other() {
    let mut img = base();
    img.b[100] ^= 0x10;
    let r = img.check();
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "superblock.primary")
        .expect("primary");
    assert!(f.mount_recovers && r.errors_beyond_recovery().is_empty());
    let fixed = detect_and_fix(&img, "superblock.primary", None, &Options::preen());
    assert_eq!(fixed.b[..256], base().b[..256]);
    let mut img = base();
    img.b[4096 + 40] ^= 1;
    detect_and_fix(&img, "superblock.backup", None, &Options::preen());
    // Both gone: see both_superblocks_lost_the_geometry_is_found.
    // Not pktfs at all: operational error.
    let r = pktfs_fsck::check(&mut Pm::from_bytes(vec![0u8; 1 << 20]), &Options::check());
    assert_eq!(r.exit_code, exit::OPERATIONAL);
}

/// A file of three records: [0,1000) [1000,3000) [3000,6000).
fn three_records() -> Img {
    let img = base();
    let mut v = img.vol();
    let file = img.ino("/A/foo");
    v.write(file, 1000, &pattern(11, 1000, 2000)).unwrap();
    let b = v.snapshot();
    drop(v);
    let img = Img { b, g: img.g };
    assert_eq!(img.chain("/A/foo").len(), 3);
    img
}

fn truncate(v: &Volume, ino: u64, size: u64) {
    v.setattr(
        ino,
        &pktfs_fs::SetAttr {
            size: Some(size),
            ..Default::default()
        },
    )
    .unwrap();
}

/// Reads of `[start, end)` of `path` fail with EIO (`Damaged`, naming a
/// range inside it), through every way out of the Volume: a read of the
/// range, a read spanning it, a transmit hold (HTTP GET answers 500 on its
/// error) and the content digest (the ETag).
fn fails_with_eio(img: &Img, path: &str, start: u64, end: u64) {
    let v = img.vol();
    let ino = img.ino(path);
    let damaged = |e: &FsError| {
        matches!(*e, FsError::Damaged { start: s, end: t, .. } if s >= start && t <= end && s < t)
            && e.errno() == libc::EIO
    };
    for (off, len) in [(start, end - start), (start, 1), (end - 1, 1), (0, 1 << 30)] {
        let e = v
            .read(ino, off, len)
            .expect_err("a lost range must not read");
        assert!(damaged(&e), "{path} [{off}, +{len}): {e:?}");
    }
    let e = v
        .tx_hold(ino, start, end - start)
        .expect_err("hold of a lost range");
    assert!(damaged(&e), "{e:?}");
    let e = v.content_digest(ino).expect_err("digest over a lost range");
    assert!(damaged(&e), "{e:?}");
}

/// A bad record at the start, the middle and the end of /A/foo's chain
/// ([0,1000) [1000,3000) [3000,6000)): `-y` cuts it out, links back the
/// records after it at their offsets and marks the range lost with it
/// damaged; reads before it and after it are right, reads of it fail with
/// EIO. A second `-y` changes nothing; `--drop-damaged` makes the range a
/// hole instead, and says so; `-p` does not cut chains.
#[test]
fn a_bad_record_is_cut_out_and_what_follows_linked_back() {
    for (k, lost) in [
        (0usize, (0u64, 1000u64)),
        (1, (1000, 3000)),
        (2, (3000, 6000)),
    ] {
        let mut img = three_records();
        let want = read(&img, "/A/foo");
        assert_eq!(want.len(), 6000);
        without_damage_flags(&mut img);
        let ids = img.chain("/A/foo");
        let before: Vec<Record> = ids.iter().map(|&id| img.record(id).0).collect();
        let file = img.ino("/A/foo");
        let o = img.rec_off(ids[k]);
        img.b[o + 20] ^= 0x01; // payload_crc field: the record CRC no longer matches
                               // Before: the bad record and the range lost with it; the Volume
                               // answers EIO for the whole file (its chain is damaged).
        let r = img.check();
        assert!(
            r.findings
                .iter()
                .any(|f| f.code == "record.bad" && f.record == Some(ids[k])),
            "{}",
            r.to_text()
        );
        let d: Vec<_> = r.damaged.iter().filter(|d| d.lost.is_some()).collect();
        assert_eq!(d.len(), 1, "{}", r.to_text());
        assert_eq!(
            (d[0].ino as u64, d[0].start, d[0].end),
            (file, lost.0, lost.1)
        );
        assert_eq!(d[0].state, pktfs_fsck::DamageState::Found);
        let line = format!("/A/foo: bytes [{}, {}) lost: ", lost.0, lost.1);
        assert!(r.to_text().contains(&line), "{}", r.to_text());
        let v = Volume::open_pm(Pm::from_bytes(img.b.clone()), false).unwrap();
        assert_eq!(v.read(file, 0, 1).unwrap_err().errno(), libc::EIO);
        drop(v);

        // -y: the mark, the feature bit, the records after it linked back.
        let fixed = detect_and_fix(&img, "data.lost", Some(file), &Options::yes());
        let (r, _) = img.repair(&Options::yes());
        assert!(
            r.findings.iter().any(|f| f.code == "record.bad" && f.fixed),
            "{}",
            r.to_text()
        );
        let d = r.damaged.iter().find(|d| d.lost.is_some()).unwrap();
        assert_eq!(d.state, pktfs_fsck::DamageState::Marked, "{}", r.to_text());
        assert!(
            r.to_text().contains("marked damaged (reads fail with EIO)"),
            "{}",
            r.to_text()
        );
        assert_eq!(
            marked(&fixed, "/A/foo"),
            vec![(lost.0, (lost.1 - lost.0) as u32)]
        );
        assert!(damage_flags_feature(&fixed));
        let chain = fixed.chain("/A/foo");
        assert_eq!(chain.len(), 3, "the mark in the bad record's place");
        for (j, &id) in ids.iter().enumerate().filter(|&(j, _)| j != k) {
            assert!(chain.contains(&id), "record {id} ({j}) linked back");
            assert_eq!(fixed.record(id).0, before[j], "unchanged");
        }
        assert_eq!(fixed.vol().getattr(file).unwrap().size, 6000, "size kept");
        if lost.0 > 0 {
            assert_eq!(
                read_at(&fixed, "/A/foo", 0, lost.0),
                want[..lost.0 as usize]
            );
        }
        if lost.1 < 6000 {
            assert_eq!(
                read_at(&fixed, "/A/foo", lost.1, 6000 - lost.1),
                want[lost.1 as usize..]
            );
        }
        fails_with_eio(&fixed, "/A/foo", lost.0, lost.1);
        // The image opens writable: overwriting the lost range repairs it.
        let v = fixed.vol();
        v.write(file, lost.0, &want[lost.0 as usize..lost.1 as usize])
            .unwrap();
        assert_eq!(v.read(file, 0, 6000).unwrap(), want);
        v.check_invariants().unwrap();
        drop(v);

        // A second -y finds the mark in place and writes nothing.
        let r = fixed.check();
        assert!(r.clean(), "{}", r.to_text());
        let (r, again) = fixed.repair(&Options::yes());
        assert_eq!(r.exit_code, exit::CLEAN, "{}", r.to_text());
        assert!(again.b == fixed.b, "a second -y rewrote the image");

        // --drop-damaged, on the damaged image or the marked one: a hole.
        let drop = Options {
            drop_damaged: true,
            ..Options::yes()
        };
        for from in [&img, &fixed] {
            let (r, holed) = from.repair(&drop);
            assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
            assert!(holed.check().clean(), "{}", holed.check().to_text());
            let d = r.damaged.iter().find(|d| (d.start, d.end) == lost).unwrap();
            assert_eq!(d.state, pktfs_fsck::DamageState::Dropped, "{}", r.to_text());
            assert!(r.to_text().contains("a hole"), "{}", r.to_text());
            let got = read(&holed, "/A/foo");
            assert_eq!(got.len(), 6000);
            assert_eq!(got[..lost.0 as usize], want[..lost.0 as usize]);
            assert!(got[lost.0 as usize..lost.1 as usize]
                .iter()
                .all(|&b| b == 0));
            assert_eq!(got[lost.1 as usize..], want[lost.1 as usize..]);
            assert!(marked(&holed, "/A/foo").is_empty());
            holed.vol().check_invariants().unwrap();
        }
        // -p does not cut chains.
        let (r, after) = img.repair(&Options::preen());
        assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
        assert!(after.b == img.b);
    }
}

/// What the chain says and what it does not: a hole before the bad record
/// is lost with it (nothing tells it from data); a bad record whose link is
/// gone loses everything to the size; two bad records in a row are stepped
/// over; a record whose only fault is its link is kept.
#[test]
fn what_a_broken_chain_still_says_is_linked_back() {
    // A sparse file: [0,1000) hole [5000,7000) hole [9000,12000), size 20000.
    let img = base();
    let mut v = img.vol();
    let file = img.ino("/A/foo");
    truncate(&v, file, 0);
    v.write(file, 0, &pattern(1, 0, 1000)).unwrap();
    v.write(file, 5000, &pattern(2, 5000, 2000)).unwrap();
    v.write(file, 9000, &pattern(3, 9000, 3000)).unwrap();
    truncate(&v, file, 20_000);
    let sparse = Img {
        b: v.snapshot(),
        g: img.g,
    };
    drop(v);
    let want = read(&sparse, "/A/foo");
    let ids = sparse.chain("/A/foo");
    assert_eq!(ids.len(), 3);
    let check = |case: &str, img: &Img, lost: &[(u64, u64)], gone: &[u64]| {
        let fixed = detect_and_fix(img, "data.lost", Some(file), &Options::yes());
        let mut want_marks: Vec<(u64, u32)> =
            lost.iter().map(|&(a, b)| (a, (b - a) as u32)).collect();
        want_marks.sort();
        assert_eq!(marked(&fixed, "/A/foo"), want_marks, "{case}");
        for &(a, b) in lost {
            fails_with_eio(&fixed, "/A/foo", a, b);
        }
        // Every byte outside the lost ranges reads as it was.
        let mut off = 0;
        for &(a, b) in lost.iter().chain([(20_000, 20_000)].iter()) {
            if a > off {
                assert_eq!(
                    read_at(&fixed, "/A/foo", off, a - off),
                    want[off as usize..a as usize],
                    "[{off}, {a})"
                );
            }
            off = b;
        }
        // Linked back: the same records, unchanged (a record cut out is
        // free, and may hold a mark now).
        let chain = fixed.chain("/A/foo");
        for &id in &ids {
            let back = chain.contains(&id) && fixed.record(id).0 == sparse.record(id).0;
            assert_eq!(back, !gone.contains(&id), "{case}: record {id}");
        }
        fixed
    };
    // The middle record bad: the hole before it is lost with it.
    let mut img = sparse.clone();
    img.flip_record(ids[1], 30, 0x04);
    check("middle bad", &img, &[(1000, 9000)], &[ids[1]]);
    // Its link gone as well: everything from it to the size.
    img.set_next(ids[1], 0);
    check("link gone", &img, &[(1000, 20_000)], &[ids[1], ids[2]]);
    // Its link into another file's chain: not followed.
    let other = img.chain("/B/baz")[0];
    img.set_next(ids[1], other);
    check(
        "link into another chain",
        &img,
        &[(1000, 20_000)],
        &[ids[1], ids[2]],
    );
    // The first two bad: stepped over to the third.
    let mut img = sparse.clone();
    img.flip_record(ids[0], 40, 0x10);
    img.flip_record(ids[1], 40, 0x10);
    check("first two bad", &img, &[(0, 9000)], &[ids[0], ids[1]]);
    // The last one bad: lost to the size.
    let mut img = sparse.clone();
    img.flip_record(ids[2], 24, 0x01);
    check("last bad", &img, &[(7000, 20_000)], &[ids[2]]);
    // Only the middle record's link is bad (out of the record table): the
    // record is intact and kept; what it linked to is lost.
    let mut img = sparse.clone();
    img.set_next(ids[1], u64::MAX / 2);
    let r = img.check();
    assert!(
        r.findings.iter().any(|f| f.code == "chain.link"),
        "{}",
        r.to_text()
    );
    check("link only", &img, &[(7000, 20_000)], &[ids[2]]);
}

/// A lost range longer than the buffer region (a sparse file's) is marked
/// by several records naming the same bytes, a sixteenth of the region at
/// most: every read of it fails, and the image stays usable.
#[test]
fn a_long_lost_range_is_marked_in_pieces() {
    let img = base();
    let mut v = img.vol();
    let file = img.ino("/A/foo");
    let size = 16 * img.g.buffer_region_bytes();
    truncate(&v, file, size);
    let long = Img {
        b: v.snapshot(),
        g: img.g,
    };
    drop(v);
    let want = read_at(&long, "/A/foo", 0, 4000);
    let ids = long.chain("/A/foo");
    let mut img = long.clone();
    img.flip_record(*ids.last().unwrap(), 30, 0x04);
    let (last, _) = long.record(*ids.last().unwrap());
    let start = last.file_off;
    let fixed = detect_and_fix(&img, "data.lost", Some(file), &Options::yes());
    let marks = marked(&fixed, "/A/foo");
    assert!(marks.len() > 1, "{marks:?}");
    assert_eq!(marks[0].0, start);
    assert_eq!(marks.iter().map(|m| m.1 as u64).sum::<u64>(), size - start);
    fails_with_eio(&fixed, "/A/foo", start, size);
    assert_eq!(read_at(&fixed, "/A/foo", 0, start), want[..start as usize]);
    let before = long.check().counts.buffers_used;
    let after = fixed.check().counts.buffers_used;
    let share = img.g.buffer_count / 16 + 1;
    assert!(after <= before + share, "{before} -> {after} buffers used");
    let v = fixed.vol();
    let root = v.root();
    let n = v.create(root, b"new", 0o644, 0, 0).unwrap();
    v.write(n.ino, 0, &pattern(9, 0, 5000)).unwrap();
    v.check_invariants().unwrap();
}

/// The records of `path` carrying FLAG_DAMAGED, as (file_off, len).
fn marked(img: &Img, path: &str) -> Vec<(u64, u32)> {
    img.chain(path)
        .into_iter()
        .map(|id| img.record(id).0)
        .filter(|r| r.flags & pktfs_layout::record::FLAG_DAMAGED != 0)
        .map(|r| (r.file_off, r.len))
        .collect()
}

fn damage_flags_feature(img: &Img) -> bool {
    [0usize, 4096].iter().all(|&o| {
        let sb =
            pktfs_layout::Superblock::from_bytes(&img.b[o..o + 256], o as u64, img.b.len() as u64)
                .unwrap();
        sb.ro_compat & pktfs_layout::superblock::RoCompatFeatures::DAMAGE_FLAGS.bits() != 0
    })
}

/// Clear DAMAGE_FLAGS in both superblocks (an image no build with damage
/// flags has opened), so that fsck has to set it.
fn without_damage_flags(img: &mut Img) {
    use pktfs_layout::superblock::{raw_bytes, raw_from_bytes, seal, RoCompatFeatures};
    for off in [0usize, 4096] {
        let mut raw = raw_from_bytes(&img.b[off..off + 256]).unwrap();
        raw.ro_compat = (raw.ro_compat.get() & !RoCompatFeatures::DAMAGE_FLAGS.bits()).into();
        seal(&mut raw);
        img.b[off..off + 256].copy_from_slice(raw_bytes(&raw));
    }
}

#[test]
fn a_bad_payload_is_kept_and_marked_damaged() {
    for opts in [Options::yes(), Options::preen()] {
        let mut img = three_records();
        let want = read(&img, "/A/foo");
        without_damage_flags(&mut img);
        let ids = img.chain("/A/foo");
        let o = img.payload_off(ids[1]);
        img.b[o + 5] ^= 0x80;
        let damaged = img.b.clone();
        let file = img.ino("/A/foo");
        // -n: the file, the byte range and both checksums.
        let r = img.check();
        let stored = img.record(ids[1]).0.payload_crc;
        let line = format!("/A/foo: bytes [1000, 3000) damaged: payload checksum mismatch (stored {stored:#010x}, computed ");
        assert!(r.to_text().contains(&line), "{}", r.to_text());
        assert_eq!(r.damaged.len(), 1);
        assert_eq!(
            (r.damaged[0].start, r.damaged[0].end, r.damaged[0].state),
            (1000, 3000, pktfs_fsck::DamageState::Found)
        );
        assert!(r.to_json().contains("\"damaged\""), "{}", r.to_json());
        let fixed = detect_and_fix(&img, "data.payload_crc", Some(file), &opts);
        // Kept: same chain shape, same bytes on the media, the record flagged.
        assert_eq!(fixed.chain("/A/foo").len(), 3);
        assert_eq!(marked(&fixed, "/A/foo"), vec![(1000, 2000)]);
        let rec = fixed.record(fixed.chain("/A/foo")[1]).0;
        assert_eq!(rec.payload_crc, stored, "the stored payload CRC is kept");
        assert!(
            damage_flags_feature(&fixed),
            "DAMAGE_FLAGS set in both copies"
        );
        let (r, _) = img.repair(&opts);
        assert_eq!(r.damaged[0].state, pktfs_fsck::DamageState::Marked);
        assert!(
            r.to_text().contains("kept, marked damaged"),
            "{}",
            r.to_text()
        );
        let pb = fixed.payload_off(fixed.chain("/A/foo")[1]);
        assert_eq!(pb, o, "the payload was not moved");
        assert_eq!(fixed.b[o..o + 2000], damaged[o..o + 2000]);
        // Marked damage is the image's state now: reported, not repaired again.
        let r = fixed.check();
        assert!(r.clean(), "{}", r.to_text());
        assert!(
            r.findings
                .iter()
                .any(|f| f.code == "data.damaged" && f.severity == Severity::Info),
            "{}",
            r.to_text()
        );
        assert_eq!(r.damaged[0].state, pktfs_fsck::DamageState::Marked);
        let (r, again) = fixed.repair(&Options::yes());
        assert_eq!(r.exit_code, exit::CLEAN, "{}", r.to_text());
        assert!(again.b == fixed.b, "nothing rewritten");
        // --drop-damaged turns the marked range into a hole.
        let drop = Options {
            drop_damaged: true,
            ..Options::yes()
        };
        let (r, holed) = fixed.repair(&drop);
        assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
        assert!(holed.check().clean());
        let got = read(&holed, "/A/foo");
        assert!(got[1000..3000].iter().all(|&b| b == 0));
        assert_eq!(got[..1000], read_at(&fixed, "/A/foo", 0, 1000));
        assert_eq!(got[3000..], read_at(&fixed, "/A/foo", 3000, 3000));
        assert_eq!(got[..1000], want[..1000]);
        assert_eq!(got[3000..], want[3000..]);
        assert_eq!(r.damaged[0].state, pktfs_fsck::DamageState::Dropped);
    }
}

#[test]
fn drop_damaged_makes_a_hole_as_before() {
    let mut img = three_records();
    let want = read(&img, "/A/foo");
    let ids = img.chain("/A/foo");
    let o = img.payload_off(ids[1]);
    img.b[o + 5] ^= 0x80;
    let file = img.ino("/A/foo");
    let drop = Options {
        drop_damaged: true,
        ..Options::yes()
    };
    let fixed = detect_and_fix(&img, "data.payload_crc", Some(file), &drop);
    let got = read(&fixed, "/A/foo");
    assert_eq!(got[..1000], want[..1000]);
    assert!(got[1000..3000].iter().all(|&b| b == 0));
    assert_eq!(
        got[3000..],
        want[3000..],
        "the records after the bad one are kept"
    );
    // Preen never drops: it marks instead.
    let (r, after) = img.repair(&Options {
        drop_damaged: true,
        ..Options::preen()
    });
    assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
    assert_eq!(after.chain("/A/foo").len(), 3);
}

/// Payloads of 64 KiB and more are checked in the parallel phase: the same
/// keep-and-mark applies there, and to several damaged records in a row.
#[test]
fn large_and_adjacent_damaged_records_are_marked() {
    let img = base();
    let mut v = img.vol();
    let file = img.ino("/A/foo");
    for k in 0..4u64 {
        v.write(
            file,
            (1 << 20) + k * 256 * 1024,
            &pattern(k as u8, 0, 256 * 1024),
        )
        .unwrap();
    }
    let mut img = Img {
        b: v.snapshot(),
        g: img.g,
    };
    drop(v);
    let ids = img.chain("/A/foo");
    let big: Vec<u64> = ids[ids.len() - 4..].to_vec();
    assert!(big.iter().all(|&id| img.record(id).0.len == 256 * 1024));
    for &id in &big[1..3] {
        let o = img.payload_off(id);
        img.b[o + 77] ^= 1;
    }
    let r = img.check();
    assert_eq!(r.damaged.len(), 2, "{}", r.to_text());
    let fixed = detect_and_fix(&img, "data.payload_crc", Some(file), &Options::yes());
    let recs: Vec<Record> = big[1..3].iter().map(|&id| img.record(id).0).collect();
    assert_eq!(
        marked(&fixed, "/A/foo"),
        recs.iter().map(|r| (r.file_off, r.len)).collect::<Vec<_>>()
    );
    assert_eq!(fixed.chain("/A/foo").len(), ids.len());
}

/// A lost range too long to mark (a huge sparse file on a small image):
/// `-y` leaves the chain as it is and says why (cutting it would make the
/// range read as zeros); `--drop-damaged` makes it a hole.
#[test]
fn a_range_too_long_to_mark_is_left_and_said() {
    let img = three_records();
    let mut v = img.vol();
    let file = img.ino("/A/foo");
    let size = 1u64 << 60;
    truncate(&v, file, size);
    let mut img = Img {
        b: v.snapshot(),
        g: img.g,
    };
    drop(v);
    let want = read_at(&img, "/A/foo", 0, 4000);
    let ids = img.chain("/A/foo");
    let last = *ids.last().unwrap();
    img.flip_record(last, 30, 0x04);
    let (r, after) = img.repair(&Options::yes());
    assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
    let f = r.findings.iter().find(|f| f.code == "data.lost").unwrap();
    assert!(
        !f.fixed && f.message.contains("too long to mark"),
        "{}",
        r.to_text()
    );
    // The chain is left: the file answers EIO, never zeros.
    let v = Volume::open_pm(Pm::from_bytes(after.b.clone()), false).unwrap();
    assert_eq!(v.read(file, 0, 1).unwrap_err().errno(), libc::EIO);
    drop(v);
    let drop = Options {
        drop_damaged: true,
        ..Options::yes()
    };
    let (r, holed) = img.repair(&drop);
    assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
    assert!(holed.check().clean());
    let (before, _) = img.record(ids[ids.len() - 2]);
    let got = read_at(&holed, "/A/foo", 0, 8000);
    assert_eq!(
        got[..before.file_end() as usize],
        want[..before.file_end() as usize]
    );
    assert!(got[before.file_end() as usize..].iter().all(|&b| b == 0));
    assert_eq!(holed.vol().getattr(file).unwrap().size, size);
}

#[test]
fn a_bad_dirent_name_sends_its_file_to_lost_found() {
    let mut img = base();
    let want = read(&img, "/A/bar");
    let bar = img.ino("/A/bar");
    let v = img.vol();
    let a = img.ino("/A");
    let d = v
        .list_dir(a)
        .unwrap()
        .into_iter()
        .find(|e| e.name == b"bar")
        .unwrap();
    drop(v);
    let id = img.chain("/A")[img
        .vol()
        .list_dir(a)
        .unwrap()
        .iter()
        .position(|e| e.name == b"bar")
        .unwrap()];
    assert_eq!(img.record(id).0.dirent_ino() as u64, d.ino);
    let o = img.payload_off(id);
    img.b[o] ^= 0x20; // "bar" -> "Bar": the name CRC fails
    detect_and_fix(&img, "dirent.crc", Some(a), &Options::yes());
    let (r, fixed) = img.repair(&Options::yes());
    assert!(
        r.changes
            .iter()
            .any(|c| c.path.as_deref() == Some(&*format!("/lost+found/#{bar}"))),
        "{}",
        r.to_text()
    );
    assert_eq!(read(&fixed, &format!("/lost+found/#{bar}")), want);
    let v = fixed.vol();
    assert_eq!(v.getxattr(bar, b"user.x").unwrap(), pattern(3, 0, 10));
    assert!(v.lookup(a, b"bar").is_err());
}

#[test]
fn a_cut_directory_chain_salvages_what_followed() {
    let mut img = base();
    let a = img.ino("/A");
    let (file, bar) = (img.ino("/A/foo"), img.ino("/A/bar"));
    let ids = img.chain("/A");
    let o = img.rec_off(ids[0]);
    img.b[o + 30] ^= 0x04; // first dirent of /A: record CRC fails
    detect_and_fix(&img, "record.bad", Some(a), &Options::yes());
    let (_, fixed) = img.repair(&Options::yes());
    let v = fixed.vol();
    let root = v.root();
    let lf = v.lookup(root, b"lost+found").unwrap();
    let names: Vec<String> = v
        .list_dir(lf.ino)
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect();
    // file is still reachable through /B/foolink: not an orphan, its link count drops to 1.
    assert!(names.contains(&format!("#{bar}")), "{names:?}");
    assert!(!names.contains(&format!("#{file}")), "{names:?}");
    assert_eq!(v.getattr(file).unwrap().nlink, 1);
    assert_eq!(v.list_dir(a).unwrap().len(), 0);
}

#[test]
fn link_counts_parents_and_types_are_fixed_safely() {
    let mut img = base();
    let baz = img.ino("/B/baz");
    img.set_attr(baz, |a| a.nlink = 5);
    detect_and_fix(&img, "inode.nlink", Some(baz), &Options::preen());
    let mut img = base();
    let d = img.ino("/C/D");
    img.set_attr(d, |a| a.parent = 1);
    detect_and_fix(&img, "inode.parent", Some(d), &Options::preen());
    // A dirent whose type disagrees with its inode.
    let mut img = base();
    let c = img.ino("/C");
    let v = img.vol();
    let pos = v
        .list_dir(c)
        .unwrap()
        .iter()
        .position(|e| e.name == b"sym")
        .unwrap();
    drop(v);
    let id = img.chain("/C")[pos];
    img.set_record(id, |r| r.aux = Record::dirent_aux(r.dirent_ino(), 8));
    detect_and_fix(&img, "dirent.type", Some(c), &Options::preen());
}

#[test]
fn a_bad_live_slot_falls_back_to_the_previous_one() {
    let mut img = base();
    let baz = img.ino("/B/baz");
    let so = img.live_slot_off(baz);
    img.b[so + 3] ^= 1;
    let fixed = detect_and_fix(&img, "inode.attr", Some(baz), &Options::yes());
    // The previous slot is from before the write (size 0) or after: either
    // way the file mounts and reads back within its size.
    let v = fixed.vol();
    let a = v.getattr(baz).unwrap();
    assert_eq!(v.read(baz, 0, 1 << 20).unwrap().len() as u64, a.size);
}

#[test]
fn cycles_and_records_claimed_twice_are_cut() {
    let mut img = three_records();
    let ids = img.chain("/A/foo");
    let file = img.ino("/A/foo");
    img.set_next(ids[2], ids[0]);
    let want = read(&three_records(), "/A/foo");
    let fixed = detect_and_fix(&img, "chain.cycle", Some(file), &Options::yes());
    assert_eq!(
        read(&fixed, "/A/foo"),
        want,
        "cutting the back link loses nothing"
    );
    // /B/baz's head pointing into /A/foo's chain.
    let mut img = three_records();
    let baz = img.ino("/B/baz");
    let o = img.inode_off(baz) + 8;
    img.b[o..o + 8].copy_from_slice(&ids[1].to_le_bytes());
    detect_and_fix(&img, "record.shared", Some(baz), &Options::yes());
}

#[test]
fn records_past_the_size_are_trimmed_safely() {
    let mut img = base();
    let file = img.ino("/A/foo");
    let want = read(&img, "/A/foo");
    img.set_attr(file, |a| a.size = 3000);
    let fixed = detect_and_fix(&img, "data.past_size", Some(file), &Options::preen());
    assert_eq!(read(&fixed, "/A/foo"), want[..3000]);
}

#[test]
fn journal_pending_is_replayed_and_invalid_is_discarded() {
    let (base_img, model) = seeded();
    let w = record(
        "rename",
        base_img.clone(),
        model,
        &[Op::Rename {
            src: "/A/bar".into(),
            dst: "/B/bar".into(),
            noreplace: false,
            exchange: false,
        }],
    )
    .unwrap();
    let mut pending = None;
    for_each_point(&w.base, &w.events, |p| {
        let img = p.image_with(&[]);
        let r = pktfs_fsck::check(&mut Pm::from_bytes(img.clone()), &Options::check());
        if r.counts.journal_slots_pending > 0 {
            pending = Some(img);
            return false;
        }
        true
    });
    let img = Img {
        b: pending.expect("pending journal"),
        g: base().g,
    };
    let r = img.check();
    assert_eq!(
        r.exit_code,
        exit::CLEAN,
        "pending replay is not an error in -n:\n{}",
        r.to_text()
    );
    assert!(r
        .findings
        .iter()
        .any(|f| f.code == "journal.pending" && f.severity == Severity::Info));
    let (r, fixed) = img.repair(&Options::preen());
    assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
    assert!(fixed.check().clean());
    let v = fixed.vol();
    assert_eq!(
        v.open_report().journal_slots_replayed,
        0,
        "fsck replayed it"
    );
    assert!(v.lookup(fixed.ino("/B"), b"bar").is_ok());
    // A committed slot naming an address that is not a link word.
    let mut img = base();
    let slot = img.g.journal_slot_pos(3).0 as usize;
    // FORMAT.md: header = commit, seq, count, reserved[40], crc over
    // header bytes 0..60 then the entries; entry = addr, value.
    let mut e = Vec::new();
    e.extend_from_slice(&(img.g.buffer_offset + 8).to_le_bytes());
    e.extend_from_slice(&1u64.to_le_bytes());
    let mut h = Vec::new();
    h.extend_from_slice(&pktfs_layout::journal::COMMIT_MAGIC.to_le_bytes());
    h.extend_from_slice(&9u64.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h.extend_from_slice(&[0u8; 40]);
    let crc = pktfs_layout::crc32c_append(pktfs_layout::crc32c(&h), &e);
    h.extend_from_slice(&crc.to_le_bytes());
    img.b[slot + 64..slot + 80].copy_from_slice(&e);
    img.b[slot..slot + 64].copy_from_slice(&h);
    assert!(
        Volume::open_pm(Pm::from_bytes(img.b.clone()), false).is_err(),
        "mount refuses it"
    );
    detect_and_fix(&img, "journal.invalid", None, &Options::preen());
}

#[test]
fn preen_leaves_what_would_drop_data() {
    // A dirent whose name fails its CRC can only be dropped: preen reports
    // it, writes nothing, and exits 4 ("run fsck manually").
    let mut img = base();
    let a = img.ino("/A");
    let id = img.chain("/A")[0];
    let o = img.payload_off(id);
    img.b[o] ^= 0x20;
    let (r, after) = img.repair(&Options::preen());
    assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
    assert!(r
        .findings
        .iter()
        .any(|f| f.code == "dirent.crc" && f.ino == Some(a as u32) && !f.fixed));
    assert!(
        r.notes.iter().any(|n| n.contains("manually")),
        "{:?}",
        r.notes
    );
    assert!(after.b == img.b, "nothing written");
}

#[test]
fn reflinked_ranges_are_shared_not_errors() {
    let img = base();
    let mut v = img.vol();
    let (file, baz) = (img.ino("/A/foo"), img.ino("/B/baz"));
    v.copy_range(file, 0, baz, 100, 4000).unwrap();
    v.copy_range(file, 0, file, 6000, 3000).unwrap();
    let img = Img {
        b: v.snapshot(),
        g: img.g,
    };
    drop(v);
    let r = img.check();
    assert!(r.clean(), "{}", r.to_text());
    assert!(r.counts.shared_ranges >= 2, "{:?}", r.counts);
}

/// An image with a read-only-compatible feature this build does not know:
/// `-n` still checks it, `-y` refuses to write (operational error, exit 8)
/// and leaves every byte as it was.
#[test]
fn unknown_ro_compat_feature_is_checked_but_not_repaired() {
    use pktfs_layout::superblock::{raw_bytes, raw_from_bytes, seal, BACKUP_OFFSET};
    let mut img = base();
    for off in [0usize, BACKUP_OFFSET as usize] {
        let mut raw = raw_from_bytes(&img.b[off..off + 256]).unwrap();
        raw.ro_compat = (raw.ro_compat.get() | 1 << 20).into();
        seal(&mut raw);
        img.b[off..off + 256].copy_from_slice(raw_bytes(&raw));
    }
    let check = pktfs_fsck::check(&mut Pm::from_bytes(img.b.clone()), &Options::check());
    assert!(
        check.operational_error.is_none(),
        "{:?}",
        check.operational_error
    );
    let mut pm = Pm::from_bytes(img.b.clone());
    let r = pktfs_fsck::repair(&mut pm, &Options::yes());
    let msg = r.operational_error.clone().expect("repair refused");
    assert!(msg.contains("can only read") && msg.contains("-n"), "{msg}");
    assert_eq!(r.exit_code, exit::OPERATIONAL);
    assert!(pm.snapshot() == img.b, "repair wrote");
}

/// Garble 8 bytes of both superblock copies (the magic, or the middle).
fn without_superblocks(img: &Img, at: usize) -> Img {
    let mut b = img.b.clone();
    for off in [0, 4096] {
        for x in &mut b[off + at..off + at + 8] {
            *x ^= 0x5a;
        }
    }
    Img { b, g: img.g }
}

#[test]
fn both_superblocks_lost_the_geometry_is_found() {
    // The seeded image (64 inodes, not mkfs's default) with a file spread
    // over several buffers, and its tree as the model dumps it.
    let img = three_records();
    let want = dump(&img.vol()).unwrap();
    for at in [0, 40] {
        let lost = without_superblocks(&img, at);
        assert!(Volume::open_pm(Pm::from_bytes(lost.b.clone()), false).is_err());
        let r = lost.check();
        assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
        let f = r
            .findings
            .iter()
            .find(|f| f.code == "superblock.none")
            .unwrap();
        assert!(
            f.repair.as_deref().unwrap().contains("geometry"),
            "{}",
            r.to_text()
        );
        assert!(r.counts.inodes >= 12, "the walk ran on the found geometry");
        // Preen does not write an inferred geometry.
        let (r, after) = lost.repair(&Options::preen());
        assert_eq!(r.exit_code, exit::UNCORRECTED, "{}", r.to_text());
        assert!(after.b == lost.b);
        let (r, fixed) = lost.repair(&Options::yes());
        assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
        assert!(fixed.check().clean(), "{}", fixed.check().to_text());
        let v = fixed.vol();
        v.check_invariants().unwrap();
        assert_eq!(dump(&v).unwrap(), want, "every file byte-identical");
        assert_eq!(read(&fixed, "/A/foo"), read(&img, "/A/foo"));
    }
}

#[test]
fn both_superblocks_lost_on_a_default_image_restores_its_exact_geometry() {
    use pktfs_fs::{FormatOptions, OpenOptions};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    let params = pktfs_layout::GeometryParams {
        buffer_size_bytes: 4096,
        ..pktfs_layout::GeometryParams::for_size(16 << 20)
    };
    let g = Volume::format(
        &p,
        &FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let d = v.mkdir(v.root(), b"logs", 0o755, 0, 0).unwrap();
    let f = v.create(d.ino, b"a.bin", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &pattern(5, 0, 100_000)).unwrap();
    v.close().unwrap();
    let img = Img {
        b: std::fs::read(&p).unwrap(),
        g,
    };
    let lost = without_superblocks(&img, 0);
    let (r, fixed) = lost.repair(&Options::yes());
    assert_eq!(r.exit_code, exit::CORRECTED, "{}", r.to_text());
    let sb =
        pktfs_layout::Superblock::from_bytes(&fixed.b[..256], 0, fixed.b.len() as u64).unwrap();
    assert_eq!(sb.geometry, g, "mkfs's own layout");
    std::fs::write(&p, &fixed.b).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    let d = v.lookup(v.root(), b"logs").unwrap();
    let f = v.lookup(d.ino, b"a.bin").unwrap();
    assert_eq!(v.read(f.ino, 0, 1 << 20).unwrap(), pattern(5, 0, 100_000));
    // Not pktfs at all stays an operational error.
    let r = pktfs_fsck::check(&mut Pm::from_bytes(vec![0u8; 1 << 20]), &Options::check());
    assert_eq!(r.exit_code, exit::OPERATIONAL);
}

/// Both superblocks gone and the root inode's heads hostile: the geometry
/// search gives up cleanly (no panic, no write in -n).
#[test]
fn geometry_search_survives_a_hostile_root() {
    let img = base();
    let lost = without_superblocks(&img, 0);
    let root = lost.inode_off(1);
    for head in [u64::MAX, u64::MAX / 64, 1 << 40, lost.g.record_count + 7] {
        for word in [8usize, 16] {
            let mut b = lost.b.clone();
            b[root + word..root + word + 8].copy_from_slice(&head.to_le_bytes());
            let r = pktfs_fsck::check(&mut Pm::from_bytes(b.clone()), &Options::check());
            assert!(r.exit_code >= exit::UNCORRECTED, "{}", r.to_text());
            let mut pm = Pm::from_bytes(b);
            let r = pktfs_fsck::repair(&mut pm, &Options::yes());
            assert!(r.exit_code != exit::CLEAN, "{}", r.to_text());
        }
    }
}
