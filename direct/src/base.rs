//! What every reader of one image needs to read it: the mapping, the
//! geometry, the verified set and the verify mode. Sections, inodes and
//! indexes are read through it (the modules above: section, inode, index);
//! `shared::Shared` adds what handles share on top (caches, the file).

use pktfs_layout::{live, Geometry};

use crate::map::Mapping;
use crate::verify::{Verified, VerifyMode};

/// The mapped image and how to check what is read from it.
#[derive(Debug)]
pub(crate) struct Base {
    pub map: Mapping,
    pub g: Geometry,
    pub verified: Verified,
    pub uuid: [u8; 16],
    /// The program's verify mode, if it chose one (else the holder's).
    pub verify: Option<VerifyMode>,
}

impl Base {
    pub(crate) fn verify_mode(&self) -> VerifyMode {
        self.verify.unwrap_or_else(|| {
            let hint = self
                .map
                .load_u64(live::verify_hint_pos(&self.g))
                .unwrap_or(0);
            VerifyMode::from_hint(hint).unwrap_or_default()
        })
    }
}
