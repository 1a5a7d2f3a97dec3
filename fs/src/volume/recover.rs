//! Opening an image: superblock (falling back to the backup), journal
//! replay, and the walk that rebuilds every DRAM structure from what the
//! root reaches. Nothing is trusted before it is validated: every record
//! passes its CRC and bounds checks, every chain is checked for cycles,
//! order and double claims before anything is built on it.

use super::failstop::OrStop;
use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktfs_layout::inode::{DATA_HEAD_OFF, INODE_SIZE, SLOTS_OFF, SLOT_SIZE, XATTR_HEAD_OFF};
use pktfs_layout::journal::JOURNAL_MAX_ENTRIES;
use pktfs_layout::superblock::{BACKUP_OFFSET, PRIMARY_OFFSET, STATE_CLEAN};
use pktfs_layout::{
    AttrSlot, Corrupt, FileType, Geometry, InodeHeader, PmOffset, Record, RecordId, RecordKind,
    Superblock, ROOT_INO,
};

use super::alloc::{Alloc, Slice};
use super::commit::{Commit, SlotState};
use super::journal;
use super::lockrank::InodeLock;
use super::InodeRef;
use super::{mark_mounted, write_superblocks, Inode, Namespace, Volume};
use crate::error::{FsError, Result};
use crate::media::Pm;

/// What `open` found and did.
#[derive(Clone, Debug, Default)]
pub struct OpenReport {
    /// Set when the primary superblock was bad: why, and that the backup was used.
    pub used_backup_superblock: Option<String>,
    /// Was the image closed cleanly last time?
    pub was_clean: bool,
    pub journal_slots_replayed: u32,
    pub nlink_fixed: u32,
    pub inodes: u64,
    pub records: u64,
    /// Bytes allocated because the image file was sparse (a writable open
    /// completes it so no store can fault; 0 when it was complete).
    pub completed_bytes: u64,
    pub elapsed: Duration,
    /// Inodes whose structure failed its checks (inode slot, a record of
    /// one of its chains, a dirent's name): inode number and why. Each
    /// answers EIO; everything else is served.
    pub damaged_inodes: Vec<(u32, String)>,
    /// Why a writable open was turned read-only (structural damage: the
    /// allocator cannot know what a damaged chain still owns, so writing
    /// could overwrite what fsck might still save).
    pub read_only_because: Option<String>,
}

impl OpenReport {
    /// A line for the person opening the image, when the open allocated a
    /// sparse image's holes.
    pub fn completed_note(&self, path: &std::path::Path) -> Option<String> {
        (self.completed_bytes > 0).then(|| {
            format!(
                "{}: the image file was sparse; allocated the missing {} so writes cannot fault",
                path.display(),
                crate::media::space::human_bytes(self.completed_bytes)
            )
        })
    }
}

/// Link words read during the walk. For a read-only open with committed
/// journal entries, the entries are overlaid instead of written.
struct Reader<'a> {
    pm: &'a Pm,
    overlay: HashMap<u64, u64>,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&self, off: u64) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(self.pm.slice(off, N));
        if !self.overlay.is_empty() {
            journal::overlay(&mut b, off, |a| self.overlay.get(&a).copied());
        }
        b
    }
}

/// Read and validate the superblock, primary first, then the backup.
pub fn read_superblock(pm: &Pm) -> std::result::Result<(Superblock, Option<String>), Corrupt> {
    let len = pm.len();
    let primary = Superblock::from_bytes(pm.slice(PRIMARY_OFFSET, 256), PRIMARY_OFFSET, len);
    match primary {
        Ok(sb) => Ok((sb, None)),
        Err(e) => match Superblock::from_bytes(pm.slice(BACKUP_OFFSET, 256), BACKUP_OFFSET, len) {
            Ok(sb) => Ok((
                sb,
                Some(format!(
                    "primary superblock is bad ({e}); opened from the backup copy"
                )),
            )),
            Err(_) => Err(e),
        },
    }
}

