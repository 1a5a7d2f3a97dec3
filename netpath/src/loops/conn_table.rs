//! A loop's connections: what each one is doing (its session, its
//! receive, its sends, its deadlines) and the table that finds one by the
//! tag its ring operations carry.

use std::collections::VecDeque;
use std::net::TcpStream;
use std::time::Instant;

use pktfs_engine::{TxMsg, TxPos};
use pktfs_fs::RxTime;

use super::protocol::{CloseReason, SendRule, Session};

/// A send in progress: the message and how far it got.
pub(super) struct Sending<'v> {
    /// The message, while not in the kernel's hands.
    pub(super) msg: Option<TxMsg<'v>>,
    pub(super) pos: TxPos,
    pub(super) sent: u64,
    pub(super) total: u64,
}

pub(super) struct Conn<'v> {
    pub(super) sock: TcpStream,
    /// Index of the service that accepted it.
    pub(super) svc: usize,
    /// The session asked to finish ([`Flow::Finish`]): no more data for
    /// it; once its sends are out the sending side is shut down and the
    /// connection lingers until the peer closes or `LINGER` ends.
    pub(super) finishing: bool,
    pub(super) lingering: bool,
    /// The peer closed its side.
    pub(super) peer_eof: bool,
    pub(super) session: Box<dyn Session<'v> + 'v>,
    pub(super) gen: u32,
    pub(super) idle_until: Instant,
    /// The receive is in flight (the multishot one, or a draining one).
    pub(super) recv_armed: bool,
    /// Finishing with no packet buffer to receive into: what the peer
    /// still sends is read into DRAM and thrown away
    /// ([`RxRing::recv_discard`]), so the close does not reset the
    /// connection before the answer is read.
    pub(super) draining: bool,
    /// The receive ended but should go on (re-armed at the end of the turn).
    pub(super) rearm: bool,
    /// Got bytes this turn (its session commits at the end of the turn).
    pub(super) touched: bool,
    pub(super) closing: Option<CloseReason>,
    /// The idle-heap entry that counts (older ones are stale).
    pub(super) idle_entry: Instant,
    pub(super) sending: Option<Sending<'v>>,
    pub(super) in_kernel_send: bool,
    pub(super) queued: VecDeque<TxMsg<'v>>,
    pub(super) timer_at: Option<Instant>,
    /// The socket's SO_RCVLOWAT as last set ([`Session::rcvlowat`]).
    pub(super) lowat: u32,
    /// The peer is slower than the server's sends (None: it keeps up).
    pub(super) watch: Option<SendWatch>,
    /// The receive time given to the session's last bytes.
    pub(super) last_rx: RxTime,
}

impl Conn<'_> {
    /// The receive time of a receive's bytes: the kernel's (`kernel_ns`)
    /// or, where it gave none, `clock_ns` (the turn's clock), never
    /// earlier than the connection's previous bytes.
    pub(super) fn stamp(&mut self, kernel_ns: Option<u64>, clock_ns: u64) -> RxTime {
        let t = match kernel_ns {
            Some(ns) => RxTime::Kernel(ns),
            None => RxTime::Clock(clock_ns),
        };
        self.last_rx = not_before(self.last_rx, t);
        self.last_rx
    }

    /// The silence limit counted from `now`: the session's, and never past
    /// the end of a [`SendWatch`] window (bytes arriving, or the kernel
    /// taking a few bytes, must not move the judgement of a slow reader).
    pub(super) fn idle_from(&self, now: Instant) -> Instant {
        let t = now + self.session.idle_timeout();
        match &self.watch {
            Some(w) => t.min(w.until()),
            None => t,
        }
    }
}

