//! Verified reads: no byte leaves the image unless the payload CRC32C of
//! the record that holds it matches.
//!
//! Every data record carries the CRC32C of its whole slice. A read, a
//! transmit hold or a split of a record checks the records it touches
//! (whole records: a CRC cannot vouch for part of its range) before any of
//! their bytes are used. A record that fails is *damaged*: the operation
//! fails with [`FsError::Damaged`] (EIO at the POSIX boundary), the file and
//! byte range are logged, and nothing of that record reaches the caller.
//! Other records of the same file, and other files, stay readable.
//!
//! # Verified-once state, and why it is sound
//! A record's slice is never written while the record is live: overwrites
//! are copy-on-write, a split makes new records over the same bytes, and
//! buffer space returns to the allocator only when no live record names it.
//! So once a record's bytes matched its CRC in this mount, they still match
//! unless the media itself changed under the file system (a stray write by
//! another process, a media error). In [`VerifyMode::Once`] (the default)
//! a DRAM bit per record remembers "checked in this mount" and later reads
//! skip the CRC; records written in this mount start checked, because their
//! CRC was computed from the bytes as they were copied in. The bits are
//! DRAM-only, so every mount checks every record again on first use, and
//! `pktfs scrub` ignores them and reads everything. [`VerifyMode::Always`]
//! checks on every read; [`VerifyMode::Off`] trusts the media (the measured
//! cost of each is in docs/BENCHMARKS.md).
//!
//! A split never launders damage into a fresh checksum: the record being
//! split is verified first, and remnants of a damaged record carry
//! `FLAG_DAMAGED`, which fails every read whatever its CRC says.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use pktfs_layout::record::FLAG_DAMAGED;
use pktfs_layout::RecordId;

use super::{Inode, Rec, Volume};
use crate::error::{FsError, Result};

/// When reads check payload checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VerifyMode {
    /// Check each record the first time it is used in this mount (default).
    #[default]
    Once,
    /// Check every record on every read.
    Always,
    /// Never check (trust the media).
    Off,
}

impl std::str::FromStr for VerifyMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s {
            "once" | "on" => VerifyMode::Once,
            "always" => VerifyMode::Always,
            "off" => VerifyMode::Off,
            _ => return Err(format!("unknown verify mode {s:?} (once, always, off)")),
        })
    }
}

impl VerifyMode {
    /// The mode as the image's verify hint ([`pktfs_layout::live`]).
    pub fn hint(self) -> u64 {
        use pktfs_layout::live;
        match self {
            VerifyMode::Once => live::VERIFY_HINT_ONCE,
            VerifyMode::Always => live::VERIFY_HINT_ALWAYS,
            VerifyMode::Off => live::VERIFY_HINT_OFF_MODE,
        }
    }
}

impl std::fmt::Display for VerifyMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerifyMode::Once => "once",
            VerifyMode::Always => "always",
            VerifyMode::Off => "off",
        })
    }
}

/// The verification mode and the per-record "checked in this mount" bits.
#[derive(Debug)]
pub(crate) struct Verifier {
    mode: AtomicU8,
    checked: Box<[AtomicU64]>,
}