struct Walk<'a> {
    g: &'a Geometry,
    rd: Reader<'a>,
    record_used: Vec<bool>,
    inode_used: Vec<bool>,
    refs: Vec<u32>,
    inodes: HashMap<u32, Inode>,
    /// Dirents naming each inode, and subdirectories of each directory.
    links: HashMap<u32, u32>,
    subdirs: HashMap<u32, u32>,
    dir_parent: HashMap<u32, u32>,
    records: u64,
    /// Inodes that failed their checks, with why (damage stays local).
    broken: HashMap<u32, String>,
}

impl<'a> Walk<'a> {
    /// Nothing claimed yet but the null record and inode.
    fn new(g: &'a Geometry, rd: Reader<'a>) -> Walk<'a> {
        let mut w = Walk {
            g,
            rd,
            record_used: vec![false; g.record_count as usize + 1],
            inode_used: vec![false; g.inode_count as usize + 1],
            refs: vec![0; g.buffer_count as usize],
            inodes: HashMap::default(),
            links: HashMap::default(),
            subdirs: HashMap::default(),
            dir_parent: HashMap::default(),
            records: 0,
            broken: HashMap::default(),
        };
        w.record_used[0] = true;
        w.inode_used[0] = true;
        w
    }

    /// Link counts and parent pointers must match the tree. A mismatch can
    /// only come from damage, never from a crash (they commit together),
    /// so it is reported; a writable open fixes it. Each inode whose
    /// attributes differ, with what they should be.
    fn link_fixes(&self) -> Vec<(u32, AttrSlot)> {
        let mut fixes: Vec<(u32, AttrSlot)> = Vec::new();
        for (ino, i) in self.inodes.iter() {
            let mut want = i.attr;
            if i.attr.kind == FileType::Directory {
                want.nlink = 2 + self.subdirs.get(ino).copied().unwrap_or(0);
                want.parent = self.dir_parent.get(ino).copied().unwrap_or(ROOT_INO);
            } else {
                want.nlink = self.links.get(ino).copied().unwrap_or(0);
            }
            if want != i.attr {
                fixes.push((*ino, want));
            }
        }
        fixes
    }
}

