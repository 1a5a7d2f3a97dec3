//! Finding the geometry when both superblock copies are bad, as
//! `e2fsck -b` does with a backup, except that pktfs has no third copy: the
//! regions' own structure says where they lie.
//!
//! What is fixed for every image mkfs makes: the journal at 8192 and the
//! inode table right after it (4 KiB aligned), so the root inode is found
//! without any geometry. Its live attribute slot must validate and say
//! "directory". Its first dirent (`data_head` = record `r`) then pins the
//! record table: a 4 KiB-aligned `record_offset` where record `r` has a
//! valid record CRC and is a dirent. That dirent's name pins the buffer
//! region: a 4 KiB-aligned `buffer_offset` and a buffer size (a power of
//! two, 512..1 MiB) where `<buffer, buf_off, len>` holds bytes matching its
//! payload CRC. Each consistent (record_offset, buffer size, buffer_offset)
//! is a candidate; mkfs's own layout for that buffer size is preferred when
//! it agrees, otherwise the counts are the largest that fit (the padding
//! between regions is zeroed at mkfs, so the extra inodes and records are
//! free ones). Candidates are then scored by a full walk; the one with the
//! fewest errors wins, and only if its walk finds no fatal problem.
//!
//! The image length is the file's (rounded down to 4 KiB, as mkfs does).
//! An empty root gives nothing to go on past the inode table: the image
//! holds nothing reachable, and mkfs's default layout is used.

use pktfs_layout::geometry::{GeometryParams, MAX_BUFFER_SIZE, MIN_BUFFER_SIZE};
use pktfs_layout::inode::INODE_SIZE;
use pktfs_layout::journal::{JOURNAL_SLOTS, JOURNAL_SLOT_BYTES};
use pktfs_layout::superblock::STATE_CLEAN;
use pktfs_layout::RECORD_SIZE;

use super::*;

const ALIGN: u64 = 4096;
/// Most candidate geometries scored by a full walk.
const MAX_CANDIDATES: usize = 64;

/// Both copies are bad: look for the geometry. On success the scan goes on
/// with it, the superblock finding gets a repair (rewrite both copies; not
/// in preen: the geometry is inferred, so a person asks for it with -y)
/// and `out.fatal` is cleared.
pub(super) fn recover(
    pm: &ExclusivePm<'_>,
    out: &mut ScanOut,
    drop_damaged: bool,
) -> Option<Geometry> {
    let len = pm.len();
    // A newer format, an unknown incompatible feature or a truncated image
    // is not damage: leave them to the message superblocks() gave.
    let refuse = |off: u64| {
        matches!(
            Superblock::from_bytes(pm.slice(off, 256), off, len),
            Err(Corrupt::NewerVersion { .. }
                | Corrupt::UnknownIncompat { .. }
                | Corrupt::Truncated { .. })
        )
    };
    if refuse(PRIMARY_OFFSET) || refuse(BACKUP_OFFSET) {
        return None;
    }
    let mut best: Option<(usize, Superblock)> = None;
    for g in candidates(pm) {
        let sb = Superblock::new(g, [0; 16], 0);
        let trial = walk(
            pm,
            g,
            ScanOut {
                sb: Some(sb.clone()),
                ..ScanOut::default()
            },
            true,
            false,
            drop_damaged,
        );
        if trial.fatal.is_some() {
            continue;
        }
        let errors = trial
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        if best.as_ref().is_none_or(|(e, _)| errors < *e) {
            best = Some((errors, sb));
        }
    }
    let (errors, mut sb) = best?;
    sb.state = STATE_CLEAN;
    sb.created_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // The uuid is lost with both copies; a new one, derived from the time
    // and the geometry, names the image from now on.
    let seed = sb.created_ns.to_le_bytes();
    let a = pktfs_layout::crc32c(&seed).to_le_bytes();
    let b = pktfs_layout::crc32c(&sb.to_bytes()[24..104]).to_le_bytes();
    sb.uuid[..4].copy_from_slice(&a);
    sb.uuid[4..8].copy_from_slice(&b);
    sb.uuid[8..16].copy_from_slice(&seed);
    let g = sb.geometry;
    let f = match out
        .findings
        .iter()
        .position(|f| f.code == "superblock.none")
    {
        Some(f) => f,
        None => {
            out.findings.push(Finding::new(
                Severity::Error,
                "superblock.none",
                "no valid superblock: both copies are bad",
            ));
            out.findings.len() - 1
        }
    };
    let what = format!(
        "rewrite both superblocks with the geometry the regions show: {} bytes, \
         {} inodes, {} records, {} buffers of {} bytes ({errors} other error(s) with it)",
        g.image_len_bytes, g.inode_count, g.record_count, g.buffer_count, g.buffer_size_bytes
    );
    for offset in [PRIMARY_OFFSET, BACKUP_OFFSET] {
        out.fixes.push(PlannedFix {
            fix: Fix::Superblock {
                offset,
                bytes: Box::new(sb.to_bytes()),
            },
            safe: false,
            ino: None,
            path: None,
            what: what.clone(),
        });
    }
    if let Some(x) = out.findings.get_mut(f) {
        x.fix = Some(out.fixes.len() - 1);
        x.repair = Some(what);
        x.message = format!(
            "{}; the geometry was found from the image's structure",
            x.message
        );
    }
    out.fatal = None;
    out.sb = Some(sb);
    out.geometry_inferred = true;
    Some(g)
}

/// The inode table's offset in every image mkfs makes.
fn inode_offset() -> u64 {
    (8192 + JOURNAL_SLOTS as u64 * JOURNAL_SLOT_BYTES as u64).div_ceil(ALIGN) * ALIGN
}

