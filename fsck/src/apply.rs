//! Applying planned fixes to the image. Every address written here is
//! derived from the validated geometry (link words, records, inode slots,
//! journal slots, superblocks, free buffers), and is bounds-checked again
//! before the write, so a repair never writes outside the image.
//!
//! Order within a pass: journal, superblocks, attributes, chain links,
//! orphans into lost+found (which appends to chains the link pass has just
//! settled), then record replacements. A replacement finds the link that
//! reaches its record on the media as it is then, and copies the record's
//! `next` as it is then, so whatever the earlier phases published stays.

use std::collections::HashSet;

use pktfs_fs::media::ExclusivePm;
use pktfs_fs::volume::journal;
use pktfs_layout::inode::{DATA_HEAD_OFF, INODE_SIZE, SLOTS_OFF, SLOT_SIZE};
use pktfs_layout::record::FLAG_DAMAGED;
use pktfs_layout::{
    AttrSlot, FileType, Geometry, InodeHeader, Record, RecordId, RecordKind, ROOT_INO,
};

use crate::findings::Change;
use crate::scan::{Fix, Salvage, ScanOut, FIRST_COOKIE};

fn phase(f: &Fix) -> u8 {
    match f {
        Fix::JournalReplay { .. } | Fix::JournalDiscard { .. } => 0,
        Fix::Superblock { .. } => 1,
        Fix::SelectSlot { .. } | Fix::WriteAttr { .. } => 2,
        Fix::Links { .. } => 3,
        Fix::Salvage(_) => 4,
        Fix::RewriteRecord { .. } | Fix::TrimRecord { .. } => 5,
    }
}

struct W<'a, 'p> {
    pm: &'a mut ExclusivePm<'p>,
    g: Geometry,
}

impl W<'_, '_> {
    fn inside(&self, off: u64, len: u64) -> bool {
        off.checked_add(len)
            .is_some_and(|e| e <= self.pm.len() && e <= self.g.image_len_bytes)
    }
    fn write(&mut self, off: u64, data: &[u8]) -> bool {
        if !self.inside(off, data.len() as u64) {
            return false;
        }
        self.pm.write(off, data);
        self.pm.flush(off, data.len() as u64);
        true
    }
    fn publish(&mut self, off: u64, v: u64) -> bool {
        if !off.is_multiple_of(8) || !self.inside(off, 8) {
            return false;
        }
        self.pm.publish_u64(off, v);
        true
    }
    fn u64_at(&self, off: u64) -> Option<u64> {
        self.inside(off, 8).then(|| {
            let mut b = [0u8; 8];
            b.copy_from_slice(self.pm.slice(off, 8));
            u64::from_le_bytes(b)
        })
    }
    fn is_link_word(&self, off: u64) -> bool {
        pktfs_layout::journal::is_link_word(off, &self.g)
    }
}

/// Apply fixes `chosen` (indices into `s.fixes`); returns what changed.
pub(crate) fn apply(pm: &mut ExclusivePm<'_>, s: &ScanOut, chosen: &[usize]) -> Vec<Change> {
    let Some(g) = s.geometry else {
        return Vec::new();
    };
    let mut w = W { pm, g };
    let mut spare = s.spare_records.iter().copied();
    let mut changes = Vec::new();
    for p in 0..=5u8 {
        for &i in chosen {
            let Some(pf) = s.fixes.get(i) else { continue };
            if phase(&pf.fix) != p {
                continue;
            }
            let done = match &pf.fix {
                Fix::JournalReplay { slot, stores } => {
                    journal::replay_slot_excl(w.pm, &g, *slot, stores).is_ok()
                }
                Fix::JournalDiscard { slot } => journal::clear_slot_excl(w.pm, &g, *slot).is_ok(),
                Fix::Superblock { offset, bytes } => {
                    let ok = w.write(*offset, &bytes[..]);
                    w.pm.fence();
                    ok
                }
                Fix::Links { records, stores } => relink(&mut w, records, stores),
                Fix::RewriteRecord { head, id, rec } => {
                    replace_record(&mut w, &mut spare, *head, *id, rec)
                }
                Fix::TrimRecord { head, id, new_len } => {
                    trim_record(&mut w, &mut spare, *head, *id, *new_len)
                }
                Fix::SelectSlot { ino, selector } => {
                    g.ino_in_range(*ino as u64) && w.publish(g.inode_pos(*ino).0, *selector)
                }
                Fix::WriteAttr { ino, attr } => write_attr(&mut w, *ino, attr),
                Fix::Salvage(sv) => match salvage(&mut w, &mut spare, sv) {
                    Ok(mut c) => {
                        changes.append(&mut c);
                        true
                    }
                    Err(why) => {
                        changes.push(Change {
                            ino: None,
                            path: Some("/lost+found".into()),
                            what: format!("could not salvage orphans: {why}"),
                        });
                        false
                    }
                },
            };
            if done {
                changes.push(Change {
                    ino: pf.ino,
                    path: pf.path.clone(),
                    what: pf.what.clone(),
                });
            }
        }
    }
    changes
}

