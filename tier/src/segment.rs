//! Segment objects: what tier-out uploads.
//!
//! Every object pktfs writes to the tier is a segment: the payloads of the
//! records it holds, back to back, then an index with one entry per
//! payload, then a fixed footer. Small files are packed many to a segment
//! (a million small files are not a million PUTs); a large file gets a
//! segment of its own, uploaded in parts.
//!
//! ```text
//! [payload 0][payload 1]...[payload n-1][index: n x 32 bytes][footer: 32 bytes]
//! ```
//!
//! The index says, for each payload, where it is, its length, its CRC32C
//! and whose bytes they were (inode, file offset): enough for `fsck.pktfs
//! --remote` to check every remote record against the object without
//! reading a payload, and to name what an orphan held.
//!
//! The whole object's CRC32C, which the store is asked to verify on upload,
//! is *combined* from the records' CRCs (they were computed when the bytes
//! arrived) and the CRC of the index and footer: the payloads are not
//! checksummed a second time for it. (They are checked once on their way
//! out of PM, against those same CRCs: `TierOut::bytes`.)

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `PKTSEG` + version 1.
pub const SEGMENT_MAGIC: [u8; 8] = *b"PKTSEG\x00\x01";
pub const INDEX_ENTRY_BYTES: usize = 32;
pub const FOOTER_BYTES: usize = 32;

/// One payload of a segment.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct IndexEntryRaw {
    /// Offset of the payload in the object.
    pub obj_off: U64,
    pub len: U32,
    /// CRC32C of the payload (the record's payload CRC).
    pub crc: U32,
    /// The file the bytes belonged to when uploaded, and where in it.
    pub ino: U32,
    pub reserved: U32,
    pub file_off: U64,
}
const _: () = assert!(size_of::<IndexEntryRaw>() == INDEX_ENTRY_BYTES);

/// The last 32 bytes of a segment.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct FooterRaw {
    pub magic: [u8; 8],
    /// The object's own number (its key names it too).
    pub object: U64,
    pub entries: U32,
    /// CRC32C of the index bytes.
    pub index_crc: U32,
    pub reserved: U32,
    /// CRC32C of footer bytes 0..28.
    pub crc: U32,
}
const _: () = assert!(size_of::<FooterRaw>() == FOOTER_BYTES);

/// A parsed index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub obj_off: u64,
    pub len: u32,
    pub crc32c: u32,
    pub ino: u32,
    pub file_off: u64,
}

/// Why a segment's tail did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SegmentError {
    #[error("object {0}: shorter than a segment footer")]
    Short(u64),
    #[error("object {0}: no segment footer (bad magic); not written by pktfs")]
    Magic(u64),
    #[error("object {obj}: footer checksum mismatch")]
    FooterCrc { obj: u64 },
    #[error("object {obj}: the footer names object {named}")]
    WrongObject { obj: u64, named: u64 },
    #[error("object {obj}: index checksum mismatch")]
    IndexCrc { obj: u64 },
    #[error("object {obj}: index entry {k} ({what})")]
    Entry { obj: u64, k: usize, what: String },
}

/// Key of object `obj` relative to the tier prefix.
pub fn object_key_rel(obj: u64) -> String {
    format!("seg/{obj:016x}")
}

/// The object number a relative key names, if it is a segment key.
pub fn parse_object_key_rel(rel: &str) -> Option<u64> {
    let hex = rel.strip_prefix("seg/")?;
    if hex.len() != 16
        || !hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().filter(|&n| n != 0)
}

/// CRC32C of `len` bytes whose CRC is `b` appended to bytes whose CRC is `a`.
pub fn combine(a: u32, b: u32, len: u64) -> u32 {
    pktfs_layout::crc32c_combine(a, b, len)
}

/// Builds a segment's tail and whole-object CRC as payloads are added.
#[derive(Debug)]
pub struct SegmentBuilder {
    obj: u64,
    entries: Vec<IndexEntryRaw>,
    payload_bytes: u64,
    payload_crc: u32,
}