impl Walk<'_> {
    fn load_inode(&mut self, ino: u32) -> Result<Inode> {
        let pos = self.g.inode_pos(ino);
        let bytes: [u8; INODE_SIZE] = self.rd.bytes(pos.0);
        let h = InodeHeader::from_bytes(&bytes, pos, self.g.record_count)?;
        let so = (SLOTS_OFF + h.live_slot as u64 * SLOT_SIZE) as usize;
        let attr = AttrSlot::from_bytes(
            &bytes[so..so + 64],
            PmOffset(pos.0 + so as u64),
            h.generation,
        )?;
        let mut i = Inode::new(
            ino,
            attr,
            SlotState {
                generation: h.generation,
                live_slot: h.live_slot,
            },
        );
        self.walk_chain(&mut i, RecordId(h.data_head), false)?;
        self.walk_chain(&mut i, RecordId(h.xattr_head), true)?;
        super::fold_dir_times(&mut i.attr, &i.data);
        Ok(i)
    }

    fn claim(&mut self, id: RecordId, r: &Record, at: PmOffset) -> Result<()> {
        if std::mem::replace(&mut self.record_used[id.0 as usize], true) {
            return Err(Corrupt::at(
                "record",
                at,
                format!("record {} is linked twice (a cycle or a shared tail)", id.0),
            )
            .into());
        }
        // A remote record's slice is in an object: no buffer reference.
        if !r.is_remote() {
            let s = Slice {
                buffer: r.buffer,
                buf_off: r.buf_off,
                len: r.len,
            };
            let (a, b) = s.buffers(self.g.buffer_size_bytes);
            for x in a..=b {
                self.refs[x as usize] += 1;
            }
        }
        self.records += 1;
        Ok(())
    }

    fn walk_chain(&mut self, i: &mut Inode, head: RecordId, xattr: bool) -> Result<()> {
        let mut cur = head;
        let mut prev_key: Option<u64> = None;
        let mut prev_end = 0u64;
        while !cur.is_none() {
            let at = self.g.record_pos(cur);
            let bytes: [u8; 64] = self.rd.bytes(at.0);
            let (r, next) = Record::from_bytes(&bytes, at, self.g)?;
            self.claim(cur, &r, at)?;
            let rec = super::Rec { id: cur, r };
            if xattr {
                if r.kind != RecordKind::Xattr {
                    return Err(Corrupt::at(
                        "xattr chain",
                        at,
                        format!("{:?} record in an xattr chain", r.kind),
                    )
                    .into());
                }
                let payload = self
                    .rd
                    .pm
                    .slice(self.g.buffer_pos(r.buffer, r.buf_off).0, r.len as usize);
                if pktfs_layout::crc32c(payload) != r.payload_crc {
                    return Err(Corrupt::at("xattr", at, "payload checksum mismatch").into());
                }
                let name: Box<[u8]> = payload[..r.aux as usize].into();
                let key = i.next_xkey;
                i.next_xkey += 1;
                if i.xnames.insert(name, key).is_some() {
                    return Err(Corrupt::at("xattr", at, "duplicate attribute name").into());
                }
                i.xattrs.insert(key, rec);
            } else {
                match (i.attr.kind, r.kind) {
                    (FileType::Directory, RecordKind::Dirent) => {
                        if prev_key.is_some_and(|k| r.seq <= k) {
                            return Err(Corrupt::at("dirent", at, "cookies out of order").into());
                        }
                        prev_key = Some(r.seq);
                        let payload = self
                            .rd
                            .pm
                            .slice(self.g.buffer_pos(r.buffer, r.buf_off).0, r.len as usize);
                        if pktfs_layout::crc32c(payload) != r.payload_crc {
                            return Err(Corrupt::at("dirent", at, "name checksum mismatch").into());
                        }
                        if super::check_name(payload).is_err() {
                            return Err(Corrupt::at("dirent", at, "invalid name").into());
                        }
                        if i.names.insert(payload.into(), r.seq).is_some() {
                            return Err(Corrupt::at(
                                "dirent",
                                at,
                                format!("duplicate name {:?}", String::from_utf8_lossy(payload)),
                            )
                            .into());
                        }
                        i.next_seq = r.seq.saturating_add(1);
                        i.data.insert(r.seq, rec);
                    }
                    (FileType::Regular, RecordKind::Data | RecordKind::Remote)
                    | (FileType::Symlink, RecordKind::Data) => {
                        if r.file_off < prev_end {
                            return Err(Corrupt::at(
                                "data record",
                                at,
                                "file ranges overlap or are out of order",
                            )
                            .into());
                        }
                        prev_key = Some(r.file_off);
                        prev_end = r.file_end();
                        i.next_seq = i.next_seq.max(r.seq.saturating_add(1));
                        i.data_bytes += r.len as u64;
                        i.data.insert(r.file_off, rec);
                    }
                    (k, rk) => {
                        return Err(Corrupt::at(
                            "chain",
                            at,
                            format!("{rk:?} record in the chain of a {k:?}"),
                        )
                        .into());
                    }
                }
            }
            cur = next;
        }
        if matches!(i.attr.kind, FileType::Regular | FileType::Symlink) && prev_end > i.attr.size {
            return Err(Corrupt::at(
                "inode",
                self.g.inode_pos(i.ino),
                format!(
                    "records reach byte {prev_end} past the size {}",
                    i.attr.size
                ),
            )
            .into());
        }
        Ok(())
    }

    fn run(&mut self) -> Result<()> {
        let root = self.load_inode(ROOT_INO)?;
        if root.attr.kind != FileType::Directory {
            return Err(Corrupt::at(
                "root inode",
                self.g.inode_pos(ROOT_INO),
                "is not a directory",
            )
            .into());
        }
        self.inode_used[ROOT_INO as usize] = true;
        self.dir_parent.insert(ROOT_INO, ROOT_INO);
        let mut queue = VecDeque::from([ROOT_INO]);
        self.inodes.insert(ROOT_INO, root);
        while let Some(dir) = queue.pop_front() {
            let children: Vec<(u32, u64)> = self.inodes[&dir]
                .data
                .values()
                .map(|r| (r.r.dirent_ino(), r.r.aux))
                .collect();
            for (child, aux) in children {
                *self.links.entry(child).or_default() += 1;
                let dtype = (aux >> 32) as u8;
                if self.inode_used[child as usize] {
                    let k = self.inodes.get(&child).map(|c| c.attr.kind);
                    if k == Some(FileType::Directory) || child == ROOT_INO {
                        return Err(Corrupt::at(
                            "dirent",
                            self.g.inode_pos(dir),
                            format!("directory {child} is linked twice"),
                        )
                        .into());
                    }
                    continue;
                }
                // Damage stays local: an inode that fails its checks is
                // kept out of the tree (it answers EIO) and the walk goes
                // on with its siblings. Only the root is essential.
                self.inode_used[child as usize] = true;
                let c = match self.load_inode(child) {
                    Ok(c) if c.attr.kind.dtype() == dtype => c,
                    Ok(_) => {
                        self.broken.insert(
                            child,
                            format!("its type disagrees with the dirent in directory {dir}"),
                        );
                        continue;
                    }
                    Err(e) => {
                        self.broken.insert(child, e.to_string());
                        continue;
                    }
                };
                if c.attr.kind == FileType::Directory {
                    *self.subdirs.entry(dir).or_default() += 1;
                    self.dir_parent.insert(child, dir);
                    queue.push_back(child);
                }
                self.inodes.insert(child, c);
            }
        }
        Ok(())
    }
}

