//! The loop's wake-up receive (`super::super::wake`): kept armed, and
//! when it completes the connections other threads woke are told
//! ([`crate::loops::Session::on_wake`]).

use std::io;
use std::sync::atomic::Ordering;

use pktfs_engine::RxData;

use super::super::wake::TAG;
use super::Loop;

impl<'v> Loop<'v> {
    /// Arm the single-shot receive that throws the wake bytes away.
    pub(super) fn arm_wake(&mut self) -> io::Result<()> {
        let w = self.wake.clone();
        self.ring.recv_discard(w.fd(), TAG)
    }

    /// The wake-up receive completed: arm it again, then wake every
    /// connection named since the last one (those that closed meanwhile
    /// are gone from the table, their tags' generation unmatched).
    pub(super) fn woken(&mut self, data: RxData<'v>) {
        let stopping = self.shared.stop.load(Ordering::Relaxed);
        match data {
            RxData::Discarded(_) => {}
            RxData::Error(e) if e.raw_os_error() == Some(libc::ECANCELED) => return,
            other => {
                if !stopping {
                    tracing::error!("the loop's wake-up receive ended ({other:?}); re-arming");
                }
            }
        }
        if !stopping {
            if let Err(e) = self.arm_wake() {
                // Sessions waiting for a fetch are then only moved on by
                // their own timeouts.
                tracing::error!("arming the loop's wake-up: {e}");
            }
        }
        let mut tags = std::mem::take(&mut self.woken);
        self.wake.take(&mut tags);
        for tag in tags.drain(..) {
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if c.closing.is_some() || c.finishing {
                continue;
            }
            let f = c.session.on_wake();
            self.apply(tag, f);
            self.refresh_idle(tag);
        }
        self.woken = tags;
    }
}
