//! The holder's half of direct reading (docs/DIRECT.md): keeping the live
//! words of [`pktfs_layout::live`] true while the Volume changes the image.
//!
//! Direct readers are other processes that map the image read-only and
//! copy file bytes out of it without asking this process. They never make
//! the Volume wait: all the Volume owes them is to move an inode's change
//! counter around every change to that inode (a seqlock per inode), and
//! the image epoch around anything that changes the image without the
//! counters (recovery). A reader that reads the same even counter and
//! epoch before and after its copy saw one state of the file; otherwise
//! it retries.
//!
//! # Ordering
//! - [`Volume::changes_begin`] makes the counters odd *before* the first
//!   store a reader could see (a publish, a journal apply); the counter
//!   moves with a locked add, a full barrier on x86, and the Release
//!   fence after it keeps later stores behind it on any machine.
//! - [`Volume::changes_end`] makes them even after the last store and
//!   *before* the space the change unlinked goes back to the allocators
//!   ([`super::commit::Commit::apply`], step 3). So a buffer or record a
//!   reader might still follow is reused, and new bytes written into it,
//!   only after the counter of the file that named it moved: a reader
//!   that saw new bytes there sees the moved counter when it checks.

use std::sync::atomic::{fence, Ordering};

use pktfs_layout::live;
use pktfs_layout::Geometry;

use super::Volume;
use crate::media::Pm;

impl Volume {
    /// A change to `inos` is about to become visible: their counters go odd.
    pub(crate) fn changes_begin(&self, inos: impl Iterator<Item = u32>) {
        if self.read_only {
            return; // nothing in the image changes
        }
        for ino in inos {
            self.pm.bump_live(live::change_pos(&self.geo, ino), 1);
        }
        fence(Ordering::Release);
    }

    /// The change to `inos` is visible in full: their counters go even.
    pub(crate) fn changes_end(&self, inos: impl Iterator<Item = u32>) {
        if self.read_only {
            return;
        }
        fence(Ordering::Release);
        for ino in inos {
            let v = self.pm.bump_live(live::change_pos(&self.geo, ino), 1);
            debug_assert!(
                !live::in_flight(v),
                "inode {ino}'s change counter is odd after a change: two changes overlapped"
            );
        }
    }

    /// Inode `ino` is being freed: its birth word becomes 0, which readers
    /// take for "no such inode" (between `changes_begin` and `changes_end`
    /// of the free, so a reader sees the change or the mark).
    pub(crate) fn mark_freed(&self, ino: u32) {
        if !self.read_only {
            self.pm.store_live(live::birth_pos(&self.geo, ino), 0);
        }
    }

    /// The birth of inode `ino` as it is now (which incarnation of the
    /// number it is), for a direct reader's request to be checked against
    /// the file it means. NotFound if the number is free.
    pub fn inode_birth(&self, ino: u64) -> crate::Result<u64> {
        let arc = self.inode(ino)?;
        let _i = super::rlock(&arc)?;
        Ok(self.pm.read_u64(live::birth_pos(&self.geo, ino as u32)))
    }

    /// Which image file this Volume maps, for a direct reader to check it
    /// maps the same one (None for an image in memory).
    pub fn image_identity(&self) -> Option<live::Identity> {
        use std::os::unix::fs::MetadataExt;
        let m = self.pm.file()?.metadata().ok()?;
        Some(live::Identity {
            dev: m.dev(),
            ino: m.ino(),
            uuid: self.superblock().uuid,
        })
    }

    /// Publish the verify mode for direct readers (writable volumes only:
    /// a read-only holder changes nothing in the image).
    pub(crate) fn publish_verify_hint(&self, hint: u64) {
        if !self.read_only && !self.pm.is_read_only() {
            self.pm.store_live(live::verify_hint_pos(&self.geo), hint);
        }
    }
}

/// A new incarnation of inode `ino` is being written (the number was free,
/// so nothing else moves its counter now): the counter moves to the next
/// even value above it, so readers that held the number see a change, and
/// that value is the new inode's birth, returned for the caller to write
/// with the inode. (Even, whatever a crash left: a number that was never
/// reachable was not evened out by the open.)
pub(crate) fn new_birth(pm: &Pm, g: &Geometry, ino: u32) -> u64 {
    let pos = live::change_pos(g, ino);
    let v = pm.read_u64(pos);
    let by = (v | 1).wrapping_add(1).wrapping_sub(v);
    pm.bump_live(pos, by)
}

/// A writer that does not keep the change counters (recovery at open,
/// fsck -y) is about to change the image: the epoch goes odd, and readers
/// stop trusting anything they cached.
pub fn epoch_begin(pm: &Pm, g: &Geometry) {
    let v = pm.bump_live(live::epoch_pos(g), 1);
    if !live::in_flight(v) {
        // Left odd: the epoch was odd already (a writer before this one
        // died in its window). Odd is what this writer needs.
        pm.bump_live(live::epoch_pos(g), 1);
    }
    fence(Ordering::SeqCst);
}

/// That writer is done: the epoch goes even. A counter left odd by a
/// holder that died mid-change is made even first (`inos`: every inode
/// number whose counter a reader may look at).
pub fn epoch_end(pm: &Pm, g: &Geometry, inos: impl IntoIterator<Item = u32>) {
    for ino in inos {
        let pos = live::change_pos(g, ino);
        if live::in_flight(pm.read_u64(pos)) {
            pm.bump_live(pos, 1);
        }
    }
    fence(Ordering::SeqCst);
    let v = pm.bump_live(live::epoch_pos(g), 1);
    debug_assert!(!live::in_flight(v));
}

/// Give every live inode of `inos` that has no birth one (an image last
/// written by a build before births: readers take birth 0 for a freed
/// inode). Persisted, as births are; inside an odd epoch.
pub(crate) fn give_births(pm: &Pm, g: &Geometry, inos: impl IntoIterator<Item = u32>) {
    for ino in inos {
        let at = live::birth_pos(g, ino);
        if pm.read_u64(at) == 0 {
            let b = new_birth(pm, g, ino);
            pm.write(at, &b.to_le_bytes());
            pm.persist(at, 8);
        }
    }
}

/// mkfs: a random even epoch, so readers of whatever the file held before
/// see a change (an image made anew has no history to continue).
pub(crate) fn epoch_fresh(pm: &Pm, g: &Geometry) {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    pm.store_live(live::epoch_pos(g), u64::from_le_bytes(b) & !1);
}
