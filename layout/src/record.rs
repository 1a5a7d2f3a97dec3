//! The 64-byte packet-metadata record: the unit every pktfs chain is made of.
//!
//! Like an sk_buff / mbuf / netmap slot, a record names a slice
//! `<buffer, buf_off, len>` of the packet-buffer region and carries what a
//! storage stack needs about it: the payload's CRC32C, a timestamp (for
//! received data the kernel's receive time when [`FLAG_KERNEL_TIME`] says
//! so, else the receiver's clock; the write time otherwise), a sequence
//! number, the file offset the slice belongs at, and the link to the next
//! record. A received record holds the bytes of one receive (small
//! receives copied together), not one TCP segment.
//!
//! `next` is the only field ever changed in place (by an 8-byte publish), so
//! the record CRC covers bytes 8..60 and not the link.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{crc32c, read_raw, Corrupt, Geometry, PmOffset, RecordId, NAME_MAX};

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
pub struct RecordRaw {
    /// Index of the next record in the chain; 0 ends it. Changed only by publish.
    pub next: U64,
    /// First packet buffer of the slice.
    pub buffer: U32,
    /// Byte offset of the slice inside `buffer`.
    pub buf_off: U32,
    /// Slice length in bytes; it may run on into the following buffers.
    pub len: U32,
    /// CRC32C of the slice's bytes.
    pub payload_crc: U32,
    /// Data: file offset of the slice's first byte. Dirent/xattr: 0.
    pub file_off: U64,
    /// Data: write/stream sequence (netpath: byte position in the
    /// connection's stream). Dirent: the readdir cookie, unique in its directory.
    pub seq: U64,
    /// Nanoseconds since the Unix epoch: the kernel's receive time
    /// (`FLAG_RX | FLAG_KERNEL_TIME`), the receiver's clock (`FLAG_RX`
    /// alone) or the write time.
    pub timestamp_ns: U64,
    /// Dirent: target inode (low 32 bits) and dtype (bits 32..40).
    /// Xattr: name length. Data: 0.
    pub aux: U64,
    pub kind: u8,
    pub flags: u8,
    pub reserved: [u8; 2],
    /// CRC32C of bytes 8..60.
    pub crc: U32,
}
const _: () = assert!(size_of::<RecordRaw>() == 64);

pub const RECORD_CRC_START: usize = 8;
pub const RECORD_CRC_END: usize = 60;

/// Dirent cookies are below this (readdir offsets are `off_t`).
pub const MAX_COOKIE: u64 = i64::MAX as u64;

/// Record flags.
pub const FLAG_RX: u8 = 1 << 0; // payload came from the network path
/// Dirent: published without a switch of its directory's attribute slot.
/// Its `timestamp_ns` is then the directory's mtime and ctime, when it is
/// later than the ctime in the directory's live slot (see FORMAT.md).
pub const FLAG_DIR_TIME: u8 = 1 << 1;
/// Data: the slice's bytes are known to be damaged (fsck -y found that they
/// no longer match `payload_crc` and kept the file). Reads of the range fail
/// with EIO whatever the payload CRC says; a remnant split off such a record
/// keeps the flag, so the damage is never laundered into a fresh checksum.
/// Guarded by the ro_compat feature `DAMAGE_FLAGS`.
pub const FLAG_DAMAGED: u8 = 1 << 2;
/// Data, with `FLAG_RX`: `timestamp_ns` is the kernel's receive time
/// (SO_TIMESTAMPNS) of the newest segment of the receive that brought the
/// bytes. Without it a received record's time is the receiver's clock when
/// it took the bytes: the kernel gave none (a socket whose timestamps were
/// off, bytes carried over through DRAM), and the record says so rather
/// than pass a clock reading off as an arrival time. Informational: a
/// reader that ignores it reads the same bytes, so it needs no feature bit.
pub const FLAG_KERNEL_TIME: u8 = 1 << 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordKind {
    /// File bytes at `file_off`.
    Data = 1,
    /// A directory entry; payload is the name.
    Dirent = 2,
    /// An extended attribute; payload is name followed by value.
    Xattr = 3,
    /// File bytes at `file_off` whose slice lies in an object of the tier
    /// (an S3-compatible store), not in the buffer region: `aux` is the
    /// object number, `buffer` and `buf_off` are the low and high halves of
    /// the slice's byte offset in the object. Everything else (length,
    /// payload CRC, seq, timestamp, flags) is the data record's it replaced.
    /// Guarded by the incompat feature `REMOTE_RECORDS`.
    Remote = 4,
}

impl RecordKind {
    pub fn from_u8(v: u8) -> Option<RecordKind> {
        Some(match v {
            1 => RecordKind::Data,
            2 => RecordKind::Dirent,
            3 => RecordKind::Xattr,
            4 => RecordKind::Remote,
            _ => return None,
        })
    }
}

