//! Verification as a direct reader does it: every record's bytes are
//! checked against the CRC32C the record carries before any of them is
//! returned, once per reader process (the holder's `once`), on every read
//! (`always`), or not at all (`off`), following the holder's mode unless
//! the program chose one.

use std::sync::atomic::{AtomicU64, Ordering};

use pktfs_layout::live;

use crate::map::Mapping;

/// When a direct reader checks payload checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VerifyMode {
    /// Each record the first time this process reads it (the default).
    #[default]
    Once,
    /// Every record on every read.
    Always,
    /// Never (trust the media).
    Off,
}

impl VerifyMode {
    /// The holder's mode from the image's verify hint, if it publishes one.
    pub fn from_hint(h: u64) -> Option<VerifyMode> {
        match h {
            live::VERIFY_HINT_ONCE => Some(VerifyMode::Once),
            live::VERIFY_HINT_ALWAYS => Some(VerifyMode::Always),
            live::VERIFY_HINT_OFF_MODE => Some(VerifyMode::Off),
            _ => None,
        }
    }
}

impl std::str::FromStr for VerifyMode {
    type Err = String;
    fn from_str(s: &str) -> Result<VerifyMode, String> {
        match s {
            "once" => Ok(VerifyMode::Once),
            "always" => Ok(VerifyMode::Always),
            "off" => Ok(VerifyMode::Off),
            _ => Err(format!("unknown verify mode {s:?} (once, always, off)")),
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

/// Which records this process has verified: per record number, the
/// record's own CRC when it was (a number is reused only for a record
/// with other fields, so other contents are never taken for checked).
/// Zeroed memory, touched only where records are read.
pub(crate) struct Verified {
    by_record: Box<[AtomicU64]>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified").finish_non_exhaustive()
    }
}

const CHECKED: u64 = 1 << 32;

impl Verified {
    pub fn new(record_count: u64) -> Verified {
        // One word per record, calloc'd: pages never touched stay unbacked.
        let n = usize::try_from(record_count + 1).unwrap_or(usize::MAX);
        let by_record = (0..n).map(|_| AtomicU64::new(0)).collect();
        Verified { by_record }
    }

    pub fn is(&self, rec: u64, rec_crc: u32) -> bool {
        self.by_record
            .get(rec as usize)
            .is_some_and(|w| w.load(Ordering::Relaxed) == CHECKED | rec_crc as u64)
    }

    pub fn set(&self, rec: u64, rec_crc: u32) {
        if let Some(w) = self.by_record.get(rec as usize) {
            w.store(CHECKED | rec_crc as u64, Ordering::Relaxed);
        }
    }
}

/// Bytes checksummed per step: copied out of the mapping into a buffer of
/// this size (no reference to bytes the holder may be writing is made:
/// map.rs), then folded into the CRC.
const STEP: usize = 64 << 10;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// CRC32C of the mapping's `[pos, pos+len)`, or None outside it.
pub(crate) fn crc_of(map: &Mapping, pos: u64, len: u64) -> Option<u32> {
    if !map.contains(pos, len) {
        return None;
    }
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < STEP {
            s.resize(STEP, 0);
        }
        let mut crc = 0u32;
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(STEP as u64) as usize;
            map.copy_out(pos + at, &mut s[..n]);
            crc = pktfs_layout::crc32c_append(crc, &s[..n]);
            at += n as u64;
        }
        Some(crc)
    })
}