/// Open an image: the superblock, the journal's committed slots (read,
/// not yet replayed), the walk from the root through them; then, the
/// image accepted, damage deciding read-only, the replay, the allocator
/// rebuilt, link counts checked against the tree, and the Volume made,
/// its fixes committed and the direct readers' epoch closed.
pub fn open(pm: Pm, read_only: bool) -> Result<Volume> {
    let t0 = Instant::now();
    let (mut sb, backup_note) = read_superblock(&pm)?;
    let g = sb.geometry;
    let mut report = OpenReport {
        used_backup_superblock: backup_note,
        was_clean: sb.state == STATE_CLEAN,
        completed_bytes: pm.completed_bytes(),
        ..Default::default()
    };
    let read_only = read_only || pm.is_read_only();
    // A feature this build can only read: refuse to write, before anything
    // (journal replay included) touches the image.
    let unknown_ro = sb.ro_compat & !pktfs_layout::superblock::RO_COMPAT_SUPPORTED.bits();
    if unknown_ro != 0 && !read_only {
        return Err(Corrupt::UnknownRoCompat { bits: unknown_ro }.into());
    }
    let (pending, overlay) = pending_journal(&pm, &g)?;
    report.journal_slots_replayed = pending.len() as u32;
    let mut w = Walk::new(&g, Reader { pm: &pm, overlay });
    w.run()?;
    report.inodes = w.inodes.len() as u64;
    report.records = w.records;
    let damaged = damaged_inodes(&mut w.broken);
    let read_only = read_only || damage_forbids_writing(&damaged, &mut report);
    report.damaged_inodes = damaged.clone();
    if !read_only {
        // From here this open changes the image without the change
        // counters (journal replay, link-count fixes): direct readers must
        // stop trusting what they cached (live.rs). Only now: an image
        // refused above is left exactly as it was.
        super::live::epoch_begin(&pm, &g);
        for (slot, stores) in &pending {
            journal::replay_slot(&pm, &g, *slot, stores)?;
        }
    }
    let alloc = Alloc::rebuild(
        g.buffer_size_bytes,
        &w.inode_used,
        &w.record_used,
        std::mem::take(&mut w.refs),
    );
    // With damaged inodes the counts are not to be trusted (a damaged
    // directory's children were never counted).
    let fixes = match damaged.is_empty() {
        true => w.link_fixes(),
        false => Vec::new(),
    };
    report.nlink_fixed = fixes.len() as u32;
    if !fixes.is_empty() {
        tracing::warn!(
            "{} inodes had a wrong link count or parent; {}",
            fixes.len(),
            if read_only {
                "not fixed (read-only)"
            } else {
                "fixed"
            }
        );
    }
    if !read_only {
        if report.used_backup_superblock.is_some() {
            write_superblocks(&pm, &sb);
        }
        // This build may write dirents that carry directory times: say so,
        // so a build that does not know them opens the image read-only.
        sb.ro_compat |= pktfs_layout::superblock::RO_COMPAT_SUPPORTED.bits();
        mark_mounted(&pm, &mut sb);
    }
    let Walk {
        mut inodes,
        dir_parent,
        ..
    } = w;
    let map: HashMap<u32, InodeRef> = inodes
        .drain()
        .map(|(k, v)| (k, Arc::new(InodeLock::new(k, v))))
        .collect();
    let ns = Namespace { dir_parent };
    let mut vol = Volume::new_from_parts(pm, g, sb, alloc, map, ns, read_only, report);
    if !read_only {
        commit_link_fixes(&vol, &fixes)?;
        // Counters a holder that died mid-change left odd, made even (every
        // inode a reader can reach), then the epoch even: readers may trust
        // what they read again.
        let reachable: Vec<u32> = vol.inodes.snapshot().into_iter().map(|(n, _)| n).collect();
        super::live::give_births(&vol.pm, &vol.geo, reachable.iter().copied());
        super::live::epoch_end(&vol.pm, &vol.geo, reachable);
    }
    vol.damaged_inodes = damaged.into_iter().collect();
    vol.report.elapsed = t0.elapsed();
    Ok(vol)
}

