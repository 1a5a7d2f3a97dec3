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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::io::IsTerminal;

use layout::inode::{DATA_HEAD_OFF, INODE_SIZE, SLOTS_OFF, SLOT_SIZE, XATTR_HEAD_OFF};
use layout::journal::parse_slot;
use layout::superblock::{BACKUP_OFFSET, PRIMARY_OFFSET, STATE_CLEAN, STATE_MOUNTED};
use layout::{
    AttrSlot, Corrupt, FileType, Geometry, InodeHeader, PmOffset, Record, RecordKind, Superblock,
    ROOT_INO,
};
use pktfs::media::Pm;

use crate::report::{Counts, Finding, Severity, SuperblockSummary};

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
    /// Link-word stores, applied in order (the last store to a word wins).
    Links(Vec<(u64, u64)>),
    /// Rewrite a record's fields (its link is kept).
    RewriteRecord {
        id: u64,
        rec: Record,
    },
    /// Shorten a data record to `new_len` bytes (only if its payload CRC still verifies).
    TrimRecord {
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
    pub free_records: Vec<u64>,
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
    pm: &'a Pm,
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
}

/// Data payloads at least this large are checked in the parallel phase.
const DEFER_BYTES: u32 = 64 << 10;

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty()
        && n.len() <= layout::NAME_MAX
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
pub(crate) fn scan(pm: &Pm, overlay: bool, progress: bool) -> ScanOut {
    let mut out = ScanOut::default();
    let len = pm.len();
    if len < BACKUP_OFFSET + 256 {
        out.fatal = Some(Fatal {
            operational: true,
            message: format!("image is {len} bytes: too small to be a pktfs image"),
        });
        return out;
    }
    let Some(g) = superblocks(pm, &mut out) else {
        return out;
    };
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
    };
    s.journal(overlay);
    s.tree();
    s.check_deferred();
    s.attr_fixes();
    s.relink_fixes();
    s.salvage_fix();
    s.accounting();
    if let Some(pb) = s.progress.take() {
        pb.finish_and_clear();
    }
    s.out
}

