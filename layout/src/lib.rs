//! The pktfs on-media format. No I/O happens here: these are the byte layouts
//! of everything pktfs persists, and the validation that turns raw bytes read
//! from an image into typed values before any arithmetic uses them.
//!
//! The byte-level description lives in `docs/FORMAT.md`; the test
//! `format_doc_matches_structs` keeps the two in step.
//!
//! Conventions (see FORMAT.md for the why):
//! - every field is little-endian (`zerocopy::little_endian`), every struct is
//!   `#[repr(C)]`, unaligned-safe, with explicit reserved bytes and a
//!   compile-time size assertion;
//! - the CRC32C is the last field and covers the bytes before it, except the
//!   8-byte link words that are changed in place by an atomic publish
//!   (a record's `next`, an inode's header words), which are outside the CRC
//!   and validated by bounds instead;
//! - positions in the image are offsets or indices, never pointers.

use std::fmt;

use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

mod crc_combine;
mod crc_short;
pub mod geometry;
pub mod inode;
pub mod journal;
pub mod live;
pub mod record;
pub mod superblock;

pub use geometry::{Geometry, GeometryParams};
pub use inode::{AttrSlot, AttrSlotRaw, InodeHeader, InodeRaw};
pub use journal::{JournalEntryRaw, JournalHeaderRaw};
pub use record::{Record, RecordKind, RecordRaw};
pub use superblock::{Features, Superblock, SuperblockRaw};

/// Size of one packet-metadata record, and of the cache line pktfs persists in.
pub const RECORD_SIZE: usize = 64;
/// Cache line size used for persistence and crash modelling.
pub const CACHE_LINE: usize = 64;
/// Longest name a dirent may carry (POSIX NAME_MAX).
pub const NAME_MAX: usize = 255;
/// The root directory's inode number. Inode 0 is never used, so a zero link
/// means "none" everywhere.
pub const ROOT_INO: u32 = 1;

/// A byte offset into the image. Never a pointer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct PmOffset(pub u64);

impl PmOffset {
    pub fn get(self) -> u64 {
        self.0
    }
    /// `self + by`, or `None` if that would overflow.
    pub fn checked_add(self, by: u64) -> Option<PmOffset> {
        self.0.checked_add(by).map(PmOffset)
    }
}

impl fmt::Display for PmOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Index of a record in the packet-metadata table. 0 is the null link.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct RecordId(pub u64);

impl RecordId {
    pub const NONE: RecordId = RecordId(0);
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

/// What is wrong with an image: the structure, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corrupt {
    #[error("{what} at image offset {offset}: {detail}")]
    At {
        what: &'static str,
        offset: PmOffset,
        detail: String,
    },
    #[error("not a pktfs image (bad magic {found:02x?} at offset 0)")]
    NotPktfs { found: [u8; 8] },
    #[error("image is {actual} bytes but its superblock says {expected}: the image is truncated")]
    Truncated { expected: u64, actual: u64 },
    #[error(
        "image was made by a newer pktfs (format version {found}, this build reads {supported}); upgrade pktfs"
    )]
    NewerVersion { found: u32, supported: u32 },
    #[error(
        "image uses features this build does not know (incompat bits {bits:#x}); refusing to open it"
    )]
    UnknownIncompat { bits: u32 },
    #[error(
        "image uses features this build can only read (ro_compat bits {bits:#x}); open it read-only or upgrade pktfs"
    )]
    UnknownRoCompat { bits: u32 },
}

impl Corrupt {
    pub fn at(what: &'static str, offset: PmOffset, detail: impl Into<String>) -> Corrupt {
        Corrupt::At {
            what,
            offset,
            detail: detail.into(),
        }
    }
}

/// Inputs at least this long go to `crc-fast` (carry-less multiplication
/// folding, VPCLMULQDQ where the CPU has it: several times the crc32
/// instruction's pace on long inputs); shorter ones (records, headers) to
/// [`crc_short`], whose per-call cost is lower.
pub(crate) const FAST_MIN: usize = 256;

/// CRC32C of `bytes` (Castagnoli, CRC-32/ISCSI), hardware-accelerated.
pub fn crc32c(bytes: &[u8]) -> u32 {
    if bytes.len() >= FAST_MIN {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
    } else {
        crc_short::append(0, bytes)
    }
}

