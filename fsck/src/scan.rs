//! The independent walk of an image: everything fsck checks, and the fixes
//! it would make. Nothing here writes; `apply` does.
//!
//! Order: superblocks, journal (committed slots are overlaid on the link
//! words they name, as recovery would replay them), then a breadth-first
//! walk from the root that loads each reachable inode once, walks its data
//! and xattr chains (claiming every record, so cycles and double claims are
//! found and every walk ends), checks every payload CRC, then the tree
//! (dirent targets and types, directories linked twice), orphans
//! (salvageable inodes whose dirent had to go), link counts, parents and
//! sizes, and last the buffer bytes every kept record names (overlaps and
//! space accounting).

mod account;
mod chain;
mod damage;
mod find_sb;
mod inode;
mod lost;
mod plan;
mod superblock;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::io::IsTerminal;

use pktfs_fs::media::ExclusivePm;
use pktfs_layout::inode::{DATA_HEAD_OFF, INODE_SIZE, SLOTS_OFF, SLOT_SIZE, XATTR_HEAD_OFF};
use pktfs_layout::record::FLAG_DAMAGED;
use pktfs_layout::superblock::{BACKUP_OFFSET, PRIMARY_OFFSET, STATE_CLEAN, STATE_MOUNTED};
use pktfs_layout::{
    AttrSlot, Corrupt, FileType, Geometry, InodeHeader, PmOffset, Record, RecordKind, Superblock,
    ROOT_INO,
};

use crate::findings::{Counts, DamagedRange, Finding, Severity, SuperblockSummary};

/// Cookies 1 and 2 are "." and ".." in readdir; real entries start here.
pub(crate) const FIRST_COOKIE: u64 = 3;
pub(crate) const LOST_FOUND: &[u8] = b"lost+found";
/// Most records followed past a bad one when looking for orphans.
const TAIL_SALVAGE_STEPS: usize = 4096;
/// Most overlap warnings listed one by one.
const MAX_OVERLAP_FINDINGS: usize = 64;

#[derive(Clone, Debug)]
pub(crate) struct Fatal {
    /// fsck could not run (exit 8) rather than found the image beyond repair (exit 4).
    pub operational: bool,
    pub message: String,
}

#[derive(Clone, Debug)]
pub(crate) enum Fix {
    JournalReplay {
        slot: u32,
        stores: Vec<(u64, u64)>,
    },
    JournalDiscard {
        slot: u32,
    },
    Superblock {
        offset: u64,
        bytes: Box<[u8; 256]>,
    },
    /// New records (id, fields, link) written into spare records and
    /// persisted first, then link-word stores applied in order (the last
    /// store to a word wins). The new records are the marks of lost ranges
    /// ([`lost`]): nothing reaches them until a store does, so a crash
    /// before it leaves the chain as it was.
    Links {
        records: Vec<(u64, Record, u64)>,
        stores: Vec<(u64, u64)>,
    },
    /// Replace record `id` of the chain whose head word is `head` by a copy
    /// with fields `rec` (its link is kept): a spare record, persisted, then
    /// one publish of the link that reaches `id` (a record rewritten in
    /// place could be torn by a crash).
    RewriteRecord {
        head: u64,
        id: u64,
        rec: Record,
    },
    /// Shorten a data record to `new_len` bytes, by replacement as above.
    /// Its new payload CRC is computed only if the old one still verifies;
    /// a damaged record keeps its flag and stored CRC, anything else is
    /// left alone.
    TrimRecord {
        head: u64,
        id: u64,
        new_len: u32,
    },
    /// Publish a selector naming the other attribute slot.
    SelectSlot {
        ino: u32,
        selector: u64,
    },
    /// Shadow-update the attributes.
    WriteAttr {
        ino: u32,
        attr: AttrSlot,
    },
    Salvage(Box<Salvage>),
}

impl Fix {
    pub(crate) fn is_journal(&self) -> bool {
        matches!(self, Fix::JournalReplay { .. } | Fix::JournalDiscard { .. })
    }
    pub(crate) fn is_superblock(&self) -> bool {
        matches!(self, Fix::Superblock { .. })
    }
}

#[derive(Clone, Debug)]
pub(crate) struct PlannedFix {
    pub fix: Fix,
    /// `-p` may apply it: nothing is dropped or reverted.
    pub safe: bool,
    pub ino: Option<u32>,
    pub path: Option<String>,
    pub what: String,
}