impl SegmentBuilder {
    pub fn new(obj: u64) -> SegmentBuilder {
        SegmentBuilder {
            obj,
            entries: Vec::new(),
            payload_bytes: 0,
            payload_crc: 0,
        }
    }
    pub fn object(&self) -> u64 {
        self.obj
    }
    /// Bytes of payload so far.
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Account a payload of `len` bytes with CRC `crc32c`; returns its
    /// offset in the object. (The caller puts the bytes there.)
    pub fn add(&mut self, len: u32, crc32c: u32, ino: u64, file_off: u64) -> u64 {
        let at = self.payload_bytes;
        self.entries.push(IndexEntryRaw {
            obj_off: at.into(),
            len: len.into(),
            crc: crc32c.into(),
            ino: (ino as u32).into(),
            reserved: 0.into(),
            file_off: file_off.into(),
        });
        self.payload_crc = combine(self.payload_crc, crc32c, len as u64);
        self.payload_bytes += len as u64;
        at
    }

    /// CRC32C of the payloads so far (combined).
    pub fn payload_crc(&self) -> u32 {
        self.payload_crc
    }

    /// The index and footer, and the whole object's CRC32C.
    pub fn finish(&self) -> (Vec<u8>, u32) {
        let mut tail = Vec::with_capacity(self.entries.len() * INDEX_ENTRY_BYTES + FOOTER_BYTES);
        for e in &self.entries {
            tail.extend_from_slice(e.as_bytes());
        }
        let index_crc = pktfs_layout::crc32c(&tail);
        let mut f = FooterRaw {
            magic: SEGMENT_MAGIC,
            object: self.obj.into(),
            entries: (self.entries.len() as u32).into(),
            index_crc: index_crc.into(),
            reserved: 0.into(),
            crc: 0.into(),
        };
        f.crc = pktfs_layout::crc32c(&f.as_bytes()[..28]).into();
        tail.extend_from_slice(f.as_bytes());
        let whole = combine(
            self.payload_crc,
            pktfs_layout::crc32c(&tail),
            tail.len() as u64,
        );
        (tail, whole)
    }
}

/// Parse a segment's footer (the object's last [`FOOTER_BYTES`]): the entry
/// count and index CRC.
pub fn parse_footer(obj: u64, footer: &[u8]) -> Result<(u32, u32), SegmentError> {
    let Ok(f) = FooterRaw::read_from_bytes(footer) else {
        return Err(SegmentError::Short(obj));
    };
    if f.magic != SEGMENT_MAGIC {
        return Err(SegmentError::Magic(obj));
    }
    if pktfs_layout::crc32c(&f.as_bytes()[..28]) != f.crc.get() {
        return Err(SegmentError::FooterCrc { obj });
    }
    if f.object.get() != obj {
        return Err(SegmentError::WrongObject {
            obj,
            named: f.object.get(),
        });
    }
    Ok((f.entries.get(), f.index_crc.get()))
}

