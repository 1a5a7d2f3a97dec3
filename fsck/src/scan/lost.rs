//! A regular file's data chain that breaks: what follows the break is
//! linked back where the chain itself says so, and the bytes lost at the
//! break stay visible.
//!
//! Cutting the chain at a bad record and keeping the size (what repair did
//! before) made every byte from the cut to the end read as zeros without an
//! error: a hole, indistinguishable from one the file really had. So:
//!
//! - **Following.** A record that fails its checks still has its link word
//!   (bytes 0..8, outside the record CRC, published for this chain). After
//!   the whole tree is walked, so that every live chain has claimed its
//!   records, the link is followed: each record reached must be unclaimed,
//!   valid, file data, after the last byte kept and inside the size;
//!   those are linked back at their file offsets. Another bad record on
//!   the way is stepped over the same way; anything else ends the run.
//!   Nothing but the chain's own links is trusted: a freed record of the
//!   same file carries the same offsets and checksums as a live one
//!   (records are not zeroed when freed), so file offsets, sequences or an
//!   owner field could put old bytes back where the chain holds newer
//!   ones.
//! - **Lost ranges.** The bytes from the end of the last record kept before
//!   a break up to the first record linked back after it (or the size)
//!   are *lost*: whatever was there (data, or a hole the break hides) is
//!   not known. `-y` keeps each lost range visible as a *mark*: a data
//!   record carrying `FLAG_DAMAGED`, over exactly that range, in a spare
//!   record. Every path of the Volume already fails reads of such a
//!   record with EIO (HTTP 500), refuses to digest it, keeps the flag on
//!   the remnants when a write splits it, and frees it when the whole
//!   range is overwritten, which repairs the file. Its slice names buffer
//!   bytes that are never read (the flag fails every read first): the
//!   bytes the bad record named, when they lie in the buffer region (so
//!   the lost range keeps what it held, for the curious), else the start
//!   of the region; it holds a reference on them like any record. A mark is
//!   at most 256 KiB long (the longest record this version writes), and
//!   a longer range gets several, all naming the same bytes: a range holds
//!   a reference on 256 KiB at most, however long it is. With
//!   `--drop-damaged` the range becomes a hole, and the report says so.
//!
//! A mark goes in with the same publish that takes the bad record out: the mark (linking to what follows) is written and persisted first,
//! then the link that reached the bad record is pointed at it. A crash
//! before that publish leaves the chain as it was (the next run does the
//! same again); after it, the chain is whole. The marks are themselves
//! damaged records: a second `-y` finds them marked and leaves them.

use super::*;

/// Longest range one mark covers: the longest record this version writes
/// (FORMAT.md), so a mark is a record like any other.
const MAX_MARK: u64 = pktfs_fs::volume::MAX_RECORD_BYTES as u64;
/// A mark names at most this fraction of the buffer region (on a tiny
/// image): the marks of a lost range all name the same bytes, so however
/// long the range, it holds a reference on one mark's worth of bytes.
const MARK_REGION_SHARE: u64 = 16;
/// More marks than this for one range (a 256 GiB range, 64 MiB of
/// records): -y leaves it (see `cannot_mark`).
const MAX_MARKS_PER_RANGE: u64 = 1 << 20;

/// Where a regular file's data chain broke.
#[derive(Clone, Debug)]
pub(super) struct Cut {
    /// The end of the file's data before the break.
    start: u64,
    /// The record it broke at (None: a link outside the record table).
    record: Option<u64>,
    /// The link of a record that failed its checks: the chain may go on there.
    follow: Option<u64>,
    why: String,
}

impl Cut {
    pub(super) fn at(start: u64, record: Option<u64>, follow: Option<u64>, why: String) -> Cut {
        Cut {
            start,
            record,
            follow,
            why,
        }
    }
}

/// A byte range of a regular file lost at a break.
#[derive(Clone, Debug)]
pub(super) struct Lost {
    /// Index in the chain's nodes where its mark goes.
    at: usize,
    start: u64,
    end: u64,
    /// The record the break is at (its slice is where a mark names bytes).
    record: Option<u64>,
    finding: usize,
}