/// A validated record (everything but the link, which is read separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    pub flags: u8,
    pub buffer: u32,
    pub buf_off: u32,
    pub len: u32,
    pub payload_crc: u32,
    pub file_off: u64,
    pub seq: u64,
    pub timestamp_ns: u64,
    pub aux: u64,
}

impl Record {
    pub fn to_raw(&self, next: RecordId) -> RecordRaw {
        let mut raw = RecordRaw {
            next: next.0.into(),
            buffer: self.buffer.into(),
            buf_off: self.buf_off.into(),
            len: self.len.into(),
            payload_crc: self.payload_crc.into(),
            file_off: self.file_off.into(),
            seq: self.seq.into(),
            timestamp_ns: self.timestamp_ns.into(),
            aux: self.aux.into(),
            kind: self.kind as u8,
            flags: self.flags,
            reserved: [0; 2],
            crc: 0.into(),
        };
        raw.crc = crc32c(&raw.as_bytes()[RECORD_CRC_START..RECORD_CRC_END]).into();
        raw
    }

    pub fn to_bytes(&self, next: RecordId) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.to_raw(next).as_bytes());
        out
    }

    /// Validate a record read at `offset`: CRC, kind, the slice inside the
    /// buffer region, the link inside the table, the file range not
    /// overflowing, and kind-specific fields. Returns the record and its link.
    pub fn from_bytes(
        bytes: &[u8],
        offset: PmOffset,
        g: &Geometry,
    ) -> Result<(Record, RecordId), Corrupt> {
        let raw: RecordRaw = read_raw(bytes, "record", offset)?;
        let want = crc32c(&raw.as_bytes()[RECORD_CRC_START..RECORD_CRC_END]);
        if raw.crc.get() != want {
            return Err(Corrupt::at(
                "record",
                offset,
                format!(
                    "checksum mismatch (stored {:#010x}, computed {:#010x})",
                    raw.crc.get(),
                    want
                ),
            ));
        }
        let kind = RecordKind::from_u8(raw.kind)
            .ok_or_else(|| Corrupt::at("record", offset, format!("unknown kind {}", raw.kind)))?;
        let next = raw.next.get();
        if next != 0 && !g.record_in_range(next) {
            return Err(Corrupt::at(
                "record",
                offset,
                format!("next link {next} is outside the record table"),
            ));
        }
        let (buffer, buf_off, len) = (raw.buffer.get(), raw.buf_off.get(), raw.len.get());
        // A remote record's `buffer`/`buf_off` are an object offset, not a
        // place in the buffer region.
        if kind != RecordKind::Remote && buf_off >= g.buffer_size_bytes {
            return Err(Corrupt::at(
                "record",
                offset,
                format!("buffer offset {buf_off} past the buffer size"),
            ));
        }
        if kind != RecordKind::Remote && !g.slice_in_range(buffer, buf_off, len) {
            return Err(Corrupt::at(
                "record",
                offset,
                format!("slice <{buffer}, {buf_off}, {len}> lies outside the buffer region"),
            ));
        }
        if raw
            .file_off
            .get()
            .checked_add(len as u64)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return Err(Corrupt::at(
                "record",
                offset,
                "file offset + length overflows",
            ));
        }
        let aux = raw.aux.get();
        match kind {
            RecordKind::Data => {
                if len == 0 {
                    return Err(Corrupt::at("record", offset, "empty data record"));
                }
            }
            RecordKind::Remote => {
                if len == 0 {
                    return Err(Corrupt::at("record", offset, "empty remote record"));
                }
                if aux == 0 {
                    return Err(Corrupt::at(
                        "record",
                        offset,
                        "remote record names object 0",
                    ));
                }
                let obj_off = buffer as u64 | (buf_off as u64) << 32;
                if obj_off
                    .checked_add(len as u64)
                    .is_none_or(|e| e > MAX_OBJECT_BYTES)
                {
                    return Err(Corrupt::at(
                        "record",
                        offset,
                        format!("remote slice at {obj_off}+{len} is past the largest object"),
                    ));
                }
            }
            RecordKind::Dirent => {
                // Cookies are readdir offsets, signed 64-bit at the POSIX
                // boundary; the next one is this one plus one.
                if raw.seq.get() >= MAX_COOKIE {
                    return Err(Corrupt::at(
                        "dirent",
                        offset,
                        format!("readdir cookie {} out of range", raw.seq.get()),
                    ));
                }
                if len == 0 || len as usize > NAME_MAX {
                    return Err(Corrupt::at(
                        "dirent",
                        offset,
                        format!("name length {len} out of range"),
                    ));
                }
                let ino = aux & 0xffff_ffff;
                if !g.ino_in_range(ino) {
                    return Err(Corrupt::at(
                        "dirent",
                        offset,
                        format!("target inode {ino} out of range"),
                    ));
                }
                if crate::FileType::from_dtype((aux >> 32) as u8).is_none() {
                    return Err(Corrupt::at(
                        "dirent",
                        offset,
                        format!("bad dtype {}", (aux >> 32) as u8),
                    ));
                }
            }
            RecordKind::Xattr => {
                if aux == 0 || aux > len as u64 || aux > NAME_MAX as u64 {
                    return Err(Corrupt::at(
                        "xattr",
                        offset,
                        format!("name length {aux} out of range"),
                    ));
                }
            }
        }
        Ok((
            Record {
                kind,
                flags: raw.flags,
                buffer,
                buf_off,
                len,
                payload_crc: raw.payload_crc.get(),
                file_off: raw.file_off.get(),
                seq: raw.seq.get(),
                timestamp_ns: raw.timestamp_ns.get(),
                aux,
            },
            RecordId(next),
        ))
    }

    pub fn dirent_ino(&self) -> u32 {
        (self.aux & 0xffff_ffff) as u32
    }
    pub fn dirent_dtype(&self) -> u8 {
        (self.aux >> 32) as u8
    }
    pub fn dirent_aux(ino: u32, dtype: u8) -> u64 {
        ino as u64 | (dtype as u64) << 32
    }
    pub fn file_end(&self) -> u64 {
        self.file_off + self.len as u64
    }

    /// A remote record: its slice lies in an object of the tier.
    pub fn is_remote(&self) -> bool {
        self.kind == RecordKind::Remote
    }
    /// Remote: the object the slice lies in.
    pub fn remote_obj(&self) -> u64 {
        self.aux
    }
    /// Remote: the slice's byte offset in its object.
    pub fn remote_off(&self) -> u64 {
        self.buffer as u64 | (self.buf_off as u64) << 32
    }
    /// `buffer`/`buf_off` of a remote record at object offset `off`.
    pub fn remote_fields(off: u64) -> (u32, u32) {
        (off as u32, (off >> 32) as u32)
    }
}

