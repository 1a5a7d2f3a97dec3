//! What fsck finds, as data: findings and their severity, damaged ranges,
//! changes, counts, the superblock's summary. The scan produces them and
//! the report gathers them ([`crate::report`]); neither depends on the
//! other through these.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Normal state worth saying (a journal slot recovery will replay, an
    /// image that was not unmounted cleanly, shared extents).
    Info,
    /// Odd but harmless; never repaired by deleting anything.
    Warning,
    /// Damage: the image is not what pktfs writes.
    Error,
}

/// One problem (or noteworthy state), tied to an inode where there is one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// Stable machine-readable kind, e.g. `record.crc`, `data.payload_crc`.
    pub code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ino: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<u64>,
    pub message: String,
    /// What repair does (or did) about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair: Option<String>,
    /// Mounting (recovery) deals with it by itself.
    pub mount_recovers: bool,
    /// A repair pass changed the image to fix it.
    pub fixed: bool,
    #[serde(skip)]
    pub(crate) fix: Option<usize>,
}

impl Finding {
    pub(crate) fn new(
        severity: Severity,
        code: &'static str,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            severity,
            code,
            ino: None,
            path: None,
            record: None,
            message: message.into(),
            repair: None,
            mount_recovers: false,
            fixed: false,
            fix: None,
        }
    }
    pub(crate) fn key(&self) -> (&'static str, Option<u32>, Option<u64>, &str) {
        (self.code, self.ino, self.record, &self.message)
    }
}

/// What became of a damaged range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DamageState {
    /// Found, not marked on the media (yet).
    Found,
    /// The record carries `FLAG_DAMAGED`: kept, reads of it fail with EIO.
    Marked,
    /// Dropped (`--drop-damaged`): the range is a hole now.
    Dropped,
}

/// A byte range of a regular file whose stored bytes no longer match
/// their checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DamagedRange {
    pub ino: u32,
    pub path: String,
    pub record: u64,
    /// Bytes `[start, end)` of the file.
    pub start: u64,
    pub end: u64,
    pub stored_crc: u32,
    /// The payload's CRC now (None: unreadable, or lost).
    pub computed_crc: Option<u32>,
    pub state: DamageState,
    /// The range was lost where the file's data chain broke (why), not
    /// found in a record: `record` is where it broke, the CRCs are 0 and
    /// None. `Marked`: a damaged record covers it now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    #[serde(skip)]
    pub(crate) finding: usize,
    /// The repair drops it rather than marks it.
    #[serde(skip)]
    pub(crate) drop: bool,
}

impl DamagedRange {
    /// `/path: bytes [a, b) damaged: ...`, as the text report lists it.
    pub fn line(&self) -> String {
        if let Some(why) = &self.lost {
            let state = match self.state {
                DamageState::Found => "",
                DamageState::Marked => "; marked damaged (reads fail with EIO)",
                DamageState::Dropped => "; dropped (a hole now: reads return zeros)",
            };
            return format!(
                "{}: bytes [{}, {}) lost: {why}{state}",
                self.path, self.start, self.end
            );
        }
        let why = match self.computed_crc {
            Some(c) if c != self.stored_crc => format!(
                "payload checksum mismatch (stored {:#010x}, computed {c:#010x})",
                self.stored_crc
            ),
            Some(_) => "marked damaged (its checksum matches now)".into(),
            None => "payload unreadable".into(),
        };
        let state = match self.state {
            DamageState::Found => "",
            DamageState::Marked => "; kept, marked damaged (reads fail with EIO)",
            DamageState::Dropped => "; dropped (a hole now)",
        };
        format!(
            "{}: bytes [{}, {}) damaged: {why}{state}",
            self.path, self.start, self.end
        )
    }
}

/// A change a repair made, per file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ino: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub what: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub inodes: u64,
    pub directories: u64,
    pub regular_files: u64,
    pub symlinks: u64,
    pub special_files: u64,
    pub records: u64,
    pub data_records: u64,
    pub dirents: u64,
    pub xattrs: u64,
    /// Bytes named by data records (file contents, shared ranges counted once per record).
    pub stored_bytes: u64,
    /// Payload bytes whose CRC32C was verified.
    pub payload_bytes_checked: u64,
    /// Remote records (bytes tiered to an object store) and their bytes;
    /// `--remote` checks their objects.
    pub remote_records: u64,
    pub remote_bytes: u64,
    pub buffers_used: u64,
    pub buffers_free: u64,
    pub records_free: u64,
    pub inodes_free: u64,
    pub journal_slots_pending: u64,
    /// Pairs of records naming overlapping buffer bytes (reflinked ranges).
    pub shared_ranges: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SuperblockSummary {
    pub image_len_bytes: u64,
    pub buffer_size_bytes: u32,
    pub inode_count: u32,
    pub record_count: u64,
    pub buffer_count: u64,
    pub state: u32,
    pub mount_count: u64,
    pub label: String,
}