/// Continue a CRC32C over more bytes: the CRC of `prefix || bytes` given
/// `crc` = the CRC of `prefix`.
pub fn crc32c_append(crc: u32, bytes: &[u8]) -> u32 {
    if bytes.len() >= FAST_MIN {
        let tail = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32;
        crc32c_combine(crc, tail, bytes.len() as u64)
    } else {
        crc_short::append(crc, bytes)
    }
}

pub use crc_combine::{crc32_combine, crc32c_combine, crc32c_zeros, crc64nvme_combine};

#[cfg(test)]
mod crc_tests {
    #[test]
    fn combine_matches_one_pass() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        for cut in [0usize, 1, 255, 4096, 99_999] {
            let (a, b) = data.split_at(cut);
            let c = super::crc32c_combine(super::crc32c(a), super::crc32c(b), b.len() as u64);
            assert_eq!(c, super::crc32c(&data), "cut {cut}");
        }
    }

    #[test]
    fn both_backends_agree() {
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
            .collect();
        for n in [0, 1, 63, 255, 256, 257, 4096, 65_536, 299_999] {
            assert_eq!(
                super::crc32c(&data[..n]),
                crc32c::crc32c(&data[..n]),
                "len {n}"
            );
            for cut in [0, 1.min(n), n / 3, n] {
                let (a, b) = data[..n].split_at(cut);
                assert_eq!(
                    super::crc32c_append(super::crc32c(a), b),
                    crc32c::crc32c(&data[..n]),
                    "len {n} cut {cut}"
                );
            }
        }
        assert_eq!(super::crc32c(b"123456789"), 0xe306_9283);
    }
}

/// Read a `T` from the start of `bytes`, or report what was short.
pub(crate) fn read_raw<T: FromBytes + KnownLayout + Immutable + Unaligned + Copy>(
    bytes: &[u8],
    what: &'static str,
    offset: PmOffset,
) -> Result<T, Corrupt> {
    T::read_from_prefix(bytes).map(|(v, _)| v).map_err(|_| {
        Corrupt::at(
            what,
            offset,
            format!("needs {} bytes, have {}", size_of::<T>(), bytes.len()),
        )
    })
}

/// File-type bits of a mode (the `S_IFMT` part), as pktfs stores them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum FileType {
    Regular,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

pub const S_IFMT: u32 = 0o170000;
pub const S_IFSOCK: u32 = 0o140000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFIFO: u32 = 0o010000;

impl FileType {
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & S_IFMT {
            S_IFREG => FileType::Regular,
            S_IFDIR => FileType::Directory,
            S_IFLNK => FileType::Symlink,
            S_IFIFO => FileType::Fifo,
            S_IFSOCK => FileType::Socket,
            S_IFCHR => FileType::CharDevice,
            S_IFBLK => FileType::BlockDevice,
            _ => return None,
        })
    }
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => S_IFREG,
            FileType::Directory => S_IFDIR,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => S_IFIFO,
            FileType::Socket => S_IFSOCK,
            FileType::CharDevice => S_IFCHR,
            FileType::BlockDevice => S_IFBLK,
        }
    }
    /// The dirent type code stored in a dirent record (same values as DT_*).
    pub fn dtype(self) -> u8 {
        match self {
            FileType::Fifo => 1,
            FileType::CharDevice => 2,
            FileType::Directory => 4,
            FileType::BlockDevice => 6,
            FileType::Regular => 8,
            FileType::Symlink => 10,
            FileType::Socket => 12,
        }
    }
    pub fn from_dtype(d: u8) -> Option<FileType> {
        Some(match d {
            1 => FileType::Fifo,
            2 => FileType::CharDevice,
            4 => FileType::Directory,
            6 => FileType::BlockDevice,
            8 => FileType::Regular,
            10 => FileType::Symlink,
            12 => FileType::Socket,
            _ => return None,
        })
    }
}

// Re-exported so users of the raw structs need not depend on zerocopy's paths.
pub use zerocopy::little_endian::{I64 as LeI64, U16 as LeU16, U32 as LeU32, U64 as LeU64};

#[cfg(test)]
mod format_doc;