/// A slot of the journal with its committed stores.
type PendingSlot = (u32, Vec<(u64, u64)>);

/// The journal: every committed slot parsed and validated, and the walk's
/// overlay of their stores, before anything is written: an image refused
/// for any reason (a bad slot, a damaged root) is left exactly as it was.
/// A writable open replays the slots once the image is accepted.
fn pending_journal(pm: &Pm, g: &Geometry) -> Result<(Vec<PendingSlot>, HashMap<u64, u64>)> {
    let pending = journal::read_slots(pm, g)
        .into_iter()
        .filter_map(|v| {
            v.state
                .transpose()
                .map(|c| c.map(|(_, stores)| (v.slot, stores)))
        })
        .collect::<std::result::Result<Vec<_>, Corrupt>>()?;
    let mut overlay = HashMap::default();
    for (_, stores) in &pending {
        overlay.extend(stores.iter().copied());
    }
    Ok((pending, overlay))
}

/// The inodes the walk found damaged, in number order, each logged.
fn damaged_inodes(broken: &mut HashMap<u32, String>) -> Vec<(u32, String)> {
    let mut damaged: Vec<(u32, String)> = broken.drain().collect();
    damaged.sort();
    for (ino, why) in &damaged {
        tracing::error!(
            "inode {ino} is damaged ({why}); it answers EIO, everything else is served; \
             run fsck.pktfs on the image"
        );
    }
    damaged
}

/// Whether `damaged` makes the open read-only, and why (in `report`): what
/// a damaged chain still owns is unknown, so the allocator could hand it
/// out again, and writing could destroy what fsck might save. Only asked
/// of an open that would write.
fn damage_forbids_writing(damaged: &[(u32, String)], report: &mut OpenReport) -> bool {
    let Some((first, first_why)) = damaged.first() else {
        return false;
    };
    let why = format!(
        "{} damaged inode(s) found at open (first: inode {first}: {first_why}); \
         run fsck.pktfs -y, then mount read-write",
        damaged.len(),
    );
    tracing::error!("opened read-only: {why}");
    report.read_only_because = Some(why);
    true
}

