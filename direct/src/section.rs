//! Read sections: the reader's half of the seqlock protocol
//! (docs/DIRECT.md, "The protocol").
//!
//! A section on inode `ino` loads the image epoch and the inode's change
//! counter (both must be even), then the caller reads whatever it needs of
//! the inode, its chain and its bytes, then [`Base::still`] loads both
//! words again after an Acquire fence. Equal values mean no change to the
//! inode and no repair of the image ran meanwhile, so everything read in
//! between belongs to one state of the file (the holder moves the counter
//! before any space it unlinked can be reused). Anything else: the section
//! is torn and the caller's results are thrown away, errors included.

use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use pktfs_layout::live;

use crate::base::Base;
use crate::error::{Error, Result};

/// How long a reader keeps retrying a file that changes under every
/// attempt (or a change that stays in flight) before giving up with
/// `Busy`: a commit keeps a counter odd for microseconds, so this is only
/// reached by a file rewritten continuously, or a holder stopped mid-change.
pub(crate) const PATIENCE: Duration = Duration::from_millis(200);
/// Attempts that spin before the reader starts yielding the CPU.
const SPIN_ATTEMPTS: u32 = 16;

/// The two words a section began with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Section {
    pub epoch: u64,
    pub change: u64,
}

/// Why a section could not begin.
enum NotNow {
    /// The inode's counter is odd: a change is in flight.
    Changing,
    /// The epoch is odd: a repair or recovery is at work.
    Repairing,
}

impl Base {
    fn begin(&self, ino: u32) -> std::result::Result<Section, NotNow> {
        let epoch = self.load_live(live::epoch_pos(&self.g));
        if live::in_flight(epoch) {
            return Err(NotNow::Repairing);
        }
        let change = self.load_live(live::change_pos(&self.g, ino));
        if live::in_flight(change) {
            return Err(NotNow::Changing);
        }
        Ok(Section { epoch, change })
    }

    /// Whether nothing moved since `s` began: everything read since
    /// belongs to one state of inode `ino`.
    pub(crate) fn still(&self, ino: u32, s: &Section) -> bool {
        fence(Ordering::Acquire);
        self.load_live(live::change_pos(&self.g, ino)) == s.change
            && self.load_live(live::epoch_pos(&self.g)) == s.epoch
    }

    fn load_live(&self, pos: u64) -> u64 {
        // The live words lie inside the inode table, which the superblock
        // checks placed inside the mapping.
        self.map.load_u64(pos).unwrap_or(1)
    }

    /// Run `f` in sections on inode `ino` until one holds, and return what
    /// that one returned (its error too: an error is real only when the
    /// section it was found in holds).
    pub(crate) fn consistent<T>(
        &self,
        ino: u32,
        mut f: impl FnMut(&Section) -> Result<T>,
    ) -> Result<T> {
        let t0 = Instant::now();
        let mut attempt = 0u32;
        let mut repairing = false;
        loop {
            match self.begin(ino) {
                Ok(s) => {
                    let r = f(&s);
                    if self.still(ino, &s) {
                        return r;
                    }
                }
                Err(NotNow::Repairing) => repairing = true,
                Err(NotNow::Changing) => repairing = false,
            }
            attempt += 1;
            if attempt > SPIN_ATTEMPTS && t0.elapsed() > PATIENCE {
                return Err(if repairing {
                    Error::Repairing
                } else {
                    Error::Busy(ino as u64)
                });
            }
            if attempt <= SPIN_ATTEMPTS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