impl Verifier {
    pub fn new(record_count: u64) -> Verifier {
        // Record ids run from 1 to record_count inclusive.
        let words = (record_count + 1).div_ceil(64) as usize;
        Verifier {
            mode: AtomicU8::new(VerifyMode::Once as u8),
            checked: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn mode(&self) -> VerifyMode {
        match self.mode.load(Ordering::Relaxed) {
            x if x == VerifyMode::Always as u8 => VerifyMode::Always,
            x if x == VerifyMode::Off as u8 => VerifyMode::Off,
            _ => VerifyMode::Once,
        }
    }

    pub fn set_mode(&self, m: VerifyMode) {
        self.mode.store(m as u8, Ordering::Relaxed);
    }

    fn word(&self, id: RecordId) -> Option<(&AtomicU64, u64)> {
        let w = self.checked.get((id.0 / 64) as usize)?;
        Some((w, 1u64 << (id.0 % 64)))
    }

    fn is_checked(&self, id: RecordId) -> bool {
        self.word(id)
            .is_some_and(|(w, bit)| w.load(Ordering::Acquire) & bit != 0)
    }

    /// The record's bytes are known to match its CRC (checked, or the CRC
    /// was computed from the bytes as they were written).
    pub fn mark_checked(&self, id: RecordId) {
        if let Some((w, bit)) = self.word(id) {
            w.fetch_or(bit, Ordering::Release);
        }
    }

    /// A record id is being reused for new contents.
    pub fn forget(&self, id: RecordId) {
        if let Some((w, bit)) = self.word(id) {
            w.fetch_and(!bit, Ordering::Release);
        }
    }
}

/// What a failed check found, for the log and the error.
fn damaged(i: &Inode, r: &Rec, why: String) -> FsError {
    let (start, end) = (r.r.file_off, r.r.file_end());
    tracing::error!(
        ino = i.ino,
        record = r.id.0,
        "damaged data: inode {} bytes [{start}, {end}) (record {}): {why}; \
         reads of that range fail with EIO until it is rewritten; \
         run `pktfs scrub` or `fsck.pktfs -n` for the whole image",
        i.ino,
        r.id.0
    );
    FsError::Damaged {
        ino: i.ino as u64,
        start,
        end,
    }
}

impl Volume {
    /// The verification mode reads use from now on.
    pub fn set_verify_mode(&self, m: VerifyMode) {
        self.verify.set_mode(m);
        // Direct readers follow the holder's mode (live.rs).
        self.publish_verify_hint(m.hint());
    }

    pub fn verify_mode(&self) -> VerifyMode {
        self.verify.mode()
    }

    /// Check one data record of `i` before its bytes are used. Whole
    /// record: its CRC covers its whole slice.
    pub(crate) fn verify_rec(&self, i: &Inode, r: &Rec) -> Result<()> {
        self.verify_rec_as(i, r, self.verify.mode())
    }

    pub(crate) fn verify_rec_as(&self, i: &Inode, r: &Rec, mode: VerifyMode) -> Result<()> {
        if r.r.flags & FLAG_DAMAGED != 0 {
            return Err(damaged(i, r, "marked damaged by fsck".into()));
        }
        if mode == VerifyMode::Off || (mode == VerifyMode::Once && self.verify.is_checked(r.id)) {
            return Ok(());
        }
        // A remote record's bytes are checked every time they are fetched
        // (`fetch_rec`); there is nothing in PM to check here.
        if r.r.is_remote() {
            return Ok(());
        }
        let got = pktfs_layout::crc32c(self.slice_bytes(r.slice()));
        if got != r.r.payload_crc {
            return Err(damaged(
                i,
                r,
                format!(
                    "payload checksum mismatch (stored {:#010x}, computed {got:#010x})",
                    r.r.payload_crc
                ),
            ));
        }
        self.verify.mark_checked(r.id);
        Ok(())
    }

    /// Flags for what is made from part of `r` (a remnant of a split, a
    /// shared copy): `r`'s own, plus `FLAG_DAMAGED` when `r` fails its
    /// check, so a fresh CRC over the part can never vouch for bytes that
    /// were already wrong. Checked at least once per mount even with
    /// verification off: a split is where damage would otherwise be
    /// laundered for good.
    pub(crate) fn derived_flags(&self, i: &Inode, r: &Rec) -> u8 {
        let mode = match self.verify.mode() {
            VerifyMode::Off => VerifyMode::Once,
            m => m,
        };
        match self.verify_rec_as(i, r, mode) {
            Ok(()) => r.r.flags,
            Err(_) => r.r.flags | FLAG_DAMAGED,
        }
    }
}