/// Linking orphans into lost+found: everything `apply` needs, precomputed
/// from the scan's claim maps.
#[derive(Clone, Debug)]
pub(crate) struct Salvage {
    /// Existing lost+found: its inode, the link word after its last entry,
    /// its last cookie, and its names.
    pub lf: Option<(u32, u64, u64, HashSet<Vec<u8>>)>,
    /// Name for a new lost+found (when `lf` is None).
    pub lf_name: Vec<u8>,
    /// Root: the link word after its last entry, and its last cookie.
    pub root_tail: u64,
    pub root_last_seq: u64,
    pub items: Vec<(u32, FileType)>,
    pub free_inode: Option<u32>,
    pub free_buffers: Vec<u32>,
}

#[derive(Debug, Default)]
pub(crate) struct ScanOut {
    pub fatal: Option<Fatal>,
    pub findings: Vec<Finding>,
    pub fixes: Vec<PlannedFix>,
    pub counts: Counts,
    pub superblock: Option<SuperblockSummary>,
    pub geometry: Option<Geometry>,
    /// The superblock in use (the primary, or the backup when it is bad).
    pub sb: Option<Superblock>,
    /// Both copies were bad: `sb` was inferred from the image's structure.
    pub geometry_inferred: bool,
    /// Damaged byte ranges of regular files.
    pub damaged: Vec<DamagedRange>,
    /// Records no chain claims, for the fixes that need new ones (record
    /// replacements, lost+found dirents), taken in order by `apply`.
    pub spare_records: Vec<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    id: u64,
    next_raw: u64,
    keep: bool,
    rec: Record,
}

#[derive(Clone, Debug, Default)]
struct Chain {
    head_addr: u64,
    head_raw: u64,
    nodes: Vec<Node>,
    /// Findings whose repair is relinking this chain.
    findings: Vec<usize>,
    /// Every reason to relink is safe for `-p`.
    unsafe_reason: bool,
    /// A regular file's data chain: where the walk had to stop (see `lost`).
    cut: Option<lost::Cut>,
    /// Byte ranges of the file lost at a cut, where marks go.
    lost: Vec<lost::Lost>,
    /// Records after a cut that were linked back in.
    relinked: usize,
    /// Marks of lost ranges (ids of spare records, among `nodes`).
    marks: HashSet<u64>,
}

#[derive(Clone, Debug)]
struct Entry {
    node: usize,
    name: Vec<u8>,
    ino: u32,
    dtype: u8,
    id: u64,
    rec: Record,
}

#[derive(Debug)]
struct Ino {
    ino: u32,
    path: String,
    /// Attributes to build on: the live slot, the fallback slot, or rebuilt.
    attr: AttrSlot,
    /// Selector naming a valid fallback slot (the live one is bad).
    fallback: Option<u64>,
    rebuilt: bool,
    attr_findings: Vec<usize>,
    data: Chain,
    xattr: Chain,
    entries: Vec<Entry>,
    /// Regular: end of the last kept record. Symlink: contiguous target length.
    size_end: u64,
}

struct Scan<'a> {
    pm: &'a ExclusivePm<'a>,
    g: Geometry,
    overlay: HashMap<u64, u64>,
    out: ScanOut,
    /// Record index -> inode that claimed it (0: unclaimed).
    owner: Vec<u32>,
    inodes: BTreeMap<u32, Ino>,
    bad: HashSet<u32>,
    links: HashMap<u32, u32>,
    subdirs: HashMap<u32, u32>,
    dir_parent: HashMap<u32, u32>,
    salvage_cands: BTreeSet<u32>,
    salvaged: Vec<(u32, FileType)>,
    progress: Option<indicatif::ProgressBar>,
    progress_pending: u64,
    /// Payload CRCs to check in parallel: (inode, node index in its data chain, record).
    deferred: Vec<(u32, usize, Record)>,
    /// `--drop-damaged`: damaged ranges become holes instead of being marked.
    drop_damaged: bool,
    /// Damaged data records found, to mark (see `damage`).
    damage: Vec<damage::Note>,
    /// Records some link reaches that no chain claims (a bad record, a
    /// record of the wrong kind or out of order, records after a bad
    /// directory record where orphans are looked for, records followed past
    /// a cut): never reused as spares. A spare is written before the links
    /// of other chains are repaired, and one of these could still be
    /// reachable then; a later pass can also still find them.
    tail_records: HashSet<u64>,
    /// Where `lost` looks for spare records for marks next.
    spare_cursor: u64,
    /// Some lost range will be marked: the DAMAGE_FLAGS feature goes first.
    lost_marks: bool,
}