/// Both superblocks; returns the geometry to use.
fn superblocks(pm: &Pm, out: &mut ScanOut) -> Option<Geometry> {
    let len = pm.len();
    let p = Superblock::from_bytes(pm.slice(PRIMARY_OFFSET, 256), PRIMARY_OFFSET, len);
    let b = Superblock::from_bytes(pm.slice(BACKUP_OFFSET, 256), BACKUP_OFFSET, len);
    let add = |out: &mut ScanOut, f: Finding, fix: Option<PlannedFix>| {
        let mut f = f;
        if let Some(fx) = fix {
            f.repair = Some(fx.what.clone());
            f.fix = Some(out.fixes.len());
            out.fixes.push(fx);
        }
        out.findings.push(f);
    };
    let write = |offset: u64, sb: &Superblock, what: &str| PlannedFix {
        fix: Fix::Superblock {
            offset,
            bytes: Box::new(sb.to_bytes()),
        },
        safe: true,
        ino: None,
        path: None,
        what: what.to_string(),
    };
    let sb = match (&p, &b) {
        (Ok(p), Ok(b)) => {
            if p.geometry != b.geometry {
                // A writable mount rewrites both copies from the primary.
                let mut f = Finding::new(
                    Severity::Error,
                    "superblock.backup_geometry",
                    "backup superblock's geometry differs from the primary's",
                );
                f.mount_recovers = true;
                add(
                    out,
                    f,
                    Some(write(
                        BACKUP_OFFSET,
                        p,
                        "rewrite the backup superblock from the primary",
                    )),
                );
            } else if p.to_bytes() != b.to_bytes() {
                let mut f = Finding::new(
                    Severity::Info,
                    "superblock.backup_stale",
                    format!(
                        "backup superblock is older (mount count {} vs {}): a crash between the two superblock writes",
                        b.mount_count, p.mount_count
                    ),
                );
                f.mount_recovers = true;
                add(
                    out,
                    f,
                    Some(write(
                        BACKUP_OFFSET,
                        p,
                        "rewrite the backup superblock from the primary",
                    )),
                );
            }
            p.clone()
        }
        (Ok(p), Err(e)) => {
            // A crash while the backup was being rewritten; a writable mount
            // rewrites both copies.
            let mut f = Finding::new(
                Severity::Error,
                "superblock.backup",
                format!("backup superblock is bad: {e}"),
            );
            f.mount_recovers = true;
            add(
                out,
                f,
                Some(write(
                    BACKUP_OFFSET,
                    p,
                    "rewrite the backup superblock from the primary",
                )),
            );
            p.clone()
        }
        (Err(e), Ok(b)) => {
            if matches!(
                e,
                Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
            ) {
                out.fatal = Some(Fatal {
                    operational: true,
                    message: format!("{e}"),
                });
                return None;
            }
            let mut f = Finding::new(
                Severity::Error,
                "superblock.primary",
                format!("primary superblock is bad ({e}); the backup is valid"),
            );
            f.mount_recovers = true;
            add(
                out,
                f,
                Some(write(
                    PRIMARY_OFFSET,
                    b,
                    "restore the primary superblock from the backup",
                )),
            );
            b.clone()
        }
        (Err(e), Err(eb)) => {
            let not_pktfs =
                matches!(e, Corrupt::NotPktfs { .. }) && matches!(eb, Corrupt::NotPktfs { .. });
            let newer = matches!(
                e,
                Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
            );
            if not_pktfs || newer || matches!(e, Corrupt::Truncated { .. }) {
                out.fatal = Some(Fatal {
                    operational: true,
                    message: format!("{e}"),
                });
            } else {
                out.findings.push(Finding::new(
                    Severity::Error,
                    "superblock.none",
                    format!("no valid superblock: primary: {e}; backup: {eb}"),
                ));
                out.fatal = Some(Fatal {
                    operational: false,
                    message: "no valid superblock".into(),
                });
            }
            return None;
        }
    };
    match sb.state {
        STATE_CLEAN => {}
        STATE_MOUNTED => {
            let mut f = Finding::new(
                Severity::Info,
                "superblock.not_clean",
                "image was not unmounted cleanly (or is mounted)",
            );
            f.mount_recovers = true;
            out.findings.push(f);
        }
        s => out.findings.push(Finding::new(
            Severity::Warning,
            "superblock.state",
            format!("unknown mount state {s}"),
        )),
    }
    let label_end = sb
        .label
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(sb.label.len());
    out.superblock = Some(SuperblockSummary {
        image_len_bytes: sb.geometry.image_len_bytes,
        buffer_size_bytes: sb.geometry.buffer_size_bytes,
        inode_count: sb.geometry.inode_count,
        record_count: sb.geometry.record_count,
        buffer_count: sb.geometry.buffer_count,
        state: sb.state,
        mount_count: sb.mount_count,
        label: show(&sb.label[..label_end]),
    });
    Some(sb.geometry)
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
            for w in (0..N as u64).step_by(8) {
                if let Some(v) = self.overlay.get(&(off + w)) {
                    b[w as usize..w as usize + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
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
        let ok = self
            .payload(r)
            .is_some_and(|p| layout::crc32c(p) == r.payload_crc);
        self.out.counts.payload_bytes_checked += r.len as u64;
        if let Some(pb) = &self.progress {
            self.progress_pending += r.len as u64;
            if self.progress_pending >= 64 << 20 {
                pb.inc(self.progress_pending);
                self.progress_pending = 0;
            }
        }
        ok
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
        let g = self.g;
        for slot in 0..g.journal_slots {
            let pos = g.journal_slot_pos(slot);
            let Some(bytes) = self.bytes(pos.0, g.journal_slot_bytes as usize) else {
                continue;
            };
            match parse_slot(bytes, pos, &g) {
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

    // ---- inodes and chains ----------------------------------------------

    /// Load an inode: header, attributes (falling back to the other slot, or
    /// rebuilt from `want` when both are bad), then its chains. `None` if
    /// its attributes are unreadable and nothing says what it should be.
    fn load_inode(&mut self, ino: u32, want: Option<FileType>, path: String) -> Option<Ino> {
        if !self.g.ino_in_range(ino as u64) {
            return None;
        }
        let pos = self.g.inode_pos(ino).0;
        let bytes: [u8; INODE_SIZE] = self.read(pos)?;
        let sel = le64(&bytes[0..8]);
        let (generation, live) = (sel >> 1, (sel & 1) as usize);
        let so = SLOTS_OFF as usize + live * SLOT_SIZE as usize;
        let mut attr_findings = Vec::new();
        let mut fallback = None;
        let mut rebuilt = false;
        let mut attr_err = None;
        let root = ino == ROOT_INO;
        let mut attr = match AttrSlot::from_bytes(
            &bytes[so..so + 64],
            PmOffset(pos + so as u64),
            generation,
        ) {
            Ok(a) => Some(a),
            Err(e) => {
                attr_err = Some(format!("live attribute slot is bad: {e}"));
                let other = live ^ 1;
                let oo = SLOTS_OFF as usize + other * SLOT_SIZE as usize;
                let ob = &bytes[oo..oo + 64];
                let g32 = u32::from_le_bytes([ob[56], ob[57], ob[58], ob[59]]) as u64;
                let cands = [
                    generation.wrapping_sub(1),
                    (generation & !0xffff_ffff) | g32,
                    g32,
                ];
                cands
                    .iter()
                    .filter(|&&c| c <= u64::MAX >> 1)
                    .find_map(|&c| {
                        AttrSlot::from_bytes(ob, PmOffset(pos + oo as u64), c)
                            .ok()
                            .inspect(|_| fallback = Some(InodeHeader::selector(c, other as u8)))
                    })
            }
        };
        if attr.is_none() {
            let kind = if root {
                Some(FileType::Directory)
            } else {
                want
            };
            let kind = kind?;
            rebuilt = true;
            attr = Some(AttrSlot {
                kind,
                mode: match kind {
                    FileType::Directory => 0o755,
                    FileType::Symlink => 0o777,
                    _ => 0o644,
                },
                uid: 0,
                gid: 0,
                nlink: if kind == FileType::Directory { 2 } else { 1 },
                size: 0,
                atime_ns: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                rdev: 0,
                parent: if kind == FileType::Directory {
                    ROOT_INO
                } else {
                    0
                },
            });
        }
        let mut attr = attr?;
        // Only an inode that is loaded gets findings; one that cannot be is
        // reported through the dirent naming it (or not at all, for an
        // orphan candidate).
        if let Some(msg) = attr_err {
            let f = self.find(
                Severity::Error,
                "inode.attr",
                Some(ino),
                Some(&path),
                None,
                msg,
            );
            attr_findings.push(f);
        }
        if root && attr.kind != FileType::Directory {
            let f = self.find(
                Severity::Error,
                "root.kind",
                Some(ino),
                Some(&path),
                None,
                format!("root inode is a {}, not a directory", kind_name(attr.kind)),
            );
            attr_findings.push(f);
            rebuilt = true;
            attr.kind = FileType::Directory;
            attr.mode = 0o755;
            attr.size = 0;
            attr.rdev = 0;
        }
        let mut i = Ino {
            ino,
            path,
            attr,
            fallback,
            rebuilt,
            attr_findings,
            data: Chain::default(),
            xattr: Chain::default(),
            entries: Vec::new(),
            size_end: 0,
        };
        i.data = self.walk_chain(&mut i, false);
        i.xattr = self.walk_chain(&mut i, true);
        if rebuilt && attr.kind == FileType::Regular {
            i.attr.size = i.size_end;
        }
        Some(i)
    }

    fn walk_chain(&mut self, i: &mut Ino, xattr: bool) -> Chain {
        let g = self.g;
        let head_addr = g.inode_pos(i.ino).0 + if xattr { XATTR_HEAD_OFF } else { DATA_HEAD_OFF };
        let head_raw = self.read_u64(head_addr).unwrap_or(0);
        let mut c = Chain {
            head_addr,
            head_raw,
            ..Chain::default()
        };
        let which = if xattr { "xattr" } else { "data" };
        let kind = i.attr.kind;
        let expected = if xattr {
            Some(RecordKind::Xattr)
        } else {
            match kind {
                FileType::Directory => Some(RecordKind::Dirent),
                FileType::Regular | FileType::Symlink => Some(RecordKind::Data),
                _ => None,
            }
        };
        let path = i.path.clone();
        let ino = i.ino;
        let mut prev_end = 0u64;
        let mut prev_seq: Option<u64> = None;
        let mut names: HashSet<Vec<u8>> = HashSet::new();
        let mut sym_contig = true;
        let mut cur = head_raw;
        let mut from = "head".to_string();
        while cur != 0 {
            if !g.record_in_range(cur) {
                let f = self.find(
                    Severity::Error,
                    "chain.link",
                    Some(ino),
                    Some(&path),
                    None,
                    format!("{which} chain {from} links to record {cur}, outside the record table"),
                );
                c.findings.push(f);
                c.unsafe_reason = true;
                break;
            }
            let claimed = self.owner[cur as usize];
            if claimed != 0 {
                let (code, msg) = if claimed == ino {
                    (
                        "chain.cycle",
                        format!("{which} chain {from} loops back to record {cur}"),
                    )
                } else {
                    ("record.shared", format!("{which} chain {from} links to record {cur}, which belongs to inode {claimed}"))
                };
                let f = self.find(
                    Severity::Error,
                    code,
                    Some(ino),
                    Some(&path),
                    Some(cur),
                    msg,
                );
                c.findings.push(f);
                c.unsafe_reason = true;
                break;
            }
            let at = g.record_pos(layout::RecordId(cur));
            let Some(bytes) = self.read::<64>(at.0) else {
                break;
            };
            let (r, next) = match Record::from_bytes(&bytes, at, &g) {
                Ok(x) => x,
                Err(e) => {
                    let f = self.find(
                        Severity::Error,
                        "record.bad",
                        Some(ino),
                        Some(&path),
                        Some(cur),
                        format!("{which} chain: {e}"),
                    );
                    c.findings.push(f);
                    c.unsafe_reason = true;
                    if !xattr && kind == FileType::Directory {
                        self.tail_salvage(le64(&bytes[0..8]));
                    }
                    break;
                }
            };
            if Some(r.kind) != expected {
                let msg = match expected {
                    None => format!(
                        "a {} has no data chain, but its head links to a {:?} record",
                        kind_name(kind),
                        r.kind
                    ),
                    Some(k) => format!("{:?} record in the {which} chain (expected {k:?})", r.kind),
                };
                let f = self.find(
                    Severity::Error,
                    "chain.kind",
                    Some(ino),
                    Some(&path),
                    Some(cur),
                    msg,
                );
                c.findings.push(f);
                c.unsafe_reason = true;
                break;
            }
            let mut node = Node {
                id: cur,
                next_raw: next.0,
                keep: true,
                rec: r,
            };
            match r.kind {
                RecordKind::Data => {
                    if r.file_off < prev_end {
                        let f = self.find(
                            Severity::Error,
                            "data.order",
                            Some(ino),
                            Some(&path),
                            Some(cur),
                            format!("bytes [{}, {}) overlap or precede the previous record, which ends at {prev_end}", r.file_off, r.file_end()),
                        );
                        c.findings.push(f);
                        c.unsafe_reason = true;
                        break;
                    }
                    if kind == FileType::Regular && r.file_off >= i.attr.size && !i.rebuilt {
                        let f = self.find(
                            Severity::Error,
                            "data.past_size",
                            Some(ino),
                            Some(&path),
                            Some(cur),
                            format!(
                                "record at bytes [{}, {}) lies past the size {}",
                                r.file_off,
                                r.file_end(),
                                i.attr.size
                            ),
                        );
                        c.findings.push(f);
                        break;
                    }
                    self.owner[cur as usize] = ino;
                    // Large regular-file payloads are checked afterwards, in
                    // parallel (`check_deferred`); they assume good here.
                    let defer = kind == FileType::Regular && r.len >= DEFER_BYTES;
                    if defer {
                        self.deferred.push((ino, c.nodes.len(), r));
                    }
                    if !defer && !self.payload_ok(&r) {
                        let f = self.find(
                            Severity::Error,
                            "data.payload_crc",
                            Some(ino),
                            Some(&path),
                            Some(cur),
                            format!(
                                "payload checksum mismatch for bytes [{}, {})",
                                r.file_off,
                                r.file_end()
                            ),
                        );
                        c.findings.push(f);
                        c.unsafe_reason = true;
                        node.keep = false;
                    } else {
                        if kind == FileType::Regular && r.file_end() > i.attr.size && !i.rebuilt {
                            let f = self.find(
                                Severity::Error,
                                "data.past_size",
                                Some(ino),
                                Some(&path),
                                Some(cur),
                                format!(
                                    "record at bytes [{}, {}) runs past the size {}",
                                    r.file_off,
                                    r.file_end(),
                                    i.attr.size
                                ),
                            );
                            let new_len = (i.attr.size - r.file_off) as u32;
                            self.plan(
                                PlannedFix {
                                    fix: Fix::TrimRecord { id: cur, new_len },
                                    safe: true,
                                    ino: Some(ino),
                                    path: Some(path.clone()),
                                    what: format!("trim record {cur} to {new_len} bytes"),
                                },
                                &[f],
                            );
                        }
                        if kind == FileType::Symlink {
                            if r.file_off != i.size_end {
                                sym_contig = false;
                            }
                            if sym_contig {
                                i.size_end = r.file_end();
                            }
                        } else {
                            i.size_end =
                                r.file_end()
                                    .min(if i.rebuilt { u64::MAX } else { i.attr.size });
                        }
                    }
                    prev_end = r.file_end();
                }
                RecordKind::Dirent => {
                    self.owner[cur as usize] = ino;
                    let name = self.payload(&r).map(<[u8]>::to_vec).unwrap_or_default();
                    let crc_ok = self.payload_ok(&r);
                    let problem = if !crc_ok {
                        Some(("dirent.crc", "name checksum mismatch".to_string()))
                    } else if !valid_name(&name) {
                        Some(("dirent.name", format!("invalid name {:?}", show(&name))))
                    } else if prev_seq.is_some_and(|p| r.seq <= p) {
                        Some((
                            "dirent.order",
                            format!("entry {:?}: cookie {} out of order", show(&name), r.seq),
                        ))
                    } else if names.contains(&name) {
                        Some((
                            "dirent.duplicate",
                            format!("duplicate entry {:?}", show(&name)),
                        ))
                    } else {
                        None
                    };
                    match problem {
                        Some((code, msg)) => {
                            let f = self.find(
                                Severity::Error,
                                code,
                                Some(ino),
                                Some(&path),
                                Some(cur),
                                msg,
                            );
                            c.findings.push(f);
                            c.unsafe_reason = true;
                            node.keep = false;
                            self.salvage_cands.insert(r.dirent_ino());
                        }
                        None => {
                            prev_seq = Some(r.seq);
                            names.insert(name.clone());
                            i.entries.push(Entry {
                                node: c.nodes.len(),
                                name,
                                ino: r.dirent_ino(),
                                dtype: r.dirent_dtype(),
                                id: cur,
                                rec: r,
                            });
                        }
                    }
                }
                RecordKind::Xattr => {
                    self.owner[cur as usize] = ino;
                    let name = self
                        .payload(&r)
                        .map(|p| p[..(r.aux as usize).min(p.len())].to_vec())
                        .unwrap_or_default();
                    let problem = if !self.payload_ok(&r) {
                        Some((
                            "xattr.crc",
                            format!("attribute {:?}: checksum mismatch", show(&name)),
                        ))
                    } else if !names.insert(name.clone()) {
                        Some((
                            "xattr.duplicate",
                            format!("duplicate attribute {:?}", show(&name)),
                        ))
                    } else {
                        None
                    };
                    if let Some((code, msg)) = problem {
                        let f = self.find(
                            Severity::Error,
                            code,
                            Some(ino),
                            Some(&path),
                            Some(cur),
                            msg,
                        );
                        c.findings.push(f);
                        c.unsafe_reason = true;
                        node.keep = false;
                    }
                }
            }
            c.nodes.push(node);
            from = format!("record {cur}");
            cur = next.0;
        }
        if !xattr && kind == FileType::Symlink && !sym_contig {
            let f = self.find(
                Severity::Error,
                "symlink.gap",
                Some(ino),
                Some(&path),
                None,
                format!(
                    "symlink target has a hole; only its first {} bytes are contiguous",
                    i.size_end
                ),
            );
            // Cut the chain after the contiguous prefix.
            let mut end = 0;
            for n in c.nodes.iter_mut() {
                if !n.keep {
                    continue;
                }
                if n.rec.file_off != end {
                    n.keep = false;
                } else {
                    end = n.rec.file_end();
                }
            }
            c.findings.push(f);
            c.unsafe_reason = true;
        }
        c
    }

    /// Follow the raw `next` of a bad directory record: valid, unclaimed
    /// dirents after it name inodes that may now be orphans.
    fn tail_salvage(&mut self, mut cur: u64) {
        let mut seen = HashSet::new();
        for _ in 0..TAIL_SALVAGE_STEPS {
            if cur == 0
                || !self.g.record_in_range(cur)
                || self.owner[cur as usize] != 0
                || !seen.insert(cur)
            {
                return;
            }
            let at = self.g.record_pos(layout::RecordId(cur));
            let Some(bytes) = self.read::<64>(at.0) else {
                return;
            };
            let Ok((r, next)) = Record::from_bytes(&bytes, at, &self.g) else {
                return;
            };
            if r.kind != RecordKind::Dirent {
                return;
            }
            if self
                .payload(&r)
                .is_some_and(|p| layout::crc32c(p) == r.payload_crc)
            {
                self.salvage_cands.insert(r.dirent_ino());
            }
            cur = next.0;
        }
    }

    /// Verify the deferred payload CRCs on every core; a bad one drops its
    /// record from the chain (a hole), as in the walk.
    fn check_deferred(&mut self) {
        let jobs = std::mem::take(&mut self.deferred);
        if jobs.is_empty() {
            return;
        }
        let total: u64 = jobs.iter().map(|j| j.2.len as u64).sum();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 16);
        let threads = if total < (256 << 20) { 1 } else { threads };
        let share = total.div_ceil(threads as u64);
        let mut parts: Vec<(usize, usize)> = Vec::new();
        let (mut start, mut acc) = (0, 0u64);
        for (k, j) in jobs.iter().enumerate() {
            acc += j.2.len as u64;
            if acc >= share {
                parts.push((start, k + 1));
                start = k + 1;
                acc = 0;
            }
        }
        if start < jobs.len() {
            parts.push((start, jobs.len()));
        }
        let this = &*self;
        let all = &jobs;
        let bad: Vec<usize> = std::thread::scope(|sc| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&(a, b)| {
                    sc.spawn(move || {
                        let mut bad = Vec::new();
                        for (k, (_, _, r)) in all.iter().enumerate().take(b).skip(a) {
                            if this
                                .payload(r)
                                .is_none_or(|p| layout::crc32c(p) != r.payload_crc)
                            {
                                bad.push(k);
                            }
                            if let Some(pb) = &this.progress {
                                pb.inc(r.len as u64);
                            }
                        }
                        bad
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| match h.join() {
                    Ok(v) => v,
                    Err(p) => std::panic::resume_unwind(p),
                })
                .collect()
        });
        self.out.counts.payload_bytes_checked += total;
        for k in bad {
            let (ino, node, r) = jobs[k];
            let Some(i) = self.inodes.get(&ino) else {
                continue;
            };
            let (path, id) = (i.path.clone(), i.data.nodes.get(node).map(|n| n.id));
            let f = self.find(
                Severity::Error,
                "data.payload_crc",
                Some(ino),
                Some(&path),
                id,
                format!(
                    "payload checksum mismatch for bytes [{}, {})",
                    r.file_off,
                    r.file_end()
                ),
            );
            if let Some(i) = self.inodes.get_mut(&ino) {
                if let Some(n) = i.data.nodes.get_mut(node) {
                    n.keep = false;
                }
                i.data.findings.push(f);
                i.data.unsafe_reason = true;
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
            self.plan(
                PlannedFix {
                    fix: Fix::RewriteRecord { id: e.id, rec },
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

    // ---- attributes ------------------------------------------------------

    fn attr_fixes(&mut self) {
        let salvaged: HashSet<u32> = self.salvaged.iter().map(|s| s.0).collect();
        let inos: Vec<u32> = self.inodes.keys().copied().collect();
        for ino in inos {
            let mut findings = Vec::new();
            let Some(i) = self.inodes.get(&ino) else {
                continue;
            };
            let (path, attr, fallback, rebuilt) = (i.path.clone(), i.attr, i.fallback, i.rebuilt);
            findings.extend(i.attr_findings.iter().copied());
            let size_end = i.size_end;
            let mut want = attr;
            let mut safe = fallback.is_none() && !rebuilt;
            if !salvaged.contains(&ino) {
                if attr.kind == FileType::Directory {
                    want.nlink = 2 + self.subdirs.get(&ino).copied().unwrap_or(0);
                    want.parent = self.dir_parent.get(&ino).copied().unwrap_or(ROOT_INO);
                } else {
                    want.nlink = self.links.get(&ino).copied().unwrap_or(0);
                }
            }
            if attr.kind == FileType::Symlink && size_end != attr.size {
                want.size = size_end;
                if !rebuilt {
                    findings.push(self.find(
                        Severity::Error,
                        "symlink.size",
                        Some(ino),
                        Some(&path),
                        None,
                        format!("size {} but the target is {size_end} bytes", attr.size),
                    ));
                }
            }
            if want.nlink != attr.nlink && !rebuilt {
                findings.push(self.find(
                    Severity::Error,
                    "inode.nlink",
                    Some(ino),
                    Some(&path),
                    None,
                    format!("link count {}, should be {}", attr.nlink, want.nlink),
                ));
            }
            if want.parent != attr.parent && !rebuilt {
                findings.push(self.find(
                    Severity::Error,
                    "inode.parent",
                    Some(ino),
                    Some(&path),
                    None,
                    format!(
                        "parent (\"..\") is inode {}, should be {}",
                        attr.parent, want.parent
                    ),
                ));
            }
            if rebuilt {
                let f = self.find(
                    Severity::Error,
                    "inode.rebuilt",
                    Some(ino),
                    Some(&path),
                    None,
                    format!(
                        "no valid attribute slot: attributes must be rebuilt as a {}",
                        kind_name(want.kind)
                    ),
                );
                findings.push(f);
                safe = false;
            }
            let fix = if let (Some(sel), true) = (fallback, want == attr) {
                Some(Fix::SelectSlot { ino, selector: sel })
            } else if rebuilt || fallback.is_some() || want != attr {
                Some(Fix::WriteAttr { ino, attr: want })
            } else {
                None
            };
            if let Some(fix) = fix {
                let what = match &fix {
                    Fix::SelectSlot { .. } => {
                        "fall back to the previous attribute slot".to_string()
                    }
                    _ if rebuilt => format!(
                        "rebuild the attributes (mode {:o}, owner 0:0, size {})",
                        want.mode, want.size
                    ),
                    _ => {
                        let mut parts = Vec::new();
                        if fallback.is_some() {
                            parts.push("fall back to the previous attribute slot".to_string());
                        }
                        if want.nlink != attr.nlink {
                            parts.push(format!("set the link count to {}", want.nlink));
                        }
                        if want.parent != attr.parent {
                            parts.push(format!("set the parent to inode {}", want.parent));
                        }
                        if want.size != attr.size {
                            parts.push(format!("set the size to {}", want.size));
                        }
                        parts.join(", ")
                    }
                };
                self.plan(
                    PlannedFix {
                        fix,
                        safe,
                        ino: Some(ino),
                        path: Some(path),
                        what,
                    },
                    &findings,
                );
            }
        }
    }

    // ---- chains ----------------------------------------------------------

    /// The stores that make a chain exactly its kept records, in order.
    fn relink_stores(&self, c: &Chain) -> Vec<(u64, u64)> {
        let mut stores = Vec::new();
        let mut eff = c.head_addr;
        let mut eff_val = c.head_raw;
        for n in c.nodes.iter().filter(|n| n.keep) {
            if eff_val != n.id {
                stores.push((eff, n.id));
            }
            eff = self.g.record_pos(layout::RecordId(n.id)).0;
            eff_val = n.next_raw;
        }
        if eff_val != 0 {
            stores.push((eff, 0));
        }
        stores
    }

    fn relink_fixes(&mut self) {
        let inos: Vec<u32> = self.inodes.keys().copied().collect();
        for ino in inos {
            for xattr in [false, true] {
                let Some(i) = self.inodes.get(&ino) else {
                    continue;
                };
                let c = if xattr { &i.xattr } else { &i.data };
                let stores = self.relink_stores(c);
                if stores.is_empty() && c.findings.is_empty() {
                    continue;
                }
                let dropped = c.nodes.iter().filter(|n| !n.keep).count();
                let kept = c.nodes.len() - dropped;
                let (findings, safe, path) = (c.findings.clone(), !c.unsafe_reason, i.path.clone());
                if stores.is_empty() {
                    continue;
                }
                let which = if xattr { "xattr" } else { "data" };
                let what = if dropped > 0 {
                    format!(
                        "relink the {which} chain without {dropped} bad record(s), keeping {kept}"
                    )
                } else {
                    format!("truncate the {which} chain after {kept} record(s)")
                };
                self.plan(
                    PlannedFix {
                        fix: Fix::Links(stores),
                        safe,
                        ino: Some(ino),
                        path: Some(path),
                        what,
                    },
                    &findings,
                );
            }
        }
    }

    /// Where to append to directory `d`: the link word after its last kept
    /// entry, and that entry's cookie.
    fn dir_tail(&self, d: &Ino) -> (u64, u64) {
        match d.data.nodes.iter().rev().find(|n| n.keep) {
            Some(n) => (
                self.g.record_pos(layout::RecordId(n.id)).0,
                n.rec.seq.max(FIRST_COOKIE - 1),
            ),
            None => (d.data.head_addr, FIRST_COOKIE - 1),
        }
    }

    fn salvage_fix(&mut self) {
        if self.salvaged.is_empty() {
            return;
        }
        let Some(root) = self.inodes.get(&ROOT_INO) else {
            return;
        };
        let (root_tail, root_last_seq) = self.dir_tail(root);
        let mut lf = None;
        let mut lf_name = LOST_FOUND.to_vec();
        for e in &root.entries {
            if e.name == LOST_FOUND {
                match self.inodes.get(&e.ino) {
                    Some(d) if d.attr.kind == FileType::Directory && !d.rebuilt => {
                        let (tail, last) = self.dir_tail(d);
                        let names = d.entries.iter().map(|e| e.name.clone()).collect();
                        lf = Some((e.ino, tail, last, names));
                    }
                    _ => lf_name = b"lost+found.fsck".to_vec(),
                }
            }
        }
        let n = self.salvaged.len();
        let free_records: Vec<u64> = (1..=self.g.record_count)
            .filter(|&r| self.owner[r as usize] == 0)
            .take(n + 1)
            .collect();
        let free_inode = (2..=self.g.inode_count).find(|i| !self.inodes.contains_key(i));
        // Buffers no claimed record touches.
        let used = self.used_buffers(true);
        let bs = self.g.buffer_size_bytes as u64;
        let need = ((n as u64 + 1) * 24).div_ceil(bs) as usize + 1;
        let free_buffers: Vec<u32> = (0..self.g.buffer_count as u32)
            .filter(|&b| !used[b as usize])
            .take(need)
            .collect();
        let items = self.salvaged.clone();
        let mut findings = Vec::new();
        for &(t, k) in &items {
            let p = self.inodes.get(&t).map(|i| i.path.clone());
            findings.push(self.find(
                Severity::Error,
                "inode.orphan",
                Some(t),
                p.as_deref(),
                None,
                format!("{} {t} is no longer named by any directory", kind_name(k)),
            ));
        }
        let what = format!(
            "link {n} orphan(s) into /{}",
            show(lf.as_ref().map(|_| LOST_FOUND).unwrap_or(&lf_name))
        );
        self.plan(
            PlannedFix {
                fix: Fix::Salvage(Box::new(Salvage {
                    lf,
                    lf_name,
                    root_tail,
                    root_last_seq,
                    items,
                    free_records,
                    free_inode,
                    free_buffers,
                })),
                safe: false,
                ino: None,
                path: None,
                what,
            },
            &findings,
        );
    }

    /// Buffers touched by records: every claimed one (`all_claimed`), or
    /// only the kept records of reachable inodes.
    fn used_buffers(&self, all_claimed: bool) -> Vec<bool> {
        let mut used = vec![false; self.g.buffer_count as usize];
        let bs = self.g.buffer_size_bytes as u64;
        let mut mark = |r: &Record| {
            let start = r.buffer as u64 * bs + r.buf_off as u64;
            let end = start + (r.len as u64).max(1);
            for b in start / bs..end.div_ceil(bs) {
                if let Some(u) = used.get_mut(b as usize) {
                    *u = true;
                }
            }
        };
        for i in self.inodes.values() {
            for n in i.data.nodes.iter().chain(i.xattr.nodes.iter()) {
                if n.keep || all_claimed {
                    mark(&n.rec);
                }
            }
        }
        used
    }

    // ---- overlaps and accounting -----------------------------------------

    fn accounting(&mut self) {
        let bs = self.g.buffer_size_bytes as u64;
        let mut spans: Vec<(u64, u64, u64, RecordKind, u32)> = Vec::new();
        let c = &mut self.out.counts;
        for i in self.inodes.values() {
            c.inodes += 1;
            match i.attr.kind {
                FileType::Directory => c.directories += 1,
                FileType::Regular => c.regular_files += 1,
                FileType::Symlink => c.symlinks += 1,
                _ => c.special_files += 1,
            }
            for n in i
                .data
                .nodes
                .iter()
                .chain(i.xattr.nodes.iter())
                .filter(|n| n.keep)
            {
                c.records += 1;
                match n.rec.kind {
                    RecordKind::Data => {
                        c.data_records += 1;
                        c.stored_bytes += n.rec.len as u64;
                    }
                    RecordKind::Dirent => c.dirents += 1,
                    RecordKind::Xattr => c.xattrs += 1,
                }
                let start = n.rec.buffer as u64 * bs + n.rec.buf_off as u64;
                spans.push((start, start + n.rec.len as u64, n.id, n.rec.kind, i.ino));
            }
        }
        spans.sort_unstable_by_key(|s| (s.0, s.1, s.2));
        let mut shared = 0u64;
        let mut listed = 0usize;
        let mut warnings = Vec::new();
        // Sweep: the span reaching furthest so far.
        let mut far: Option<(u64, u64, RecordKind, u32)> = None;
        for &(s, e, id, k, ino) in &spans {
            if let Some((fe, fid, fk, fino)) = far {
                if s < fe {
                    if k == RecordKind::Data && fk == RecordKind::Data {
                        shared += 1;
                    } else if listed < MAX_OVERLAP_FINDINGS {
                        listed += 1;
                        warnings.push((ino, id, format!("{k:?} record {id} names buffer bytes that {fk:?} record {fid} of inode {fino} also names")));
                    } else {
                        listed += 1;
                    }
                }
                if e > fe {
                    far = Some((e, id, k, ino));
                }
            } else {
                far = Some((e, id, k, ino));
            }
        }
        let used = self.used_buffers(false);
        let n_used = used.iter().filter(|u| **u).count() as u64;
        let c = &mut self.out.counts;
        c.shared_ranges = shared;
        c.buffers_used = n_used;
        c.buffers_free = self.g.buffer_count - n_used;
        c.records_free = self.g.record_count - c.records;
        c.inodes_free = self.g.inode_count as u64 - c.inodes;
        if shared > 0 {
            self.find(
                Severity::Info,
                "data.shared",
                None,
                None,
                None,
                format!(
                    "{shared} data record pair(s) share buffer bytes (copy_file_range reflinks)"
                ),
            );
        }
        for (ino, id, msg) in warnings {
            let path = self.inodes.get(&ino).map(|i| i.path.clone());
            self.find(
                Severity::Warning,
                "buffer.overlap",
                Some(ino),
                path.as_deref(),
                Some(id),
                msg,
            );
        }
        if listed > MAX_OVERLAP_FINDINGS {
            self.find(
                Severity::Warning,
                "buffer.overlap",
                None,
                None,
                None,
                format!("{} more overlaps not listed", listed - MAX_OVERLAP_FINDINGS),
            );
        }
        if let Some(pb) = &self.progress {
            pb.inc(self.progress_pending);
        }
    }
}
