//! The superblock: identity, format version, feature bits and geometry.
//! A primary copy lives at offset 0 and a backup at offset 4096; both are
//! rewritten (primary first, persisted, then backup) whenever the mount state
//! changes, so a torn write can only ever damage one of them.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{crc32c, read_raw, Corrupt, Geometry, PmOffset};

pub const MAGIC: [u8; 8] = *b"PKTFS\x00\x01\x00";
/// The format version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;
pub const PRIMARY_OFFSET: u64 = 0;
pub const BACKUP_OFFSET: u64 = 4096;
/// Superblock `state` values.
pub const STATE_CLEAN: u32 = 1;
pub const STATE_MOUNTED: u32 = 2;

bitflags::bitflags! {
    /// Incompatible features: a reader that does not know one must not open.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Features: u32 {
        /// Records may name a slice spanning consecutive buffers.
        const SPANNING_SLICES = 1 << 0;
        /// Small payloads share packet buffers (buffer space is refcounted).
        const SHARED_BUFFERS = 1 << 1;
        /// Multi-chain operations go through the redo journal.
        const REDO_JOURNAL = 1 << 2;
        /// Data chains may hold remote records (kind 4), whose slices lie in
        /// objects of an S3-compatible store. Set by the first tier-out, not
        /// at mkfs: an image that never tiered stays readable by builds
        /// without tiering.
        const REMOTE_RECORDS = 1 << 3;
    }
}

bitflags::bitflags! {
    /// Read-only-compatible features: an unknown one allows read-only opens.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RoCompatFeatures: u32 {
        /// Dirents may carry their directory's mtime/ctime (record flag
        /// `FLAG_DIR_TIME`). A reader that ignores them shows older
        /// directory times; a writer that ignored them could lose them on
        /// its next slot switch, hence read-only for such a build.
        const DIR_TIME_DIRENTS = 1 << 0;
        /// Data records may carry `FLAG_DAMAGED`. A reader that ignored it
        /// would serve bytes known to be wrong; a writer that ignored it
        /// could split such a record into remnants with fresh checksums.
        const DAMAGE_FLAGS = 1 << 1;
        /// The holder keeps the live words (`live`: inode change counters,
        /// births, the image epoch) that direct readers check. A writer
        /// that did not would let direct readers return bytes of a state
        /// the file never had, hence read-only for such a build.
        const CHANGE_COUNTERS = 1 << 2;
    }
}

/// The ro_compat features this build writes (and understands).
pub const RO_COMPAT_SUPPORTED: RoCompatFeatures = RoCompatFeatures::all();

bitflags::bitflags! {
    /// Compatible features: informational; unknown ones are ignored.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CompatFeatures: u32 {
        /// Received records carry receive timestamps, the kernel's where
        /// `FLAG_KERNEL_TIME` says so.
        const RX_TIMESTAMPS = 1 << 0;
    }
}

/// The incompat features this build understands.
pub const INCOMPAT_SUPPORTED: Features = Features::all();
/// The incompat features mkfs sets (the others are set when first used).
pub const INCOMPAT_AT_MKFS: Features = Features::SPANNING_SLICES
    .union(Features::SHARED_BUFFERS)
    .union(Features::REDO_JOURNAL);

/// Superblock as it lies in the image (256 bytes).
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct SuperblockRaw {
    pub magic: [u8; 8],
    pub version: U32,
    pub incompat: U32,
    pub ro_compat: U32,
    pub compat: U32,
    pub image_len_bytes: U64,
    pub buffer_size_bytes: U32,
    pub inode_count: U32,
    pub record_count: U64,
    pub buffer_count: U64,
    pub journal_offset: U64,
    pub journal_slots: U32,
    pub journal_slot_bytes: U32,
    pub inode_offset: U64,
    pub inode_size_bytes: U32,
    pub record_size_bytes: U32,
    pub record_offset: U64,
    pub buffer_offset: U64,
    pub uuid: [u8; 16],
    pub created_ns: U64,
    pub mount_count: U64,
    pub state: U32,
    pub flags: U32,
    pub last_mount_ns: U64,
    pub label: [u8; 32],
    pub reserved: [u8; 68],
    /// CRC32C of bytes 0..252.
    pub crc: U32,
}
const _: () = assert!(size_of::<SuperblockRaw>() == 256);

