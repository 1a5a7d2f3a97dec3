//! The live words: what the process holding an image (the *holder*: a
//! mount or a server) publishes in the mapping for *direct readers*, other
//! processes that map the image read-only and copy file bytes out of it
//! themselves (docs/DIRECT.md has the whole protocol).
//!
//! They are 8-byte words outside every CRC, stored with plain atomic
//! stores and never persisted on purpose: they only matter to processes
//! that are mapping the image at the same time, and any value is valid.
//!
//! - **Change counter** (inode bytes 24..32, [`crate::inode::CHANGE_OFF`]):
//!   a seqlock word per inode. The holder makes it odd before the first
//!   store of a change to the inode's chains or attributes that a reader
//!   could see, and even again after the last; before buffer or record
//!   space it unlinked can be reused, the counter has moved. A reader that
//!   reads the same even value before and after copying saw one state.
//! - **Birth** (inode bytes 32..40, [`crate::inode::BIRTH_OFF`]): the
//!   change count at which this incarnation of the inode was made, written
//!   (and persisted) with the new inode, so a number that now names
//!   another file is told apart.
//! - **Image epoch** (inode 0, bytes 24..32, [`EPOCH_OFF`]): odd while a
//!   writer that does not keep the counters (recovery at open, fsck -y,
//!   mkfs) may be changing anything; every such writer moves it, so a
//!   reader that sees the same even epoch before and after a copy knows
//!   no such writer ran meanwhile, and one that sees it change drops
//!   everything it cached.
//! - **Verify hint** (inode 0, bytes 32..40, [`VERIFY_HINT_OFF`]): the
//!   holder's verify mode, which direct readers follow.
//!
//! Inode 0 is never a file (a zero link means "none"), so its 192 bytes
//! are free for these words.

use crate::geometry::Geometry;
use crate::inode::{BIRTH_OFF, CHANGE_OFF};

/// Offset of the image epoch within inode 0.
pub const EPOCH_OFF: u64 = 24;
/// Offset of the verify hint within inode 0.
pub const VERIFY_HINT_OFF: u64 = 32;

/// The verify hint's values: none published (no holder, or one that
/// closed), or the holder's mode.
pub const VERIFY_HINT_NONE: u64 = 0;
pub const VERIFY_HINT_ONCE: u64 = 1;
pub const VERIFY_HINT_ALWAYS: u64 = 2;
pub const VERIFY_HINT_OFF_MODE: u64 = 3;

/// Image offset of inode `ino`'s change counter.
pub fn change_pos(g: &Geometry, ino: u32) -> u64 {
    g.inode_pos(ino).0 + CHANGE_OFF
}

/// Image offset of inode `ino`'s birth word.
pub fn birth_pos(g: &Geometry, ino: u32) -> u64 {
    g.inode_pos(ino).0 + BIRTH_OFF
}

/// Image offset of the image epoch.
pub fn epoch_pos(g: &Geometry) -> u64 {
    g.inode_offset + EPOCH_OFF
}

/// Image offset of the verify hint.
pub fn verify_hint_pos(g: &Geometry) -> u64 {
    g.inode_offset + VERIFY_HINT_OFF
}

/// The ioctl a direct reader asks a pktfs FUSE mount which image serves
/// one of its files: `_IOR('p', 0x70, [u8; 32])`, answered with
/// [`Identity::to_bytes`]. FUSE passes it to the daemon that serves that
/// very file, so the answer cannot come from anyone else.
pub const IOC_IDENTITY: u32 = 0x8020_7070;

/// Which image file a holder maps: its device and inode numbers (as the
/// holder's `stat` sees them) and the image's UUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub uuid: [u8; 16],
}

impl Identity {
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..8].copy_from_slice(&self.dev.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..].copy_from_slice(&self.uuid);
        b
    }

    pub fn from_bytes(b: &[u8]) -> Option<Identity> {
        if b.len() != 32 {
            return None;
        }
        Some(Identity {
            dev: u64::from_le_bytes(b[..8].try_into().ok()?),
            ino: u64::from_le_bytes(b[8..16].try_into().ok()?),
            uuid: b[16..].try_into().ok()?,
        })
    }
}

/// Whether a counter or epoch value says a change is in flight.
pub fn in_flight(v: u64) -> bool {
    v & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GeometryParams;

    #[test]
    fn the_identity_ioctl_is_ior_p_0x70_of_32_bytes() {
        let (dir_read, size, kind, nr) = (2u32, 32u32, b'p' as u32, 0x70u32);
        assert_eq!(IOC_IDENTITY, dir_read << 30 | size << 16 | kind << 8 | nr);
        let id = Identity {
            dev: 0x1234,
            ino: 99,
            uuid: [7; 16],
        };
        assert_eq!(Identity::from_bytes(&id.to_bytes()), Some(id));
        assert_eq!(Identity::from_bytes(&[0; 31]), None);
    }

    #[test]
    fn live_words_are_aligned_and_outside_every_crc() {
        let g = Geometry::compute(&GeometryParams::for_size(64 << 20)).unwrap();
        for p in [
            epoch_pos(&g),
            verify_hint_pos(&g),
            change_pos(&g, 1),
            birth_pos(&g, 7),
        ] {
            assert_eq!(p % 8, 0, "an atomic word must be 8-aligned");
        }
        // Inode 0's words lie before inode 1; an inode's live words lie
        // between its header words and its attribute slots (whose CRCs
        // cover only the slots).
        assert!(verify_hint_pos(&g) + 8 <= g.inode_pos(1).0);
        const { assert!(CHANGE_OFF >= crate::inode::XATTR_HEAD_OFF + 8) };
        const { assert!(BIRTH_OFF + 8 <= crate::inode::SLOTS_OFF) };
    }
}