/// Data payloads at least this large are checked in the parallel phase.
const DEFER_BYTES: u32 = 64 << 10;

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty()
        && n.len() <= pktfs_layout::NAME_MAX
        && n != b"."
        && n != b".."
        && !n.contains(&b'/')
        && !n.contains(&0)
}

fn show(name: &[u8]) -> String {
    String::from_utf8_lossy(name).into_owned()
}

fn join(parent: &str, name: &[u8]) -> String {
    if parent == "/" {
        format!("/{}", show(name))
    } else {
        format!("{parent}/{}", show(name))
    }
}

fn kind_name(k: FileType) -> &'static str {
    match k {
        FileType::Regular => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharDevice => "character device",
        FileType::BlockDevice => "block device",
    }
}

fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// Run the scan. `overlay`: view committed journal slots as replayed.
/// `drop_damaged`: plan damaged data ranges as holes instead of marking them.
pub(crate) fn scan(
    pm: &ExclusivePm<'_>,
    overlay: bool,
    progress: bool,
    drop_damaged: bool,
) -> ScanOut {
    let mut out = ScanOut::default();
    let len = pm.len();
    if len < BACKUP_OFFSET + 256 {
        out.fatal = Some(Fatal {
            operational: true,
            message: format!("image is {len} bytes: too small to be a pktfs image"),
        });
        return out;
    }
    let g = match superblock::superblocks(pm, &mut out) {
        Some(g) => g,
        None => match find_sb::recover(pm, &mut out, drop_damaged) {
            Some(g) => g,
            None => return out,
        },
    };
    walk(pm, g, out, overlay, progress, drop_damaged)
}

/// Everything after the superblocks, on geometry `g`.
fn walk(
    pm: &ExclusivePm<'_>,
    g: Geometry,
    out: ScanOut,
    overlay: bool,
    progress: bool,
    drop_damaged: bool,
) -> ScanOut {
    let mut out = out;
    out.geometry = Some(g);
    let show_progress =
        progress && std::io::stderr().is_terminal() && g.buffer_region_bytes() >= (1 << 30);
    let mut s = Scan {
        pm,
        g,
        overlay: HashMap::new(),
        out,
        owner: vec![0; g.record_count as usize + 1],
        inodes: BTreeMap::new(),
        bad: HashSet::new(),
        links: HashMap::new(),
        subdirs: HashMap::new(),
        dir_parent: HashMap::new(),
        salvage_cands: BTreeSet::new(),
        salvaged: Vec::new(),
        progress: show_progress.then(|| {
            let pb = indicatif::ProgressBar::new_spinner();
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} fsck.pktfs: {bytes} of payload verified ({bytes_per_sec}) {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            pb
        }),
        progress_pending: 0,
        deferred: Vec::new(),
        drop_damaged,
        damage: Vec::new(),
        tail_records: HashSet::new(),
        spare_cursor: 1,
        lost_marks: false,
    };
    s.journal(overlay);
    s.tree();
    s.follow_cuts();
    s.check_deferred();
    s.damage_fixes();
    s.attr_fixes();
    s.relink_fixes();
    s.salvage_fix();
    s.accounting();
    s.reserve_spare_records();
    if let Some(pb) = s.progress.take() {
        pb.finish_and_clear();
    }
    s.out
}