/// A validated superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub geometry: Geometry,
    pub incompat: Features,
    pub ro_compat: u32,
    pub compat: u32,
    pub uuid: [u8; 16],
    pub created_ns: u64,
    pub mount_count: u64,
    pub state: u32,
    pub last_mount_ns: u64,
    pub label: [u8; 32],
}

impl Superblock {
    pub fn new(geometry: Geometry, uuid: [u8; 16], created_ns: u64) -> Superblock {
        Superblock {
            geometry,
            incompat: INCOMPAT_AT_MKFS,
            ro_compat: RO_COMPAT_SUPPORTED.bits(),
            compat: CompatFeatures::RX_TIMESTAMPS.bits(),
            uuid,
            created_ns,
            mount_count: 0,
            state: STATE_CLEAN,
            last_mount_ns: 0,
            label: [0; 32],
        }
    }

    pub fn to_raw(&self) -> SuperblockRaw {
        let g = &self.geometry;
        let mut raw = SuperblockRaw {
            magic: MAGIC,
            version: FORMAT_VERSION.into(),
            incompat: self.incompat.bits().into(),
            ro_compat: self.ro_compat.into(),
            compat: self.compat.into(),
            image_len_bytes: g.image_len_bytes.into(),
            buffer_size_bytes: g.buffer_size_bytes.into(),
            inode_count: g.inode_count.into(),
            record_count: g.record_count.into(),
            buffer_count: g.buffer_count.into(),
            journal_offset: g.journal_offset.into(),
            journal_slots: g.journal_slots.into(),
            journal_slot_bytes: g.journal_slot_bytes.into(),
            inode_offset: g.inode_offset.into(),
            inode_size_bytes: (crate::inode::INODE_SIZE as u32).into(),
            record_size_bytes: (crate::RECORD_SIZE as u32).into(),
            record_offset: g.record_offset.into(),
            buffer_offset: g.buffer_offset.into(),
            uuid: self.uuid,
            created_ns: self.created_ns.into(),
            mount_count: self.mount_count.into(),
            state: self.state.into(),
            flags: 0.into(),
            last_mount_ns: self.last_mount_ns.into(),
            label: self.label,
            reserved: [0; 68],
            crc: 0.into(),
        };
        raw.crc = crc32c(&raw.as_bytes()[..252]).into();
        raw
    }

    pub fn to_bytes(&self) -> [u8; 256] {
        let mut out = [0u8; 256];
        out.copy_from_slice(self.to_raw().as_bytes());
        out
    }

    /// Validate a superblock read from `offset` of an image `image_len` bytes
    /// long. Checks, in order: magic, CRC, version, incompat features, and
    /// that the geometry is self-consistent and fits the image.
    pub fn from_bytes(bytes: &[u8], offset: u64, image_len: u64) -> Result<Superblock, Corrupt> {
        let at = PmOffset(offset);
        let raw: SuperblockRaw = read_raw(bytes, "superblock", at)?;
        if raw.magic != MAGIC {
            return Err(Corrupt::NotPktfs { found: raw.magic });
        }
        let want = crc32c(&raw.as_bytes()[..252]);
        if raw.crc.get() != want {
            return Err(Corrupt::at(
                "superblock",
                at,
                format!(
                    "checksum mismatch (stored {:#010x}, computed {:#010x})",
                    raw.crc.get(),
                    want
                ),
            ));
        }
        if raw.version.get() > FORMAT_VERSION {
            return Err(Corrupt::NewerVersion {
                found: raw.version.get(),
                supported: FORMAT_VERSION,
            });
        }
        let unknown = raw.incompat.get() & !INCOMPAT_SUPPORTED.bits();
        if unknown != 0 {
            return Err(Corrupt::UnknownIncompat { bits: unknown });
        }
        if raw.inode_size_bytes.get() as usize != crate::inode::INODE_SIZE
            || raw.record_size_bytes.get() as usize != crate::RECORD_SIZE
        {
            return Err(Corrupt::at(
                "superblock",
                at,
                format!(
                    "inode size {} / record size {} differ from this build's {} / {}",
                    raw.inode_size_bytes.get(),
                    raw.record_size_bytes.get(),
                    crate::inode::INODE_SIZE,
                    crate::RECORD_SIZE
                ),
            ));
        }
        let geometry = Geometry {
            image_len_bytes: raw.image_len_bytes.get(),
            buffer_size_bytes: raw.buffer_size_bytes.get(),
            inode_count: raw.inode_count.get(),
            record_count: raw.record_count.get(),
            buffer_count: raw.buffer_count.get(),
            journal_offset: raw.journal_offset.get(),
            journal_slots: raw.journal_slots.get(),
            journal_slot_bytes: raw.journal_slot_bytes.get(),
            inode_offset: raw.inode_offset.get(),
            record_offset: raw.record_offset.get(),
            buffer_offset: raw.buffer_offset.get(),
        };
        geometry
            .validate()
            .map_err(|detail| Corrupt::at("superblock geometry", at, detail))?;
        if image_len < geometry.image_len_bytes {
            return Err(Corrupt::Truncated {
                expected: geometry.image_len_bytes,
                actual: image_len,
            });
        }
        Ok(Superblock {
            geometry,
            incompat: Features::from_bits_truncate(raw.incompat.get()),
            ro_compat: raw.ro_compat.get(),
            compat: raw.compat.get(),
            uuid: raw.uuid,
            created_ns: raw.created_ns.get(),
            mount_count: raw.mount_count.get(),
            state: raw.state.get(),
            last_mount_ns: raw.last_mount_ns.get(),
            label: raw.label,
        })
    }
}

