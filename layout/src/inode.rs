//! Inodes: three 8-byte link words that are changed by atomic publishes, and
//! two attribute slots of which the `selector` word names the live one.
//!
//! Changing attributes is a shadow update: write the idle slot (with the next
//! generation), persist it, then publish the selector. A crash leaves either
//! the old slot or the new one selected, never a mix of fields.

use zerocopy::little_endian::{I64, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{crc32c, read_raw, Corrupt, FileType, PmOffset};

pub const INODE_SIZE: usize = 192;
/// Byte offsets of the publishable header words inside an inode.
pub const SELECTOR_OFF: u64 = 0;
pub const DATA_HEAD_OFF: u64 = 8;
pub const XATTR_HEAD_OFF: u64 = 16;
/// The inode's change counter (see [`crate::live`]): volatile, outside
/// every CRC, any value valid.
pub const CHANGE_OFF: u64 = 24;
/// The change count at which this incarnation of the inode was made:
/// written with the rest of a new inode, it tells a direct reader that an
/// inode number it holds now names a different file.
pub const BIRTH_OFF: u64 = 32;
pub const SLOTS_OFF: u64 = 64;
pub const SLOT_SIZE: u64 = 64;

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct InodeRaw {
    /// `generation << 1 | live slot`. Changed only by publish.
    pub selector: U64,
    /// First record of the data chain (file bytes, dirents, symlink target).
    pub data_head: U64,
    /// First record of the xattr chain.
    pub xattr_head: U64,
    /// Change counter for direct readers (`live`): bumped around every
    /// change, never persisted on purpose, any value valid.
    pub change: U64,
    /// The change count when this inode was made (`live`).
    pub birth: U64,
    pub reserved: [u8; 24],
    pub slots: [AttrSlotRaw; 2],
}
const _: () = assert!(size_of::<InodeRaw>() == INODE_SIZE);

#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug, Default)]
pub struct AttrSlotRaw {
    /// File type and permission bits, as in st_mode.
    pub mode: U32,
    pub uid: U32,
    pub gid: U32,
    pub nlink: U32,
    pub size: U64,
    pub atime_ns: I64,
    pub mtime_ns: I64,
    pub ctime_ns: I64,
    pub rdev: U32,
    /// Directories: the parent directory's inode (the root names itself).
    pub parent: U32,
    /// Low 32 bits of the generation in the selector that chose this slot.
    pub generation: U32,
    /// CRC32C of bytes 0..60.
    pub crc: U32,
}
const _: () = assert!(size_of::<AttrSlotRaw>() == 64);

/// Validated attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrSlot {
    pub kind: FileType,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub rdev: u32,
    pub parent: u32,
}

impl AttrSlot {
    pub fn to_raw(&self, generation: u64) -> AttrSlotRaw {
        let mut raw = AttrSlotRaw {
            mode: ((self.mode & !crate::S_IFMT) | self.kind.mode_bits()).into(),
            uid: self.uid.into(),
            gid: self.gid.into(),
            nlink: self.nlink.into(),
            size: self.size.into(),
            atime_ns: self.atime_ns.into(),
            mtime_ns: self.mtime_ns.into(),
            ctime_ns: self.ctime_ns.into(),
            rdev: self.rdev.into(),
            parent: self.parent.into(),
            generation: (generation as u32).into(),
            crc: 0.into(),
        };
        raw.crc = crc32c(&raw.as_bytes()[..60]).into();
        raw
    }

    pub fn to_bytes(&self, generation: u64) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.to_raw(generation).as_bytes());
        out
    }

    /// Validate the slot the selector names.
    pub fn from_bytes(
        bytes: &[u8],
        offset: PmOffset,
        generation: u64,
    ) -> Result<AttrSlot, Corrupt> {
        let raw: AttrSlotRaw = read_raw(bytes, "inode slot", offset)?;
        let want = crc32c(&raw.as_bytes()[..60]);
        if raw.crc.get() != want {
            return Err(Corrupt::at(
                "inode slot",
                offset,
                format!(
                    "checksum mismatch (stored {:#010x}, computed {:#010x})",
                    raw.crc.get(),
                    want
                ),
            ));
        }
        if raw.generation.get() != generation as u32 {
            return Err(Corrupt::at(
                "inode slot",
                offset,
                format!(
                    "generation {} but the selector says {}",
                    raw.generation.get(),
                    generation as u32
                ),
            ));
        }
        let kind = FileType::from_mode(raw.mode.get()).ok_or_else(|| {
            Corrupt::at(
                "inode slot",
                offset,
                format!("bad file type in mode {:o}", raw.mode.get()),
            )
        })?;
        if raw.size.get() > i64::MAX as u64 {
            return Err(Corrupt::at("inode slot", offset, "size out of range"));
        }
        Ok(AttrSlot {
            kind,
            mode: raw.mode.get() & !crate::S_IFMT,
            uid: raw.uid.get(),
            gid: raw.gid.get(),
            nlink: raw.nlink.get(),
            size: raw.size.get(),
            atime_ns: raw.atime_ns.get(),
            mtime_ns: raw.mtime_ns.get(),
            ctime_ns: raw.ctime_ns.get(),
            rdev: raw.rdev.get(),
            parent: raw.parent.get(),
        })
    }
}

/// The three header words of an inode, bounds-checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InodeHeader {
    pub generation: u64,
    pub live_slot: u8,
    pub data_head: u64,
    pub xattr_head: u64,
}

impl InodeHeader {
    pub fn from_bytes(
        bytes: &[u8],
        offset: PmOffset,
        record_count: u64,
    ) -> Result<InodeHeader, Corrupt> {
        let raw: InodeRaw = read_raw(bytes, "inode", offset)?;
        let sel = raw.selector.get();
        let (dh, xh) = (raw.data_head.get(), raw.xattr_head.get());
        for (name, v) in [("data chain head", dh), ("xattr chain head", xh)] {
            if v > record_count {
                return Err(Corrupt::at(
                    "inode",
                    offset,
                    format!("{name} {v} outside the record table"),
                ));
            }
        }
        Ok(InodeHeader {
            generation: sel >> 1,
            live_slot: (sel & 1) as u8,
            data_head: dh,
            xattr_head: xh,
        })
    }

    pub fn selector(generation: u64, slot: u8) -> u64 {
        generation << 1 | (slot as u64 & 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_roundtrip_and_generation_check() {
        let a = AttrSlot {
            kind: FileType::Regular,
            mode: 0o644,
            uid: 1,
            gid: 2,
            nlink: 1,
            size: 100,
            atime_ns: -5,
            mtime_ns: 6,
            ctime_ns: 7,
            rdev: 0,
            parent: 0,
        };
        let b = a.to_bytes(9);
        assert_eq!(AttrSlot::from_bytes(&b, PmOffset(0), 9).unwrap(), a);
        assert!(AttrSlot::from_bytes(&b, PmOffset(0), 10).is_err());
        let mut c = b;
        c[17] ^= 1;
        assert!(AttrSlot::from_bytes(&c, PmOffset(0), 9).is_err());
    }
}
