//! Damaged file data: a regular file's data record whose payload no longer
//! matches its CRC (or that an earlier fsck already marked).
//!
//! A damaged range is kept, not dropped: dropping it (the old behaviour)
//! turned it into a hole that reads back as zeros with no error, which is
//! worse than an error. Repair (`-y` and `-p`: nothing is lost) replaces the
//! record by a copy carrying `FLAG_DAMAGED` (record CRC recomputed, payload
//! CRC left as stored), so reads of the range fail with EIO, and sets the
//! `DAMAGE_FLAGS` ro_compat feature first. A record already marked is
//! reported, not repaired again. `--drop-damaged` asks for the hole instead.

use pktfs_layout::superblock::RoCompatFeatures;

use super::*;
use crate::findings::DamageState;

/// A damaged record found by the walk or the deferred CRC check.
#[derive(Clone, Debug)]
pub(super) struct Note {
    ino: u32,
    id: u64,
    rec: Record,
    finding: usize,
}

impl Scan<'_> {
    /// Report damaged data record `id` (node `node` of regular file `ino`'s
    /// data chain); `computed` is its payload's CRC now (None: unreadable).
    /// Returns whether the record stays in the chain, and the finding.
    pub(super) fn data_damage(
        &mut self,
        ino: u32,
        path: &str,
        id: u64,
        r: &Record,
        computed: Option<u32>,
    ) -> (bool, usize) {
        let flagged = r.flags & FLAG_DAMAGED != 0;
        let why = match computed {
            Some(c) if c != r.payload_crc => format!(
                "payload checksum mismatch (stored {:#010x}, computed {c:#010x})",
                r.payload_crc
            ),
            Some(_) => "marked damaged by an earlier fsck (its checksum matches now)".into(),
            None => "payload unreadable".into(),
        };
        let why = if flagged && computed != Some(r.payload_crc) {
            format!("marked damaged by an earlier fsck; {why}")
        } else {
            why
        };
        let (start, end) = (r.file_off, r.file_end());
        let keep = !self.drop_damaged;
        // Known damage is the image's normal state after a repair: info,
        // unless the user asked for it to be dropped.
        let sev = if flagged && keep {
            Severity::Info
        } else {
            Severity::Error
        };
        let code = if flagged {
            "data.damaged"
        } else {
            "data.payload_crc"
        };
        let f = self.find(
            sev,
            code,
            Some(ino),
            Some(path),
            Some(id),
            format!("bytes [{start}, {end}) damaged: {why}"),
        );
        self.out.damaged.push(DamagedRange {
            ino,
            path: path.to_string(),
            record: id,
            start,
            end,
            stored_crc: r.payload_crc,
            computed_crc: computed,
            state: if flagged {
                DamageState::Marked
            } else {
                DamageState::Found
            },
            lost: None,
            finding: f,
            drop: !keep,
        });
        if keep && !flagged {
            self.damage.push(Note {
                ino,
                id,
                rec: *r,
                finding: f,
            });
        }
        (keep, f)
    }

    /// Plan the marking of every damaged record found, and the feature bit
    /// that must be on the media before the first marked record (or mark
    /// of a lost range) is.
    pub(super) fn damage_fixes(&mut self) {
        let notes = std::mem::take(&mut self.damage);
        // Marks of lost ranges (`lost`) are damaged records too.
        if notes.is_empty() && !self.lost_marks {
            return;
        }
        if let Some(sb) = &self.out.sb {
            if sb.ro_compat & RoCompatFeatures::DAMAGE_FLAGS.bits() == 0 {
                let mut sb = sb.clone();
                sb.ro_compat |= RoCompatFeatures::DAMAGE_FLAGS.bits();
                // Primary, then backup, each persisted: one valid copy at
                // every instant. Phase order puts both before any record.
                for offset in [PRIMARY_OFFSET, BACKUP_OFFSET] {
                    self.plan(
                        PlannedFix {
                            fix: Fix::Superblock {
                                offset,
                                bytes: Box::new(sb.to_bytes()),
                            },
                            safe: true,
                            ino: None,
                            path: None,
                            what:
                                "set the DAMAGE_FLAGS feature (data records may be marked damaged)"
                                    .into(),
                        },
                        &[],
                    );
                }
            }
        }
        for n in notes {
            let Some(i) = self.inodes.get(&n.ino) else {
                continue;
            };
            let (head, path) = (i.data.head_addr, i.path.clone());
            let mut rec = n.rec;
            rec.flags |= FLAG_DAMAGED;
            self.plan(
                PlannedFix {
                    fix: Fix::RewriteRecord {
                        head,
                        id: n.id,
                        rec,
                    },
                    safe: true,
                    ino: Some(n.ino),
                    path: Some(path),
                    what: format!(
                        "keep bytes [{}, {}) and mark them damaged (reads fail with EIO)",
                        rec.file_off,
                        rec.file_end()
                    ),
                },
                &[n.finding],
            );
        }
    }

    /// Set aside the records the planned fixes may need (unclaimed by any
    /// chain, and not in a tail a bad directory record cut off).
    pub(super) fn reserve_spare_records(&mut self) {
        let need: usize = self
            .out
            .fixes
            .iter()
            .map(|f| match &f.fix {
                Fix::RewriteRecord { .. } | Fix::TrimRecord { .. } => 1,
                Fix::Salvage(sv) => sv.items.len() + 1,
                _ => 0,
            })
            .sum();
        if need == 0 {
            return;
        }
        self.out.spare_records = (1..=self.g.record_count)
            .filter(|&r| self.owner[r as usize] == 0 && !self.tail_records.contains(&r))
            .take(need)
            .collect();
    }
}