impl Scan<'_> {
    // ---- reading -------------------------------------------------------

    /// `len` bytes at `off`, if inside the image (always, for addresses
    /// derived from the validated geometry; checked anyway).
    fn bytes(&self, off: u64, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len as u64)?;
        (end <= self.pm.len()).then(|| self.pm.slice(off, len))
    }

    /// Bytes with the journal overlay applied to the link words inside.
    fn read<const N: usize>(&self, off: u64) -> Option<[u8; N]> {
        let mut b = [0u8; N];
        b.copy_from_slice(self.bytes(off, N)?);
        if !self.overlay.is_empty() {
            pktfs_fs::volume::journal::overlay(&mut b, off, |a| self.overlay.get(&a).copied());
        }
        Some(b)
    }

    fn read_u64(&self, off: u64) -> Option<u64> {
        self.read::<8>(off).map(u64::from_le_bytes)
    }

    fn payload(&self, r: &Record) -> Option<&[u8]> {
        // Record::from_bytes checked the slice against the buffer region.
        self.bytes(self.g.buffer_pos(r.buffer, r.buf_off).0, r.len as usize)
    }

    fn payload_ok(&mut self, r: &Record) -> bool {
        self.payload_crc(r) == Some(r.payload_crc)
    }

    /// The CRC32C of a record's payload as it is now (None: unreadable),
    /// counted as verified.
    fn payload_crc(&mut self, r: &Record) -> Option<u32> {
        let crc = self.payload(r).map(pktfs_layout::crc32c);
        self.out.counts.payload_bytes_checked += r.len as u64;
        if let Some(pb) = &self.progress {
            self.progress_pending += r.len as u64;
            if self.progress_pending >= 64 << 20 {
                pb.inc(self.progress_pending);
                self.progress_pending = 0;
            }
        }
        crc
    }

    // ---- findings and fixes ---------------------------------------------

    fn find(
        &mut self,
        sev: Severity,
        code: &'static str,
        ino: Option<u32>,
        path: Option<&str>,
        record: Option<u64>,
        msg: String,
    ) -> usize {
        let mut f = Finding::new(sev, code, msg);
        f.ino = ino;
        f.path = path.map(str::to_string);
        f.record = record;
        self.out.findings.push(f);
        self.out.findings.len() - 1
    }

    fn plan(&mut self, fix: PlannedFix, findings: &[usize]) -> usize {
        let i = self.out.fixes.len();
        for &f in findings {
            if let Some(x) = self.out.findings.get_mut(f) {
                x.fix = Some(i);
                x.repair = Some(fix.what.clone());
            }
        }
        self.out.fixes.push(fix);
        i
    }

    // ---- journal --------------------------------------------------------

    fn journal(&mut self, overlay: bool) {
        for v in pktfs_fs::volume::journal::read_slots_excl(self.pm, &self.g) {
            let slot = v.slot;
            match v.state {
                Ok(None) => {}
                Ok(Some((seq, stores))) => {
                    self.out.counts.journal_slots_pending += 1;
                    let f = self.find(
                        Severity::Info,
                        "journal.pending",
                        None,
                        None,
                        None,
                        format!("journal slot {slot} holds committed operation {seq} ({} stores) that recovery will replay", stores.len()),
                    );
                    self.out.findings[f].mount_recovers = true;
                    if overlay {
                        self.overlay.extend(stores.iter().copied());
                    }
                    self.plan(
                        PlannedFix {
                            fix: Fix::JournalReplay { slot, stores },
                            safe: true,
                            ino: None,
                            path: None,
                            what: format!("replay journal slot {slot}"),
                        },
                        &[f],
                    );
                }
                Err(e) => {
                    let f = self.find(
                        Severity::Error,
                        "journal.invalid",
                        None,
                        None,
                        None,
                        format!("journal slot {slot} is committed but cannot be replayed: {e}"),
                    );
                    self.plan(
                        PlannedFix {
                            fix: Fix::JournalDiscard { slot },
                            safe: true,
                            ino: None,
                            path: None,
                            what: format!("discard journal slot {slot}"),
                        },
                        &[f],
                    );
                }
            }
        }
    }

    // ---- the tree --------------------------------------------------------

    fn tree(&mut self) {
        let Some(root) = self.load_inode(ROOT_INO, Some(FileType::Directory), "/".into()) else {
            self.out.fatal = Some(Fatal {
                operational: false,
                message: "root inode is unusable".into(),
            });
            return;
        };
        self.inodes.insert(ROOT_INO, root);
        self.dir_parent.insert(ROOT_INO, ROOT_INO);
        let mut queue = VecDeque::from([ROOT_INO]);
        self.drain(&mut queue);
        // Orphans: inodes whose dirent had to go (or that followed a bad
        // record in a directory chain) and that nothing else reaches.
        loop {
            let cands: Vec<u32> = std::mem::take(&mut self.salvage_cands)
                .into_iter()
                .filter(|t| *t != ROOT_INO && !self.inodes.contains_key(t) && !self.bad.contains(t))
                .collect();
            if cands.is_empty() {
                break;
            }
            for t in cands {
                if self.inodes.contains_key(&t) {
                    continue;
                }
                match self.load_inode(t, None, format!("/lost+found/#{t}")) {
                    Some(i) => {
                        if i.rebuilt {
                            // Only valid inodes are worth salvaging.
                            continue;
                        }
                        let k = i.attr.kind;
                        self.salvaged.push((t, k));
                        if k == FileType::Directory {
                            queue.push_back(t);
                        }
                        self.inodes.insert(t, i);
                    }
                    None => {
                        self.bad.insert(t);
                    }
                }
            }
            self.drain(&mut queue);
        }
    }

    fn drain(&mut self, queue: &mut VecDeque<u32>) {
        while let Some(d) = queue.pop_front() {
            let (entries, dpath) = match self.inodes.get_mut(&d) {
                Some(i) => (std::mem::take(&mut i.entries), i.path.clone()),
                None => continue,
            };
            let mut kept = Vec::with_capacity(entries.len());
            for e in entries {
                if self.visit(d, &dpath, &e, queue) {
                    kept.push(e);
                }
            }
            if let Some(i) = self.inodes.get_mut(&d) {
                i.entries = kept;
            }
        }
    }

    /// Drop a dirent from directory `d` (its chain will be relinked without it).
    fn drop_entry(&mut self, d: u32, e: &Entry, f: usize) {
        if let Some(i) = self.inodes.get_mut(&d) {
            if let Some(n) = i.data.nodes.get_mut(e.node) {
                n.keep = false;
            }
            i.data.findings.push(f);
            i.data.unsafe_reason = true;
        }
    }

    /// One dirent of directory `d`; false if it is dropped.
    fn visit(&mut self, d: u32, dpath: &str, e: &Entry, queue: &mut VecDeque<u32>) -> bool {
        let t = e.ino;
        let path = join(dpath, &e.name);
        let name = show(&e.name);
        if t == ROOT_INO {
            let f = self.find(
                Severity::Error,
                "dirent.root",
                Some(d),
                Some(dpath),
                Some(e.id),
                format!("entry {name:?} names the root directory"),
            );
            self.drop_entry(d, e, f);
            return false;
        }
        if self.bad.contains(&t) {
            let f = self.find(
                Severity::Error,
                "dirent.target",
                Some(d),
                Some(dpath),
                Some(e.id),
                format!("entry {name:?} names inode {t}, which is unreadable"),
            );
            self.drop_entry(d, e, f);
            return false;
        }
        let kind = match self.inodes.get(&t) {
            Some(ti) => {
                if ti.attr.kind == FileType::Directory {
                    let f = self.find(
                        Severity::Error,
                        "dirent.dir_twice",
                        Some(d),
                        Some(dpath),
                        Some(e.id),
                        format!(
                            "entry {name:?} links directory {t} a second time (it is {})",
                            ti.path
                        ),
                    );
                    self.drop_entry(d, e, f);
                    return false;
                }
                ti.attr.kind
            }
            None => {
                let want = FileType::from_dtype(e.dtype);
                let Some(ti) = self.load_inode(t, want, path.clone()) else {
                    self.bad.insert(t);
                    let f = self.find(
                        Severity::Error,
                        "dirent.target",
                        Some(d),
                        Some(dpath),
                        Some(e.id),
                        format!("entry {name:?} names inode {t}, whose attributes are unreadable"),
                    );
                    self.drop_entry(d, e, f);
                    return false;
                };
                let k = ti.attr.kind;
                if k == FileType::Directory {
                    self.dir_parent.insert(t, d);
                    *self.subdirs.entry(d).or_default() += 1;
                    queue.push_back(t);
                }
                self.inodes.insert(t, ti);
                k
            }
        };
        *self.links.entry(t).or_default() += 1;
        if kind.dtype() != e.dtype {
            let f = self.find(
                Severity::Error,
                "dirent.type",
                Some(d),
                Some(dpath),
                Some(e.id),
                format!(
                    "entry {name:?} says type {} but inode {t} is a {}",
                    e.dtype,
                    kind_name(kind)
                ),
            );
            let mut rec = e.rec;
            rec.aux = Record::dirent_aux(t, kind.dtype());
            let head = self.inodes.get(&d).map_or(0, |i| i.data.head_addr);
            self.plan(
                PlannedFix {
                    fix: Fix::RewriteRecord {
                        head,
                        id: e.id,
                        rec,
                    },
                    safe: true,
                    ino: Some(d),
                    path: Some(dpath.to_string()),
                    what: format!("set the type of entry {name:?} to {}", kind_name(kind)),
                },
                &[f],
            );
        }
        true
    }
}
