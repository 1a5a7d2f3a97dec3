//! fsck's repairs are crash-safe: each repair runs on the recording
//! backend, and at every crash instant (before and after every fence, with
//! subsets of the in-flight lines, as the crash suite builds them) the image
//! must settle, with `fsck -y` run again, to exactly the tree the
//! uninterrupted repair gives. A torn record rewrite (a dirent's type, a
//! damage mark, a trim) or a torn superblock would show as a lost name or
//! a lost range here.

use pktfs_fs::media::Pm;
use pktfs_fs::Volume;
use pktfs_fsck::{exit, Options};
use pktfs_layout::inode::SLOTS_OFF;
use pktfs_layout::superblock::{raw_bytes, raw_from_bytes, seal, RoCompatFeatures};
use pktfs_layout::{AttrSlot, Geometry, PmOffset, Record, RecordId};
use pktfs_tests::model::ace::{path_ino, seeded};
use pktfs_tests::model::crash::{for_each_point, subsets};
use pktfs_tests::model::{dump, pattern, Tree};

/// The seeded image with /A/foo in three records, and its geometry.
fn base() -> (Vec<u8>, Geometry) {
    let (img, _) = seeded();
    let mut v = Volume::open_pm(Pm::from_bytes(img.to_vec()), false).unwrap();
    let file = path_ino(&v, "/A/foo");
    v.write(file, 1000, &pattern(11, 1000, 2000)).unwrap();
    assert_eq!(v.chain(file).unwrap().len(), 3);
    let g = *v.geometry();
    let b = v.snapshot();
    (b, g)
}

fn records(b: &[u8], path: &str) -> Vec<u64> {
    let v = Volume::open_pm(Pm::from_bytes(b.to_vec()), false).unwrap();
    let ino = path_ino(&v, path);
    v.chain(ino).unwrap().iter().map(|c| c.record).collect()
}

fn edit_record(b: &mut [u8], g: &Geometry, id: u64, f: impl FnOnce(&mut Record)) {
    let o = g.record_pos(RecordId(id)).0 as usize;
    let (mut r, next) = Record::from_bytes(&b[o..o + 64], PmOffset(o as u64), g).unwrap();
    f(&mut r);
    b[o..o + 64].copy_from_slice(&r.to_bytes(next));
}

fn edit_attr(b: &mut [u8], g: &Geometry, ino: u64, f: impl FnOnce(&mut AttrSlot)) {
    let pos = g.inode_pos(ino as u32).0 as usize;
    let sel = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
    let so = pos + SLOTS_OFF as usize + (sel & 1) as usize * 64;
    let mut a = AttrSlot::from_bytes(&b[so..so + 64], PmOffset(so as u64), sel >> 1).unwrap();
    f(&mut a);
    b[so..so + 64].copy_from_slice(&a.to_bytes(sel >> 1));
}

fn ino_of(b: &[u8], path: &str) -> u64 {
    path_ino(
        &Volume::open_pm(Pm::from_bytes(b.to_vec()), false).unwrap(),
        path,
    )
}

/// What an image settles to: its tree, and the ranges marked damaged in it
/// (inode, start, end). Reads of those fail, so the tree is read with them
/// as holes; the list tells a marked range from a hole the file has.
type Settled = (Tree, Vec<(u32, u64, u64)>);

/// Repair `img` with -y until settled, and return what it settled to.
fn settle(img: Vec<u8>) -> Result<Settled, String> {
    let mut pm = Pm::from_bytes(img);
    let r = pktfs_fsck::repair(&mut pm, &Options::yes());
    if ![exit::CLEAN, exit::CORRECTED].contains(&r.exit_code) {
        return Err(format!("-y: {}", r.to_text()));
    }
    let r = pktfs_fsck::check(&mut pm, &Options::check());
    if !r.clean() {
        return Err(format!("-n after -y: {}", r.to_text()));
    }
    let mut marked: Vec<(u32, u64, u64)> =
        r.damaged.iter().map(|d| (d.ino, d.start, d.end)).collect();
    marked.sort_unstable();
    if !r.damaged.is_empty() {
        let drop = Options {
            drop_damaged: true,
            ..Options::yes()
        };
        let r = pktfs_fsck::repair(&mut pm, &drop);
        if r.exit_code != exit::CORRECTED {
            return Err(format!("--drop-damaged: {}", r.to_text()));
        }
    }
    let v = Volume::open_pm(pm, false).map_err(|e| format!("open: {e}"))?;
    v.check_invariants()?;
    Ok((dump(&v)?, marked))
}