/// Write `records` (id, fields, link) into their spare records and persist
/// them, then publish `stores`: nothing reaches a new record before it is
/// durable. No store is made if a record cannot be written.
fn relink(w: &mut W, records: &[(u64, Record, u64)], stores: &[(u64, u64)]) -> bool {
    for &(id, ref rec, next) in records {
        if !w.g.record_in_range(id)
            || !w.write(
                w.g.record_pos(RecordId(id)).0,
                &rec.to_bytes(RecordId(next)),
            )
        {
            return false;
        }
    }
    if !records.is_empty() {
        w.pm.fence();
    }
    stores
        .iter()
        .all(|&(a, v)| w.is_link_word(a) && w.publish(a, v))
}

/// The link word that reaches record `id` from the chain head word `head`
/// on the media now (at most one walk over the record table).
fn live_link(w: &W, head: u64, id: u64) -> Option<u64> {
    let mut at = head;
    for _ in 0..=w.g.record_count {
        let v = w.u64_at(at)?;
        if v == id {
            return Some(at);
        }
        if !w.g.record_in_range(v) {
            return None;
        }
        at = w.g.record_pos(RecordId(v)).0;
    }
    None
}

/// Replace record `id` by a spare record holding `rec` and `id`'s current
/// link: the copy is persisted before the one publish that swaps it in, so
/// a crash leaves the old record or the new one, never a torn one. The old
/// record is unreachable afterwards (free, since allocation is reachability).
fn replace_record(
    w: &mut W,
    spare: &mut impl Iterator<Item = u64>,
    head: u64,
    id: u64,
    rec: &Record,
) -> bool {
    if !w.g.record_in_range(id) {
        return false;
    }
    let Some(link) = live_link(w, head, id).filter(|&l| w.is_link_word(l)) else {
        return false;
    };
    let Some(next) = w.u64_at(w.g.record_pos(RecordId(id)).0) else {
        return false;
    };
    let Some(new_id) = spare.next().filter(|&r| w.g.record_in_range(r)) else {
        return false;
    };
    let ok = w.write(
        w.g.record_pos(RecordId(new_id)).0,
        &rec.to_bytes(RecordId(next)),
    );
    w.pm.fence();
    ok && w.publish(link, new_id)
}

fn trim_record(
    w: &mut W,
    spare: &mut impl Iterator<Item = u64>,
    head: u64,
    id: u64,
    new_len: u32,
) -> bool {
    if !w.g.record_in_range(id) || new_len == 0 {
        return false;
    }
    let pos = w.g.record_pos(RecordId(id));
    if !w.inside(pos.0, 64) {
        return false;
    }
    let Ok((mut r, _)) = Record::from_bytes(w.pm.slice(pos.0, 64), pos, &w.g) else {
        return false;
    };
    if new_len >= r.len {
        return false;
    }
    let start = w.g.buffer_pos(r.buffer, r.buf_off).0;
    if !w.inside(start, r.len as u64) {
        return false;
    }
    if r.flags & FLAG_DAMAGED == 0 {
        if pktfs_layout::crc32c(w.pm.slice(start, r.len as usize)) != r.payload_crc {
            // Damaged but not marked yet: marking it comes first (this
            // pass); the next pass trims the marked record.
            return false;
        }
        r.payload_crc = pktfs_layout::crc32c(w.pm.slice(start, new_len as usize));
    }
    // A marked record keeps its stored CRC: the flag, not a fresh checksum
    // of bytes known to be bad, says what the range is.
    r.len = new_len;
    replace_record(w, spare, head, id, &r)
}