/// `t`, moved up to `prev` when it is earlier (a stream's times ascend
/// with its bytes, even when the wall clock steps back or a clock reading
/// came before). Moved up, it is a kernel time only if both were: a clock
/// reading never becomes a kernel claim, nor is a kernel time moved to a
/// clock reading's value under the kernel's name.
pub(super) fn not_before(prev: RxTime, t: RxTime) -> RxTime {
    if t.ns() >= prev.ns() {
        return t;
    }
    match (prev, t) {
        (RxTime::Kernel(p), RxTime::Kernel(_)) => RxTime::Kernel(p),
        (p, _) => RxTime::Clock(p.ns()),
    }
}

/// A connection whose sends the socket could not take at once: the peer
/// (not the server) sets the pace, and must keep to its session's
/// [`SendRule`] ([`Session::send_rule`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct SendWatch {
    pub(super) rule: SendRule,
    /// The window began (at the first partial send, or the last check).
    pub(super) since: Instant,
    /// Bytes the kernel took since `since`. The socket's buffer was full
    /// when the watch began, so each byte it takes after was first freed
    /// by the peer's acknowledgement: this is what the client consumed,
    /// not what the server's send buffer absorbed.
    pub(super) taken: u64,
}

impl SendWatch {
    /// When this window is judged.
    pub(super) fn until(&self) -> Instant {
        self.since + self.rule.window
    }

    /// Whether the peer kept to the rule over the window so far, at `now`.
    pub(super) fn kept(&self, now: Instant) -> bool {
        let secs = now.saturating_duration_since(self.since).as_secs_f64();
        self.taken as f64 >= self.rule.min_bytes_per_sec as f64 * secs
    }
}

/// Connections by slot; a tag is `generation << 32 | slot + 1`, so a late
/// completion of a closed connection never reaches its slot's next owner.
pub(super) struct Table<'v> {
    pub(super) slots: Vec<Option<Conn<'v>>>,
    pub(super) free: Vec<u32>,
    pub(super) gens: Vec<u32>,
}

impl<'v> Table<'v> {
    pub(super) fn new() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            gens: Vec::new(),
        }
    }
    pub(super) fn insert(&mut self, mut c: Conn<'v>) -> u64 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.gens.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        self.gens[i as usize] = self.gens[i as usize].wrapping_add(1);
        c.gen = self.gens[i as usize];
        self.slots[i as usize] = Some(c);
        (c_gen(self.gens[i as usize]) << 32) | (i as u64 + 1)
    }
    pub(super) fn get(&mut self, tag: u64) -> Option<&mut Conn<'v>> {
        let i = (tag & 0xffff_ffff).checked_sub(1)? as usize;
        let c = self.slots.get_mut(i)?.as_mut()?;
        (c_gen(c.gen) == tag >> 32).then_some(c)
    }
    pub(super) fn remove(&mut self, tag: u64) -> Option<Conn<'v>> {
        self.get(tag)?;
        let i = (tag & 0xffff_ffff) as usize - 1;
        self.free.push(i as u32);
        self.slots[i].take()
    }
    pub(super) fn tags(&self) -> Vec<u64> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (c_gen(c.gen) << 32) | (i as u64 + 1)))
            .collect()
    }
    pub(super) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

fn c_gen(g: u32) -> u64 {
    // Tags must stay below the ring's 56-bit limit.
    (g & 0x00ff_ffff) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_time_never_goes_back_and_never_becomes_a_kernel_claim() {
        use RxTime::{Clock, Kernel};
        // In order: as given.
        assert_eq!(not_before(Kernel(10), Kernel(20)), Kernel(20));
        assert_eq!(not_before(Kernel(10), Clock(20)), Clock(20));
        assert_eq!(not_before(Clock(10), Kernel(20)), Kernel(20));
        // Behind: moved up; a kernel time only if both were the kernel's.
        assert_eq!(not_before(Kernel(20), Kernel(10)), Kernel(20));
        assert_eq!(not_before(Kernel(20), Clock(10)), Clock(20));
        assert_eq!(not_before(Clock(20), Kernel(10)), Clock(20));
        assert_eq!(not_before(Clock(20), Clock(10)), Clock(20));
    }
}