/// Parse the raw struct without validating it (tools that edit images).
pub fn raw_from_bytes(bytes: &[u8]) -> Option<SuperblockRaw> {
    SuperblockRaw::read_from_prefix(bytes).ok().map(|(r, _)| r)
}

/// Recompute a raw superblock's CRC after editing it.
pub fn seal(raw: &mut SuperblockRaw) {
    raw.crc = crc32c(&raw.as_bytes()[..252]).into();
}

pub fn raw_bytes(raw: &SuperblockRaw) -> &[u8] {
    raw.as_bytes()
}

/// True if `bytes` begins with the pktfs magic (whether or not it is valid).
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..8] == MAGIC
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeometryParams;

    fn sb() -> Superblock {
        let g = Geometry::compute(&GeometryParams::for_size(64 << 20)).unwrap();
        Superblock::new(g, [7; 16], 123)
    }

    #[test]
    fn roundtrip() {
        let s = sb();
        let b = s.to_bytes();
        assert_eq!(Superblock::from_bytes(&b, 0, 64 << 20).unwrap(), s);
    }

    #[test]
    fn detects_every_failure_kind() {
        let s = sb();
        let mut b = s.to_bytes();
        b[0] = b'X';
        assert!(matches!(
            Superblock::from_bytes(&b, 0, 64 << 20),
            Err(Corrupt::NotPktfs { .. })
        ));

        let mut b = s.to_bytes();
        b[100] ^= 1;
        let e = Superblock::from_bytes(&b, 0, 64 << 20).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");

        assert!(matches!(
            Superblock::from_bytes(&s.to_bytes(), 0, 1 << 20),
            Err(Corrupt::Truncated { .. })
        ));

        let mut raw = s.to_raw();
        raw.version = (FORMAT_VERSION + 1).into();
        raw.crc = crc32c(&raw.as_bytes()[..252]).into();
        assert!(matches!(
            Superblock::from_bytes(raw.as_bytes(), 0, 64 << 20),
            Err(Corrupt::NewerVersion { .. })
        ));

        let mut raw = s.to_raw();
        raw.incompat = (raw.incompat.get() | 1 << 31).into();
        raw.crc = crc32c(&raw.as_bytes()[..252]).into();
        assert_eq!(
            Superblock::from_bytes(raw.as_bytes(), 0, 64 << 20),
            Err(Corrupt::UnknownIncompat { bits: 1 << 31 })
        );

        // Geometry that points outside the image must be refused even with a good CRC.
        let mut raw = s.to_raw();
        raw.record_count = (u64::MAX / 2).into();
        raw.crc = crc32c(&raw.as_bytes()[..252]).into();
        assert!(Superblock::from_bytes(raw.as_bytes(), 0, 64 << 20).is_err());

        assert!(Superblock::from_bytes(&[0u8; 10], 0, 64 << 20).is_err());
    }
}
