//! The redo journal for operations that touch more than one chain or inode.
//!
//! Every pktfs mutation ends in one or more aligned 8-byte publishes (a
//! record's `next`, an inode's head or selector word). When an operation needs
//! more than one, it first writes all of them as `(address, value)` entries
//! into a journal slot, persists them, then writes and persists the slot's
//! header with `commit = COMMIT_MAGIC` and a CRC over header and entries: that
//! persist is the commit point. Then it applies the stores, persists them, and
//! publishes `commit = 0`. Mount replays every committed slot; replay is
//! idempotent because each entry stores an absolute value.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{crc32c, crc32c_append, read_raw, Corrupt, Geometry, PmOffset};

/// How many slots there are and their size are the geometry's (they fix
/// where the inode table starts); here for the slot format's users.
pub use crate::geometry::{JOURNAL_SLOTS, JOURNAL_SLOT_BYTES};
pub const JOURNAL_HEADER_BYTES: usize = 64;
pub const JOURNAL_MAX_ENTRIES: usize = (JOURNAL_SLOT_BYTES as usize - JOURNAL_HEADER_BYTES) / 16;
pub const COMMIT_MAGIC: u64 = u64::from_le_bytes(*b"PKTJRNL1");

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct JournalHeaderRaw {
    /// `COMMIT_MAGIC` while the slot holds a committed, unapplied operation.
    pub commit: U64,
    /// Monotonic operation number, for ordering and diagnostics.
    pub seq: U64,
    pub count: U32,
    pub reserved: [u8; 40],
    /// CRC32C of header bytes 0..60 followed by the `count` entries.
    pub crc: U32,
}
const _: () = assert!(size_of::<JournalHeaderRaw>() == JOURNAL_HEADER_BYTES);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
pub struct JournalEntryRaw {
    /// Image offset of an 8-byte aligned link word.
    pub addr: U64,
    pub value: U64,
}
const _: () = assert!(size_of::<JournalEntryRaw>() == 16);

impl JournalHeaderRaw {
    pub fn new(seq: u64, entries: &[JournalEntryRaw]) -> JournalHeaderRaw {
        let mut h = JournalHeaderRaw {
            commit: COMMIT_MAGIC.into(),
            seq: seq.into(),
            count: (entries.len() as u32).into(),
            reserved: [0; 40],
            crc: 0.into(),
        };
        h.crc = Self::crc_of(&h, entries.as_bytes()).into();
        h
    }

    fn crc_of(h: &JournalHeaderRaw, entry_bytes: &[u8]) -> u32 {
        crc32c_append(crc32c(&h.as_bytes()[..60]), entry_bytes)
    }
}

/// A committed operation: its sequence number and its `(address, value)` stores.
pub type Committed = (u64, Vec<(u64, u64)>);

/// Parse a journal slot. `Ok(None)`: nothing committed (empty, cleared, or a
/// commit that never completed: its CRC does not match). `Ok(Some(entries))`:
/// a committed operation to replay. `Err`: committed and checksummed but the
/// entries name addresses that are not link words, which only corruption can
/// produce.
pub fn parse_slot(
    slot: &[u8],
    offset: PmOffset,
    g: &Geometry,
) -> Result<Option<Committed>, Corrupt> {
    let h: JournalHeaderRaw = read_raw(slot, "journal slot", offset)?;
    if h.commit.get() != COMMIT_MAGIC {
        return Ok(None);
    }
    let count = h.count.get() as usize;
    if count > JOURNAL_MAX_ENTRIES {
        return Ok(None); // a torn header: the CRC could not match either
    }
    let entry_bytes = &slot[JOURNAL_HEADER_BYTES..JOURNAL_HEADER_BYTES + count * 16];
    if JournalHeaderRaw::crc_of(&h, entry_bytes) != h.crc.get() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(count);
    for (i, e) in <[JournalEntryRaw]>::ref_from_bytes(entry_bytes)
        .expect("16-byte entries")
        .iter()
        .enumerate()
    {
        let (addr, value) = (e.addr.get(), e.value.get());
        if !is_link_word(addr, g) {
            return Err(Corrupt::at(
                "journal entry",
                PmOffset(offset.0 + (JOURNAL_HEADER_BYTES + i * 16) as u64),
                format!("address {addr:#x} is not a link word"),
            ));
        }
        out.push((addr, value));
    }
    Ok(Some((h.seq.get(), out)))
}

/// Is `addr` one of the 8-byte words pktfs changes by publish: an inode's
/// selector/data head/xattr head, or a record's `next`?
pub fn is_link_word(addr: u64, g: &Geometry) -> bool {
    if !addr.is_multiple_of(8) {
        return false;
    }
    let isz = crate::inode::INODE_SIZE as u64;
    let inode_end = g.inode_offset + (g.inode_count as u64 + 1) * isz;
    if addr >= g.inode_offset + isz && addr < inode_end {
        return (addr - g.inode_offset) % isz < 24;
    }
    let rec_end = g.record_offset + (g.record_count + 1) * 64;
    if addr >= g.record_offset + 64 && addr < rec_end {
        return (addr - g.record_offset).is_multiple_of(64);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeometryParams;

    #[test]
    fn commit_roundtrip_and_torn() {
        let g = Geometry::compute(&GeometryParams::for_size(8 << 20)).unwrap();
        let entries = [
            JournalEntryRaw {
                addr: (g.record_offset + 64).into(),
                value: 5.into(),
            },
            JournalEntryRaw {
                addr: (g.inode_offset + 192 + 8).into(),
                value: 6.into(),
            },
        ];
        let mut slot = vec![0u8; JOURNAL_SLOT_BYTES as usize];
        slot[64..96].copy_from_slice(entries.as_bytes());
        assert_eq!(parse_slot(&slot, PmOffset(0), &g).unwrap(), None);
        slot[..64].copy_from_slice(JournalHeaderRaw::new(3, &entries).as_bytes());
        let (seq, e) = parse_slot(&slot, PmOffset(0), &g).unwrap().unwrap();
        assert_eq!(seq, 3);
        assert_eq!(
            e,
            vec![(g.record_offset + 64, 5), (g.inode_offset + 192 + 8, 6)]
        );
        // A torn entry (not persisted when the header was) voids the commit.
        slot[70] ^= 1;
        assert_eq!(parse_slot(&slot, PmOffset(0), &g).unwrap(), None);
    }

    #[test]
    fn link_words() {
        let g = Geometry::compute(&GeometryParams::for_size(8 << 20)).unwrap();
        assert!(is_link_word(g.inode_offset + 192, &g));
        assert!(is_link_word(g.inode_offset + 192 + 16, &g));
        assert!(!is_link_word(g.inode_offset + 192 + 24, &g));
        assert!(!is_link_word(g.inode_offset, &g)); // inode 0 does not exist
        assert!(is_link_word(g.record_offset + 128, &g));
        assert!(!is_link_word(g.record_offset + 136, &g));
        assert!(!is_link_word(g.buffer_offset, &g));
    }
}