/// Commit the link-count and parent fixes. Each is one selector store and
/// a journal slot holds JOURNAL_MAX_ENTRIES of them, so they are committed
/// in chunks of that many. Every fix stands alone (a value computed from
/// the tree), so a crash between chunks only leaves the rest to the next
/// open.
fn commit_link_fixes(vol: &Volume, fixes: &[(u32, AttrSlot)]) -> Result<()> {
    for chunk in fixes.chunks(JOURNAL_MAX_ENTRIES) {
        let mut commit = Commit::new();
        for &(ino, want) in chunk {
            let i = vol.inode(ino as u64)?;
            let mut gi = i.write().or_stop();
            vol.set_attr(&mut commit, &mut gi, want);
            drop(gi);
        }
        if !commit.is_empty() {
            commit.apply(vol);
        }
    }
    Ok(())
}

/// See [`Volume::check_invariants`]: every live inode against the media,
/// the allocator's counts, the rename map, and the buffers' reference
/// counts.
pub fn check_invariants(vol: &Volume) -> std::result::Result<(), String> {
    let g = &vol.geo;
    // Inode locks are taken with no table lock held (see `InodeTable`); an
    // inode freed since the snapshot is skipped, and the totals below then
    // hold only on a quiescent volume, which is what this is for.
    let map = vol.inodes.snapshot();
    let mut used_records = 0u64;
    let mut live_inodes = 0u64;
    let mut refs = vec![0u32; g.buffer_count as usize];
    for (ino, i) in map.iter() {
        let i = i.read().or_stop();
        if i.dead {
            continue;
        }
        live_inodes += 1;
        used_records += check_inode(vol, *ino, &i, &mut refs)?;
    }
    let a = vol.alloc.lock().or_stop();
    if used_records + a.free_record_count() != g.record_count {
        return Err(format!(
            "records: {used_records} used + {} free != {} (leak or double free)",
            a.free_record_count(),
            g.record_count
        ));
    }
    if live_inodes + a.free_inode_count() != g.inode_count as u64 {
        return Err(format!(
            "inodes: {} used + {} free != {}",
            live_inodes,
            a.free_inode_count(),
            g.inode_count
        ));
    }
    drop(a);
    check_rename_map(vol, &map)?;
    let a = vol.alloc.lock().or_stop();
    for (b, &want) in refs.iter().enumerate() {
        let have = a.refcount(b as u32);
        // The allocator holds one extra reference on its current small buffer.
        if have != want && have != want + 1 {
            return Err(format!(
                "buffer {b}: refcount {have}, records name it {want} times"
            ));
        }
    }
    Ok(())
}