/// Largest object a remote record may name a slice of (5 TiB, S3's limit).
pub const MAX_OBJECT_BYTES: u64 = 5 << 40;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeometryParams;

    fn g() -> Geometry {
        Geometry::compute(&GeometryParams::for_size(8 << 20)).unwrap()
    }

    fn rec() -> Record {
        Record {
            kind: RecordKind::Data,
            flags: 0,
            buffer: 3,
            buf_off: 100,
            len: 5000,
            payload_crc: 0xdead_beef,
            file_off: 4096,
            seq: 9,
            timestamp_ns: 1,
            aux: 0,
        }
    }

    #[test]
    fn roundtrip_and_link_outside_crc() {
        let g = g();
        let mut b = rec().to_bytes(RecordId(5));
        let (r, n) = Record::from_bytes(&b, PmOffset(0), &g).unwrap();
        assert_eq!((r, n), (rec(), RecordId(5)));
        // Publishing a new link must not invalidate the record.
        b[..8].copy_from_slice(&7u64.to_le_bytes());
        assert_eq!(
            Record::from_bytes(&b, PmOffset(0), &g).unwrap().1,
            RecordId(7)
        );
    }

    #[test]
    fn rejects_damage() {
        let g = g();
        for i in 8..64 {
            let mut b = rec().to_bytes(RecordId(5));
            b[i] ^= 0x40;
            assert!(
                Record::from_bytes(&b, PmOffset(0), &g).is_err(),
                "flip at byte {i} went unnoticed"
            );
        }
        let mut b = rec().to_bytes(RecordId(5));
        b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Record::from_bytes(&b, PmOffset(0), &g).is_err());
        let mut r = rec();
        r.buffer = g.buffer_count as u32;
        assert!(Record::from_bytes(&r.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
        let mut r = rec();
        r.file_off = u64::MAX - 10;
        assert!(Record::from_bytes(&r.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
        let mut r = rec();
        r.kind = RecordKind::Dirent;
        r.len = 300;
        assert!(Record::from_bytes(&r.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
    }

    #[test]
    fn remote_records_name_object_slices() {
        let g = g();
        let mut r = rec();
        r.kind = RecordKind::Remote;
        r.aux = 42;
        // An object offset far past the buffer region is fine.
        let off = (3u64 << 32) + 17;
        (r.buffer, r.buf_off) = Record::remote_fields(off);
        let (back, _) = Record::from_bytes(&r.to_bytes(RecordId(0)), PmOffset(0), &g).unwrap();
        assert!(back.is_remote());
        assert_eq!((back.remote_obj(), back.remote_off()), (42, off));
        let mut bad = r;
        bad.aux = 0;
        assert!(Record::from_bytes(&bad.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
        let mut bad = r;
        (bad.buffer, bad.buf_off) = Record::remote_fields(MAX_OBJECT_BYTES);
        assert!(Record::from_bytes(&bad.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
        let mut bad = r;
        bad.len = 0;
        assert!(Record::from_bytes(&bad.to_bytes(RecordId(0)), PmOffset(0), &g).is_err());
    }
}