fn write_attr(w: &mut W, ino: u32, attr: &AttrSlot) -> bool {
    if !w.g.ino_in_range(ino as u64) {
        return false;
    }
    let pos = w.g.inode_pos(ino).0;
    let Some(sel) = w.u64_at(pos) else {
        return false;
    };
    let idle = ((sel & 1) ^ 1) as u8;
    let generation = ((sel >> 1).wrapping_add(1)) & (u64::MAX >> 1);
    let so = pos + SLOTS_OFF + idle as u64 * SLOT_SIZE;
    let ok = w.write(so, &attr.to_bytes(generation));
    w.pm.fence();
    ok && w.publish(pos, InodeHeader::selector(generation, idle))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Link orphans into lost+found (creating it if needed).
fn salvage(
    w: &mut W,
    spare: &mut impl Iterator<Item = u64>,
    sv: &Salvage,
) -> Result<Vec<Change>, String> {
    let g = w.g;
    let bs = g.buffer_size_bytes;
    let new_lf = sv.lf.is_none();
    let need_records = sv.items.len() + usize::from(new_lf);
    let recs: Vec<u64> = spare.take(need_records).collect();
    if recs.len() < need_records || !recs.iter().all(|&r| g.record_in_range(r)) {
        return Err("no free records".into());
    }
    let mut recs = recs.into_iter();
    let mut bufs = sv.free_buffers.iter().copied();
    let mut cur: Option<(u32, u32)> = None;
    // Name bytes go into free buffers, packed.
    let mut put_name = |w: &mut W<'_, '_>, name: &[u8]| -> Result<(u32, u32, u32), String> {
        let n = name.len() as u32;
        let (b, used) = match cur {
            Some((b, u)) if u + n <= bs => (b, u),
            _ => (bufs.next().ok_or("no free buffer space")?, 0),
        };
        let off = g.buffer_pos(b, used).0;
        if !w.write(off, name) {
            return Err("buffer outside the image".into());
        }
        cur = Some((b, used + n));
        Ok((b, used, pktfs_layout::crc32c(name)))
    };
    let now = now_ns();
    let dirent =
        |name_at: (u32, u32, u32), len: usize, seq: u64, ino: u32, kind: FileType| Record {
            kind: RecordKind::Dirent,
            flags: 0,
            buffer: name_at.0,
            buf_off: name_at.1,
            len: len as u32,
            payload_crc: name_at.2,
            file_off: 0,
            seq,
            timestamp_ns: now as u64,
            aux: Record::dirent_aux(ino, kind.dtype()),
        };
    let mut changes = Vec::new();
    let (lf_ino, lf_tail, lf_last, names) = match &sv.lf {
        Some((i, t, l, n)) => (*i, *t, *l, n.clone()),
        None => {
            let ino = sv.free_inode.ok_or("no free inode for lost+found")?;
            (
                ino,
                g.inode_pos(ino).0 + DATA_HEAD_OFF,
                FIRST_COOKIE - 1,
                HashSet::new(),
            )
        }
    };
    let lf_name = if new_lf {
        String::from_utf8_lossy(&sv.lf_name).into_owned()
    } else {
        "lost+found".into()
    };
    // The orphans' dirents, chained to each other.
    let mut ids = Vec::new();
    let mut names = names;
    let mut planned = Vec::new();
    for (k, &(t, kind)) in sv.items.iter().enumerate() {
        let mut name = format!("#{t}").into_bytes();
        let mut n = 1;
        while names.contains(&name) {
            name = format!("#{t}.{n}").into_bytes();
            n += 1;
        }
        names.insert(name.clone());
        let at = put_name(&mut *w, &name)?;
        let id = recs.next().ok_or("no free records")?;
        ids.push(id);
        // A hostile last cookie must not overflow: no room after it.
        let cookie = lf_last
            .checked_add(1 + k as u64)
            .ok_or("lost+found has no readdir cookies left")?;
        planned.push((id, dirent(at, name.len(), cookie, t, kind), name, t));
    }
    for (k, (id, rec, _, _)) in planned.iter().enumerate() {
        let next = ids.get(k + 1).copied().unwrap_or(0);
        let pos = g.record_pos(RecordId(*id)).0;
        if !w.write(pos, &rec.to_bytes(RecordId(next))) {
            return Err("record outside the image".into());
        }
    }
    let mut root_rec = None;
    if new_lf {
        let at = put_name(&mut *w, &sv.lf_name)?;
        let id = recs.next().ok_or("no free records")?;
        let cookie = sv
            .root_last_seq
            .checked_add(1)
            .ok_or("the root directory has no readdir cookies left")?;
        let rec = dirent(at, sv.lf_name.len(), cookie, lf_ino, FileType::Directory);
        if !w.write(g.record_pos(RecordId(id)).0, &rec.to_bytes(RecordId::NONE)) {
            return Err("record outside the image".into());
        }
        let attr = AttrSlot {
            kind: FileType::Directory,
            mode: 0o700,
            uid: 0,
            gid: 0,
            nlink: 2,
            size: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            rdev: 0,
            parent: ROOT_INO,
        };
        let mut bytes = [0u8; INODE_SIZE];
        bytes[0..8].copy_from_slice(&InodeHeader::selector(1, 0).to_le_bytes());
        bytes[SLOTS_OFF as usize..SLOTS_OFF as usize + 64].copy_from_slice(&attr.to_bytes(1));
        if !w.write(g.inode_pos(lf_ino).0, &bytes) {
            return Err("inode outside the image".into());
        }
        root_rec = Some(id);
    }
    // Everything new is durable before the links that reach it.
    w.pm.fence();
    if let Some(first) = ids.first() {
        if !w.publish(lf_tail, *first) {
            return Err("lost+found tail is not a link word".into());
        }
    }
    if let Some(id) = root_rec {
        if !w.publish(sv.root_tail, id) {
            return Err("root tail is not a link word".into());
        }
        changes.push(Change {
            ino: Some(lf_ino),
            path: Some(format!("/{lf_name}")),
            what: "created".into(),
        });
    }
    for (_, _, name, t) in &planned {
        changes.push(Change {
            ino: Some(*t),
            path: Some(format!("/{lf_name}/{}", String::from_utf8_lossy(name))),
            what: "orphan linked into lost+found".into(),
        });
    }
    Ok(changes)
}