/// Every crash state of `fsck -y` on `damaged` settles to the same tree.
fn repair_is_crash_safe(name: &str, damaged: Vec<u8>, buffer_offset: u64) {
    let want = settle(damaged.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut pm = Pm::recording(damaged.clone());
    let r = pktfs_fsck::repair(&mut pm, &Options::yes());
    assert_eq!(r.exit_code, exit::CORRECTED, "{name}: {}", r.to_text());
    let events = pm.crash_log().unwrap().events;
    let (mut points, mut images) = (0, 0);
    for_each_point(&damaged, &events, |p| {
        points += 1;
        for chosen in subsets(p, buffer_offset, 12) {
            images += 1;
            let got = settle(p.image_with(&chosen))
                .unwrap_or_else(|e| panic!("{name}: fence {} pre {}: {e}", p.fence, p.pre));
            assert!(
                got.0 == want.0,
                "{name}: fence {} pre {} {chosen:?}: tree differs:\n{}",
                p.fence,
                p.pre,
                got.0.diff(&want.0, 10)
            );
            assert_eq!(
                got.1, want.1,
                "{name}: fence {} pre {} {chosen:?}: ranges marked damaged differ",
                p.fence, p.pre
            );
        }
        true
    });
    assert!(points > 2 && images > points, "{name}: {points} points");
    eprintln!("{name}: {points} crash instants, {images} images, each settled to the same tree");
}

/// An image no damage-flag build has opened: a repair that marks damage
/// sets the feature bit too.
fn without_damage_flags(b: &mut [u8]) {
    for off in [0usize, 4096] {
        let mut raw = raw_from_bytes(&b[off..off + 256]).unwrap();
        raw.ro_compat = (raw.ro_compat.get() & !RoCompatFeatures::DAMAGE_FLAGS.bits()).into();
        seal(&mut raw);
        b[off..off + 256].copy_from_slice(raw_bytes(&raw));
    }
}

#[test]
fn marking_damage_is_crash_safe() {
    let (mut b, g) = base();
    without_damage_flags(&mut b);
    let ids = records(&b, "/A/foo");
    let o = g.record_pos(RecordId(ids[1])).0 as usize;
    let (r, _) = Record::from_bytes(&b[o..o + 64], PmOffset(o as u64), &g).unwrap();
    b[g.buffer_pos(r.buffer, r.buf_off).0 as usize + 9] ^= 0x04;
    repair_is_crash_safe("mark damaged", b, g.buffer_offset);
}

/// A bad record cut out of a file's data chain, at its head and in its
/// middle: the mark of the lost range and the records after it go in with
/// one publish, so every crash state settles to the same tree with the
/// same range marked (never to a hole where the mark should be).
#[test]
fn cutting_out_a_bad_record_is_crash_safe() {
    for k in [0usize, 1] {
        let (mut b, g) = base();
        without_damage_flags(&mut b);
        let ids = records(&b, "/A/foo");
        let o = g.record_pos(RecordId(ids[k])).0 as usize;
        b[o + 20] ^= 0x01;
        let (_, marked) = settle(b.clone()).unwrap();
        assert_eq!(marked.len(), 1, "the lost range is marked");
        repair_is_crash_safe(&format!("cut out record {k}"), b, g.buffer_offset);
    }
}

#[test]
fn rewriting_a_dirent_and_trimming_are_crash_safe() {
    let (mut b, g) = base();
    let c = ino_of(&b, "/C");
    let file = ino_of(&b, "/A/foo");
    let v = Volume::open_pm(Pm::from_bytes(b.clone()), false).unwrap();
    let pos = v
        .list_dir(c)
        .unwrap()
        .iter()
        .position(|e| e.name == b"sym")
        .unwrap();
    drop(v);
    let id = records(&b, "/C")[pos];
    edit_record(&mut b, &g, id, |r| {
        r.aux = Record::dirent_aux(r.dirent_ino(), 8);
    });
    edit_attr(&mut b, &g, file, |a| a.size = 2500);
    repair_is_crash_safe("dirent type + trim", b, g.buffer_offset);
}

#[test]
fn salvaging_to_lost_found_is_crash_safe() {
    let (mut b, g) = base();
    let id = records(&b, "/A")[0];
    let o = g.record_pos(RecordId(id)).0 as usize;
    let (r, _) = Record::from_bytes(&b[o..o + 64], PmOffset(o as u64), &g).unwrap();
    b[g.buffer_pos(r.buffer, r.buf_off).0 as usize] ^= 0x20;
    repair_is_crash_safe("lost+found", b, g.buffer_offset);
}

#[test]
fn rewriting_lost_superblocks_is_crash_safe() {
    let (mut b, g) = base();
    for off in [0usize, 4096] {
        for x in &mut b[off..off + 8] {
            *x ^= 0x5a;
        }
    }
    repair_is_crash_safe("both superblocks", b, g.buffer_offset);
}
