//! An event loop's session queues its answers here; the loop sends them
//! in order, one `sendmsg` each (head bytes, then a held file range).

use std::collections::VecDeque;

use pktfs_engine::TxMsg;
use pktfs_fs::TxHold;

use super::{held_len, msg_dram};

/// Where answers go when the connection is an event loop's session
/// (`crate::http::session`): queued as messages the loop sends.
#[derive(Debug, Default)]
pub(in crate::http) struct Outbox<'a> {
    pub msgs: VecDeque<TxMsg<'a>>,
    /// Close gracefully once what is queued is out (the linger).
    pub finish: bool,
    /// Emptied head buffers back from the loop, for the next answers.
    pub bufs: Vec<Vec<u8>>,
    /// DRAM the queued messages hold ([`msg_dram`]): what
    /// `Config::max_queued_bytes` bounds (answers pipelined back to back
    /// merge into one message, so counting messages bounds nothing).
    pub queued_bytes: usize,
    /// A tiered answer being fetched and sent a window at a time
    /// ([`super::tiered`]); answers to later requests wait for it.
    pub tiered: Option<super::tiered::Tiered<'a>>,
    /// How this connection's loop is woken from a fetch thread.
    pub waker: Option<crate::loops::wake::Waker>,
}

impl<'a> Outbox<'a> {
    /// Queue the answer head in `out` (taken; a spare buffer is left in its
    /// place) and `hold` after it: bytes after bytes go as one message.
    /// Returns the bytes it sends.
    #[inline]
    pub(in crate::http) fn queue(&mut self, out: &mut Vec<u8>, hold: Option<TxHold<'a>>) -> u64 {
        let spare = self.bufs.pop().unwrap_or_default();
        let head = std::mem::replace(out, spare);
        let n = head.len() as u64 + hold.as_ref().map_or(0, held_len);
        self.queued_bytes += msg_dram(head.len(), hold.as_ref());
        match self.msgs.back_mut() {
            // Bytes after bytes: one message.
            Some(last) if last.hold.is_none() && hold.is_none() => {
                last.head.extend_from_slice(&head);
                self.bufs.push(head);
            }
            _ => self.msgs.push_back(TxMsg { head, hold }),
        }
        n
    }
}