fn bytes_at<'a>(pm: &'a ExclusivePm<'_>, off: u64, len: u64) -> Option<&'a [u8]> {
    let end = off.checked_add(len)?;
    (end <= pm.len()).then(|| pm.slice(off, len as usize))
}

/// Record `bytes` has a valid record CRC and is a dirent.
fn dirent_like(bytes: &[u8]) -> Option<Record> {
    if bytes.len() < RECORD_SIZE || bytes[56] != RecordKind::Dirent as u8 {
        return None;
    }
    let crc = u32::from_le_bytes([bytes[60], bytes[61], bytes[62], bytes[63]]);
    if pktfs_layout::crc32c(&bytes[8..60]) != crc {
        return None;
    }
    let le32 = |o: usize| u32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]);
    let len = le32(16);
    (1..=pktfs_layout::NAME_MAX as u32)
        .contains(&len)
        .then(|| Record {
            kind: RecordKind::Dirent,
            flags: bytes[57],
            buffer: le32(8),
            buf_off: le32(12),
            len,
            payload_crc: le32(20),
            file_off: 0,
            seq: 0,
            timestamp_ns: 0,
            aux: le64(&bytes[48..56]),
        })
}

/// Geometries consistent with the root directory and its first dirent,
/// mkfs's own layout first where it agrees.
fn candidates(pm: &ExclusivePm<'_>) -> Vec<Geometry> {
    let len = pm.len() / ALIGN * ALIGN;
    let io = inode_offset();
    let root = io + INODE_SIZE as u64;
    let Some(ib) = bytes_at(pm, root, INODE_SIZE as u64) else {
        return Vec::new();
    };
    let Ok(h) = InodeHeader::from_bytes(ib, PmOffset(root), u64::MAX) else {
        return Vec::new();
    };
    let so = (SLOTS_OFF + h.live_slot as u64 * SLOT_SIZE) as usize;
    let root_ok = AttrSlot::from_bytes(&ib[so..so + 64], PmOffset(root + so as u64), h.generation)
        .is_ok_and(|a| a.kind == FileType::Directory);
    if !root_ok {
        return Vec::new();
    }
    let sizes: Vec<u32> = (MIN_BUFFER_SIZE.trailing_zeros()..=MAX_BUFFER_SIZE.trailing_zeros())
        .map(|s| 1u32 << s)
        .collect();
    let mkfs = |bs: u32, inodes: Option<u32>| {
        Geometry::compute(&GeometryParams {
            image_len_bytes: len,
            buffer_size_bytes: bs,
            inode_count: inodes,
            record_count: None,
        })
        .ok()
    };
    let r = h.data_head;
    if r > len / RECORD_SIZE as u64 {
        // No record table of this image holds it (and r * 64 must not
        // overflow below).
        return Vec::new();
    }
    if r == 0 {
        // Nothing reachable to be wrong about: mkfs's default layout.
        return mkfs(2048, None).into_iter().collect();
    }
    let mut out = Vec::new();
    // Record-table offsets to try: mkfs's default one first (the default
    // inode count fixes it whatever the buffer size), then every one from
    // the smallest inode table (2 inodes) up, so that a false match further on (the
    // same chain position landing on another dirent) is rarely reached.
    let first = (root + 2 * INODE_SIZE as u64).div_ceil(ALIGN) * ALIGN;
    let default_ro = mkfs(2048, None).map(|g| g.record_offset);
    let ros = default_ro.into_iter().chain(
        (first..len)
            .step_by(ALIGN as usize)
            .filter(move |&x| Some(x) != default_ro),
    );
    for here in ros {
        if out.len() >= MAX_CANDIDATES {
            break;
        }
        if here.saturating_add((r + 1) * RECORD_SIZE as u64) > len {
            continue;
        }
        let Some(d) =
            bytes_at(pm, here + r * RECORD_SIZE as u64, RECORD_SIZE as u64).and_then(dirent_like)
        else {
            continue;
        };
        // The most inodes that fit before this record table.
        let inodes = ((here - io) / INODE_SIZE as u64).saturating_sub(1);
        let Ok(inodes) = u32::try_from(inodes) else {
            continue;
        };
        let first_bo = (here + (r + 1) * RECORD_SIZE as u64).div_ceil(ALIGN) * ALIGN;
        for &bs in &sizes {
            let off = d.buffer as u64 * bs as u64 + d.buf_off as u64;
            let mut bo = first_bo;
            while bo.saturating_add(off + d.len as u64) <= len && out.len() < MAX_CANDIDATES {
                let at = bo;
                bo += ALIGN;
                if d.buf_off >= bs
                    || bytes_at(pm, at + off, d.len as u64)
                        .is_none_or(|p| pktfs_layout::crc32c(p) != d.payload_crc)
                {
                    continue;
                }
                // mkfs's layout for this buffer size, if it is this one.
                let exact = [None, Some(inodes)]
                    .into_iter()
                    .filter_map(|n| mkfs(bs, n))
                    .find(|g| g.record_offset == here && g.buffer_offset == at);
                let g = exact.or_else(|| {
                    let g = Geometry {
                        image_len_bytes: len,
                        buffer_size_bytes: bs,
                        inode_count: inodes,
                        record_count: ((at - here) / RECORD_SIZE as u64).saturating_sub(1),
                        buffer_count: ((len - at) / bs as u64).min(u32::MAX as u64),
                        journal_offset: 8192,
                        journal_slots: JOURNAL_SLOTS,
                        journal_slot_bytes: JOURNAL_SLOT_BYTES,
                        inode_offset: io,
                        record_offset: here,
                        buffer_offset: at,
                    };
                    g.validate().is_ok().then_some(g)
                });
                out.extend(g.filter(|g| r <= g.record_count));
            }
        }
    }
    out
}