impl Scan<'_> {
    /// Follow every cut regular file's data chain past its break, and
    /// record the ranges lost. Runs after the tree walk: every record a
    /// live chain reaches is claimed by then, so a run that strays into
    /// another chain stops there instead of taking its records.
    pub(super) fn follow_cuts(&mut self) {
        let cut: Vec<u32> = self
            .inodes
            .iter()
            .filter(|(_, i)| i.data.cut.is_some())
            .map(|(&ino, _)| ino)
            .collect();
        for ino in cut {
            let Some(mut i) = self.inodes.remove(&ino) else {
                continue;
            };
            let mut c = std::mem::take(&mut i.data);
            self.follow(&mut i, &mut c);
            i.data = c;
            if i.rebuilt {
                i.attr.size = i.size_end;
            }
            self.inodes.insert(ino, i);
        }
    }

    fn follow(&mut self, i: &mut Ino, c: &mut Chain) {
        let Some(cut) = c.cut.clone() else {
            return;
        };
        let g = self.g;
        // A rebuilt inode's size comes from its records: nothing past the
        // last one is known to be lost.
        let size = (!i.rebuilt).then_some(i.attr.size);
        let mut prev_end = cut.start;
        // The range being lost: where it starts, the record there, why.
        let mut gap = Some((cut.start, cut.record, cut.why.clone()));
        let mut seen: HashSet<u64> = cut.record.into_iter().collect();
        let mut sym = true;
        let mut cur = cut.follow.unwrap_or(0);
        // Each step claims a record or adds one to `seen`: it ends.
        while cur != 0
            && g.record_in_range(cur)
            && self.owner[cur as usize] == 0
            && seen.insert(cur)
        {
            let at = g.record_pos(pktfs_layout::RecordId(cur));
            let Some(bytes) = self.read::<64>(at.0) else {
                break;
            };
            let raw_next = le64(&bytes[0..8]);
            self.tail_records.insert(cur);
            let (r, link_ok) = match Record::from_bytes(&bytes, at, &g) {
                Ok((r, _)) => (r, true),
                Err(_) => {
                    let mut body = bytes;
                    body[..8].fill(0);
                    match Record::from_bytes(&body, at, &g) {
                        // Intact but for a link out of range: kept, and the
                        // run ends after it.
                        Ok((r, _)) => (r, false),
                        Err(_) => {
                            // Another bad record: the lost range goes on
                            // through it, and so does the run.
                            if gap.is_none() {
                                gap = Some((
                                    prev_end,
                                    Some(cur),
                                    format!("record {cur} of the data chain is bad"),
                                ));
                            }
                            cur = raw_next;
                            continue;
                        }
                    }
                }
            };
            let fits = matches!(r.kind, RecordKind::Data | RecordKind::Remote)
                && r.file_off >= prev_end
                && size.is_none_or(|s| r.file_off < s);
            if !fits {
                break;
            }
            if let Some((start, record, why)) = gap.take() {
                self.lost_range(i, c, start, r.file_off, record, why);
            }
            let keep = self.accept_data(i, c, cur, &r, &mut sym);
            c.nodes.push(Node {
                id: cur,
                next_raw: raw_next,
                keep,
                rec: r,
            });
            c.relinked += 1;
            prev_end = r.file_end();
            if !link_ok {
                gap = Some((
                    prev_end,
                    Some(cur),
                    format!("record {cur} links outside the record table"),
                ));
                break;
            }
            cur = raw_next;
        }
        if let Some((start, record, why)) = gap {
            self.lost_range(i, c, start, size.unwrap_or(start), record, why);
        }
    }

    /// Bytes `[start, end)` of `i` are lost (`why`): a finding against the
    /// chain (its relink keeps them visible) and a damaged range.
    fn lost_range(
        &mut self,
        i: &Ino,
        c: &mut Chain,
        start: u64,
        end: u64,
        record: Option<u64>,
        why: String,
    ) {
        let end = if i.rebuilt { end } else { end.min(i.attr.size) };
        if start >= end {
            return;
        }
        let f = self.find(
            Severity::Error,
            "data.lost",
            Some(i.ino),
            Some(&i.path),
            record,
            format!("bytes [{start}, {end}) lost: {why}"),
        );
        c.findings.push(f);
        c.unsafe_reason = true;
        c.lost.push(Lost {
            at: c.nodes.len(),
            start,
            end,
            record,
            finding: f,
        });
        self.out.damaged.push(DamagedRange {
            ino: i.ino,
            path: i.path.clone(),
            record: record.unwrap_or(0),
            start,
            end,
            stored_crc: 0,
            computed_crc: None,
            state: crate::findings::DamageState::Found,
            lost: Some(why),
            finding: f,
            drop: self.drop_damaged,
        });
        if !self.drop_damaged {
            self.lost_marks = true;
        }
    }

    /// A spare record for a mark (unclaimed, reached by no link), claimed
    /// for `ino` so that nothing else takes it.
    fn take_spare(&mut self, ino: u32) -> Option<u64> {
        while self.spare_cursor <= self.g.record_count {
            let r = self.spare_cursor;
            self.spare_cursor += 1;
            if self.owner[r as usize] == 0 && !self.tail_records.contains(&r) {
                self.owner[r as usize] = ino;
                return Some(r);
            }
        }
        None
    }

    /// Where a mark of `len` bytes names its (never read) bytes: from the
    /// start of the slice record `near` names, if that is in the buffer
    /// region, else from the region's start; moved back to fit.
    fn mark_slice(&self, near: Option<u64>, len: u64) -> Option<(u32, u32)> {
        let g = self.g;
        let bs = g.buffer_size_bytes as u64;
        let region = g.buffer_count.checked_mul(bs)?;
        if len == 0 || len > region {
            return None;
        }
        let from = near
            .filter(|&id| g.record_in_range(id))
            .and_then(|id| self.read::<64>(g.record_pos(pktfs_layout::RecordId(id)).0))
            .map(|b| {
                let buffer = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64;
                let off = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as u64;
                (buffer, off)
            })
            .filter(|&(b, o)| b < g.buffer_count && o < bs)
            .map_or(0, |(b, o)| b * bs + o);
        let start = from.min(region - len);
        let (buffer, off) = (u32::try_from(start / bs).ok()?, (start % bs) as u32);
        g.slice_in_range(buffer, off, len as u32)
            .then_some((buffer, off))
    }

    /// Put the marks of chain `c`'s lost ranges into its nodes, each in a
    /// spare record linking to the next kept node. Nothing changes when it
    /// cannot: why.
    pub(super) fn place_marks(&mut self, ino: u32, c: &mut Chain) -> Result<(), &'static str> {
        let region = self
            .g
            .buffer_count
            .saturating_mul(self.g.buffer_size_bytes as u64);
        let cap = MAX_MARK.min(region / MARK_REGION_SHARE).max(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut marks: Vec<(usize, Node)> = Vec::new();
        let mut fail = None;
        'ranges: for l in &c.lost {
            let total = l.end - l.start;
            let piece = cap.min(total);
            if total.div_ceil(piece) > MAX_MARKS_PER_RANGE {
                fail = Some("the range is too long to mark");
                break;
            }
            let Some(slice) = self.mark_slice(l.record, piece) else {
                fail = Some("the image has no buffer region to name");
                break;
            };
            let mut off = l.start;
            while off < l.end {
                let len = (l.end - off).min(piece);
                let Some(id) = self.take_spare(ino) else {
                    fail =
                        Some("no spare record is left for its mark (free some and run -y again)");
                    break 'ranges;
                };
                let rec = Record {
                    kind: RecordKind::Data,
                    flags: FLAG_DAMAGED,
                    buffer: slice.0,
                    buf_off: slice.1,
                    len: len as u32,
                    // Never checked: the flag fails every read first.
                    payload_crc: 0,
                    file_off: off,
                    seq: 0,
                    timestamp_ns: now,
                    aux: 0,
                };
                marks.push((
                    l.at,
                    Node {
                        id,
                        next_raw: 0,
                        keep: true,
                        rec,
                    },
                ));
                off += len;
            }
        }
        if let Some(why) = fail {
            for (_, n) in &marks {
                self.owner[n.id as usize] = 0;
            }
            return Err(why);
        }
        let old = std::mem::take(&mut c.nodes);
        let mut marks = marks.into_iter().peekable();
        let mut nodes = Vec::with_capacity(old.len() + marks.len());
        for (k, n) in old.into_iter().enumerate() {
            while let Some((_, m)) = marks.next_if(|(at, _)| *at <= k) {
                c.marks.insert(m.id);
                nodes.push(m);
            }
            nodes.push(n);
        }
        for (_, m) in marks {
            c.marks.insert(m.id);
            nodes.push(m);
        }
        // Each mark links to the next node that stays.
        let mut next = 0;
        for n in nodes.iter_mut().rev() {
            if c.marks.contains(&n.id) {
                n.next_raw = next;
            }
            if n.keep {
                next = n.id;
            }
        }
        c.nodes = nodes;
        Ok(())
    }

    /// The marks' records as the relink writes them: (id, fields, link).
    pub(super) fn mark_records(c: &Chain) -> Vec<(u64, Record, u64)> {
        c.nodes
            .iter()
            .filter(|n| c.marks.contains(&n.id))
            .map(|n| (n.id, n.rec, n.next_raw))
            .collect()
    }

    /// What the relink of a cut chain does, for the report.
    pub(super) fn cut_repair(&self, c: &Chain, marked: bool) -> String {
        let mut parts = Vec::new();
        let at = match c.cut.as_ref().and_then(|k| k.record) {
            Some(r) => format!("record {r}"),
            None => "a bad link".to_string(),
        };
        if c.relinked > 0 {
            parts.push(format!("link back the {} record(s) after {at}", c.relinked));
        }
        for l in &c.lost {
            parts.push(if marked {
                format!(
                    "mark bytes [{}, {}) damaged (reads fail with EIO)",
                    l.start, l.end
                )
            } else {
                format!(
                    "leave bytes [{}, {}) a hole (--drop-damaged: reads return zeros)",
                    l.start, l.end
                )
            });
        }
        let kept = c
            .nodes
            .iter()
            .filter(|n| n.keep && !c.marks.contains(&n.id))
            .count();
        if parts.is_empty() {
            format!("truncate the data chain after {kept} record(s)")
        } else {
            format!("cut the data chain at {at}: {}", parts.join(", "))
        }
    }

    /// The findings of lost ranges -y cannot mark (`why`): said in their
    /// messages, and left unrepaired, since cutting the chain without the
    /// marks would make them read as zeros.
    pub(super) fn cannot_mark(&mut self, c: &Chain, why: &str) {
        for l in &c.lost {
            if let Some(f) = self.out.findings.get_mut(l.finding) {
                f.message.push_str(&format!(
                    "; -y leaves the chain as it is: {why}; --drop-damaged makes the range a hole"
                ));
            }
        }
    }
}