/// Parse a segment's index (the `entries x 32` bytes before the footer) of
/// an object of `object_len` bytes: checked against its CRC, every entry
/// inside the payload area, entries in order and not overlapping.
pub fn parse_index(
    obj: u64,
    object_len: u64,
    index: &[u8],
    index_crc: u32,
) -> Result<Vec<Entry>, SegmentError> {
    if pktfs_layout::crc32c(index) != index_crc {
        return Err(SegmentError::IndexCrc { obj });
    }
    let payload_end = object_len
        .checked_sub((index.len() + FOOTER_BYTES) as u64)
        .ok_or(SegmentError::Short(obj))?;
    let mut out = Vec::with_capacity(index.len() / INDEX_ENTRY_BYTES);
    let mut prev_end = 0u64;
    for (k, c) in index.chunks_exact(INDEX_ENTRY_BYTES).enumerate() {
        let e = IndexEntryRaw::read_from_bytes(c).map_err(|_| SegmentError::Short(obj))?;
        let (off, len) = (e.obj_off.get(), e.len.get() as u64);
        let bad = |what: String| SegmentError::Entry { obj, k, what };
        if off < prev_end {
            return Err(bad(format!("offset {off} overlaps the previous payload")));
        }
        let end = off
            .checked_add(len)
            .ok_or_else(|| bad("offset overflows".into()))?;
        if end > payload_end {
            return Err(bad(format!(
                "payload [{off}, {end}) runs into the index at {payload_end}"
            )));
        }
        prev_end = end;
        out.push(Entry {
            obj_off: off,
            len: e.len.get(),
            crc32c: e.crc.get(),
            ino: e.ino.get(),
            file_off: e.file_off.get(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_segment_parses_and_its_crc_is_the_objects() {
        let a = b"hello packets".to_vec();
        let b = vec![7u8; 70_000];
        let mut s = SegmentBuilder::new(42);
        assert_eq!(s.add(a.len() as u32, pktfs_layout::crc32c(&a), 5, 0), 0);
        assert_eq!(
            s.add(b.len() as u32, pktfs_layout::crc32c(&b), 6, 4096),
            a.len() as u64
        );
        let (tail, crc) = s.finish();
        let mut obj = a.clone();
        obj.extend_from_slice(&b);
        obj.extend_from_slice(&tail);
        assert_eq!(pktfs_layout::crc32c(&obj), crc, "combined equals computed");
        let (n, icrc) = parse_footer(42, &obj[obj.len() - FOOTER_BYTES..]).unwrap();
        assert_eq!(n, 2);
        let idx_start = obj.len() - FOOTER_BYTES - n as usize * INDEX_ENTRY_BYTES;
        let e = parse_index(
            42,
            obj.len() as u64,
            &obj[idx_start..obj.len() - FOOTER_BYTES],
            icrc,
        )
        .unwrap();
        assert_eq!(
            e[1],
            Entry {
                obj_off: 13,
                len: 70_000,
                crc32c: pktfs_layout::crc32c(&b),
                ino: 6,
                file_off: 4096
            }
        );
        // Every flipped bit of the tail is caught.
        for i in idx_start..obj.len() {
            let mut bad = obj.clone();
            bad[i] ^= 0x10;
            let r = parse_footer(42, &bad[bad.len() - FOOTER_BYTES..]).and_then(|(n, c)| {
                let s = bad.len() - FOOTER_BYTES - n as usize * INDEX_ENTRY_BYTES;
                parse_index(42, bad.len() as u64, &bad[s..bad.len() - FOOTER_BYTES], c)
            });
            assert!(r.is_err(), "flip at {i} unnoticed");
        }
        assert_eq!(
            parse_footer(43, &obj[obj.len() - FOOTER_BYTES..]),
            Err(SegmentError::WrongObject { obj: 43, named: 42 })
        );
        assert_eq!(parse_footer(1, &[0u8; 3]), Err(SegmentError::Short(1)));
    }

    /// docs/TIER.md's tables of the segment structs are the structs: every
    /// row's offset and size, and every field in a row.
    #[test]
    fn the_format_doc_tables_match_the_structs() {
        let fields: &[crate::format_doc::Field] = &[
            (
                "IndexEntryRaw",
                "obj_off",
                std::mem::offset_of!(IndexEntryRaw, obj_off),
                8,
            ),
            (
                "IndexEntryRaw",
                "len",
                std::mem::offset_of!(IndexEntryRaw, len),
                4,
            ),
            (
                "IndexEntryRaw",
                "crc",
                std::mem::offset_of!(IndexEntryRaw, crc),
                4,
            ),
            (
                "IndexEntryRaw",
                "ino",
                std::mem::offset_of!(IndexEntryRaw, ino),
                4,
            ),
            (
                "IndexEntryRaw",
                "reserved",
                std::mem::offset_of!(IndexEntryRaw, reserved),
                4,
            ),
            (
                "IndexEntryRaw",
                "file_off",
                std::mem::offset_of!(IndexEntryRaw, file_off),
                8,
            ),
            ("IndexEntryRaw", "(total)", 0, INDEX_ENTRY_BYTES),
            (
                "FooterRaw",
                "magic",
                std::mem::offset_of!(FooterRaw, magic),
                8,
            ),
            (
                "FooterRaw",
                "object",
                std::mem::offset_of!(FooterRaw, object),
                8,
            ),
            (
                "FooterRaw",
                "entries",
                std::mem::offset_of!(FooterRaw, entries),
                4,
            ),
            (
                "FooterRaw",
                "index_crc",
                std::mem::offset_of!(FooterRaw, index_crc),
                4,
            ),
            (
                "FooterRaw",
                "reserved",
                std::mem::offset_of!(FooterRaw, reserved),
                4,
            ),
            ("FooterRaw", "crc", std::mem::offset_of!(FooterRaw, crc), 4),
            ("FooterRaw", "(total)", 0, FOOTER_BYTES),
        ];
        crate::format_doc::assert_doc_tables_match(fields);
    }

    #[test]
    fn object_keys() {
        assert_eq!(object_key_rel(0xabc), "seg/0000000000000abc");
        assert_eq!(parse_object_key_rel("seg/0000000000000abc"), Some(0xabc));
        for bad in [
            "seg/abc",
            "seg/0000000000000ABC",
            "snap/0000000000000abc",
            "seg/0000000000000000",
            "seg/000000000000zabc",
        ] {
            assert_eq!(parse_object_key_rel(bad), None, "{bad}");
        }
    }
}