/// One live inode (read-locked) against the media: its selector and
/// attributes, its byte count, and both chains record by record, whose
/// buffers it counts into `refs`. Returns how many records it has.
fn check_inode(
    vol: &Volume,
    ino: u32,
    i: &Inode,
    refs: &mut [u32],
) -> std::result::Result<u64, String> {
    let (g, pm) = (&vol.geo, &vol.pm);
    let pos = g.inode_pos(ino);
    let h = InodeHeader::from_bytes(pm.slice(pos.0, INODE_SIZE), pos, g.record_count)
        .map_err(|e| e.to_string())?;
    if (h.generation, h.live_slot) != (i.slot.generation, i.slot.live_slot) {
        return Err(format!(
            "inode {ino}: selector on media {:?} differs from DRAM {:?}",
            (h.generation, h.live_slot),
            i.slot
        ));
    }
    let so = pos.0 + SLOTS_OFF + h.live_slot as u64 * SLOT_SIZE;
    let mut a = AttrSlot::from_bytes(pm.slice(so, 64), PmOffset(so), h.generation)
        .map_err(|e| e.to_string())?;
    super::fold_dir_times(&mut a, &i.data);
    if i.attr.nlink == 0 && a.nlink != 0 {
        // Unlinked but still held (an open file, a replaced file whose
        // space a server frees after answering): the unlink committed
        // without touching its slot, which nothing reaches any more
        // (recovery frees it). Only the unlink's own changes differ.
        a.nlink = 0;
        a.ctime_ns = i.attr.ctime_ns;
    }
    if a != i.attr {
        return Err(format!(
            "inode {ino}: attributes on media {a:?} differ from DRAM {:?}",
            i.attr
        ));
    }
    if matches!(i.attr.kind, FileType::Regular | FileType::Symlink) {
        let sum: u64 = i.data.values().map(|r| r.r.len as u64).sum();
        if sum != i.data_bytes {
            return Err(format!(
                "inode {ino}: data_bytes {} but the records hold {sum}",
                i.data_bytes
            ));
        }
    }
    let mut records = 0;
    for (chain, head, name) in [
        (&i.data, h.data_head, "data"),
        (&i.xattrs, h.xattr_head, "xattr"),
    ] {
        let mut expect = head;
        for r in chain.values() {
            if r.id.0 != expect {
                return Err(format!(
                    "inode {ino}: {name} chain links to {expect} where DRAM has record {}",
                    r.id.0
                ));
            }
            let at = g.record_pos(r.id);
            let (onm, next) =
                Record::from_bytes(pm.slice(at.0, 64), at, g).map_err(|e| e.to_string())?;
            if onm != r.r {
                return Err(format!(
                    "inode {ino}: record {} on media {onm:?} differs from DRAM {:?}",
                    r.id.0, r.r
                ));
            }
            if !r.r.is_remote() {
                let (x, y) = r.slice().buffers(g.buffer_size_bytes);
                for b in x..=y {
                    refs[b as usize] += 1;
                }
            }
            records += 1;
            expect = next.0;
        }
        if expect != 0 {
            return Err(format!(
                "inode {ino}: {name} chain continues to record {expect} past DRAM's tail"
            ));
        }
    }
    let _ = (DATA_HEAD_OFF, XATTR_HEAD_OFF);
    Ok(records)
}

/// rename's loop check walks `ns`: it must name every live directory's
/// parent, and nothing else. The parents are read under the inode locks
/// first and compared under `ns` after (`ns` is a leaf: it is taken under
/// inode locks, so no inode may be waited for while it is held).
fn check_rename_map(vol: &Volume, map: &[(u32, InodeRef)]) -> std::result::Result<(), String> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for (ino, i) in map.iter() {
        let ino = *ino;
        let i = i.read().or_stop();
        if i.dead || i.attr.kind != FileType::Directory || i.attr.nlink == 0 {
            continue;
        }
        let want = if ino == ROOT_INO {
            ROOT_INO
        } else {
            i.attr.parent
        };
        parents.push((ino, want));
    }
    let ns = vol.ns.lock().or_stop();
    for &(ino, want) in &parents {
        if ns.dir_parent.get(&ino) != Some(&want) {
            return Err(format!(
                "directory {ino}: parent {want}, the rename map says {:?}",
                ns.dir_parent.get(&ino)
            ));
        }
    }
    if ns.dir_parent.len() != parents.len() {
        return Err(format!(
            "the rename map names {} directories, {} are live",
            ns.dir_parent.len(),
            parents.len()
        ));
    }
    Ok(())
}

/// See [`Volume::stray_buffer_refs`].
pub fn stray_buffer_refs(vol: &Volume) -> u64 {
    let g = &vol.geo;
    let mut refs = vec![0u32; g.buffer_count as usize];
    for (_, i) in vol.inodes.snapshot() {
        let i = i.read().or_stop();
        for r in i.data.values().chain(i.xattrs.values()) {
            if r.r.is_remote() {
                continue;
            }
            let (x, y) = r.slice().buffers(g.buffer_size_bytes);
            for b in x..=y {
                refs[b as usize] += 1;
            }
        }
    }
    let a = vol.alloc.lock().or_stop();
    let small = a.small_buffer();
    refs.iter()
        .enumerate()
        .map(|(b, &want)| {
            let own = u32::from(small == Some(b as u32));
            a.refcount(b as u32).saturating_sub(want + own) as u64
        })
        .sum()
}

impl From<Corrupt> for Box<FsError> {
    fn from(c: Corrupt) -> Self {
        Box::new(FsError::Corrupt(c))
    }
}
