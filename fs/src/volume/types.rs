//! The values the Volume's API takes and gives: attributes, directory
//! entries, attribute changes, statistics, a chain's records, and the
//! options for format and open.

use pktfs_layout::{FileType, GeometryParams};

use super::VerifyMode;
use crate::media::PersistChoice;

/// Attributes as callers see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileType,
    /// Permission bits (including suid/sgid/sticky), without the type.
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    /// Bytes of buffer space the file's records name, in 512-byte units.
    pub blocks: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub rdev: u32,
    pub blksize: u32,
}

/// One directory entry from `readdir`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: Vec<u8>,
    pub ino: u64,
    pub kind: FileType,
    /// Pass this back to continue after this entry.
    pub cookie: u64,
}

/// A time to set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    Now,
    Ns(i64),
}

/// Attribute changes; `None` leaves a field alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeSet>,
    pub mtime: Option<TimeSet>,
    pub ctime: Option<TimeSet>,
}

/// File system statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    pub block_size: u32,
    pub blocks: u64,
    pub blocks_free: u64,
    pub files: u64,
    pub files_free: u64,
    pub records: u64,
    pub records_free: u64,
    pub name_max: u32,
}

/// The chain of a file as packets: one entry per record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainEntry {
    pub record: u64,
    pub file_off: u64,
    pub len: u32,
    pub buffer: u32,
    pub buf_off: u32,
    /// Image offset of the slice's first byte (for sendfile).
    pub image_off: u64,
    pub payload_crc: u32,
    pub timestamp_ns: u64,
    pub seq: u64,
    pub from_network: bool,
    /// `timestamp_ns` is the kernel's receive time (`FLAG_KERNEL_TIME`);
    /// a received record without it was stamped by the receiver's clock.
    pub kernel_time: bool,
    /// Marked damaged, or its bytes do not match `payload_crc`: reads of
    /// its range fail with EIO.
    pub damaged: bool,
    /// A remote record: (object, offset in the object); `buffer`, `buf_off`
    /// and `image_off` then mean nothing.
    pub remote: Option<(u64, u64)>,
}

impl ChainEntry {
    /// The JSON form `pktfs chain --json` prints and the `user.pktfs.chain`
    /// attribute holds (one object per record; the CRC in hex).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "record": self.record, "file_offset": self.file_off, "length": self.len,
            "buffer": self.buffer, "buffer_offset": self.buf_off, "image_offset": self.image_off,
            "crc32c": format!("{:08x}", self.payload_crc), "timestamp_ns": self.timestamp_ns,
            "seq": self.seq, "from_network": self.from_network,
            "kernel_time": self.kernel_time, "damaged": self.damaged,
            "remote": self.remote.map(|(obj, off)| serde_json::json!({"object": obj, "offset": off})),
        })
    }
}

/// How to format.
#[derive(Clone, Debug)]
pub struct FormatOptions {
    pub params: GeometryParams,
    pub label: Option<String>,
}

/// How to open.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    pub persist: PersistChoice,
    pub read_only: bool,
    /// Don't take the image lock (checking a live image read-only).
    pub no_lock: bool,
    /// When reads check payload checksums (see `verify`).
    pub verify: VerifyMode,
    /// Do not pre-fault the whole mapping in the background: for a short
    /// job that touches little of a big image (`pktfs recv`), the pre-fault
    /// would only compete with it for the CPU.
    pub no_populate: bool,
}
