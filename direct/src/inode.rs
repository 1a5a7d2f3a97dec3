//! An inode as a direct reader sees it: its header words, its live
//! attribute slot and its birth, read word by word from the mapping and
//! validated (inside a section: a torn read fails a check or the section).

use pktfs_layout::inode::{BIRTH_OFF, INODE_SIZE, SLOTS_OFF, SLOT_SIZE};
use pktfs_layout::{AttrSlot, InodeHeader, PmOffset};

use crate::base::Base;
use crate::error::{Error, Result};

/// A live inode's words.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InodeView {
    pub attr: AttrSlot,
    pub data_head: u64,
    pub birth: u64,
}

impl Base {
    /// Inode `ino` as it is now. A freed inode (birth 0: the holder marks
    /// it so when it frees the number) is `NotFound`; damage is `Corrupt`
    /// (real only if the caller's section holds).
    pub(crate) fn inode(&self, ino: u32) -> Result<InodeView> {
        if !self.g.ino_in_range(ino as u64) {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        let pos = self.g.inode_pos(ino);
        let mut b = [0u8; INODE_SIZE];
        if !self.map.load_words(pos.0, &mut b) {
            return Err(corrupt(ino, "the inode lies outside the image"));
        }
        let birth = u64::from_le_bytes(b[BIRTH_OFF as usize..][..8].try_into().expect("8 bytes"));
        if birth == 0 {
            return Err(Error::NotFound(format!("inode {ino}")));
        }
        let h = InodeHeader::from_bytes(&b, pos, self.g.record_count)
            .map_err(|e| corrupt(ino, &e.to_string()))?;
        let slot_at = (SLOTS_OFF + h.live_slot as u64 * SLOT_SIZE) as usize;
        let attr = AttrSlot::from_bytes(
            &b[slot_at..slot_at + SLOT_SIZE as usize],
            PmOffset(pos.0 + slot_at as u64),
            h.generation,
        )
        .map_err(|e| corrupt(ino, &e.to_string()))?;
        Ok(InodeView {
            attr,
            data_head: h.data_head,
            birth,
        })
    }
}

pub(crate) fn corrupt(ino: u32, why: &str) -> Error {
    Error::Corrupt {
        ino: ino as u64,
        why: why.to_string(),
    }
}
