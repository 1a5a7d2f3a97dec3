//! What a protocol plugs into the event loop: a [`Protocol`] opens a
//! [`Session`] per accepted connection, and the loop drives it with the
//! bytes that landed, the end of each loop turn, sends finished, timers and
//! the close. The loop knows nothing about raw streams or HTTP.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pktfs_engine::TxMsg;
use pktfs_fs::{RxHeld, RxTime, Volume};

/// What a session wants next.
#[derive(Debug)]
pub enum Flow<'v> {
    /// Keep receiving.
    Continue,
    /// Send these bytes and this range of a file in one sendmsg (the DRAM
    /// bytes first, then one iovec per record), after any send queued
    /// before it; [`Session::on_sent`] is told when it is all out.
    Send(TxMsg<'v>),
    /// Close the connection now (sends already queued are abandoned).
    Close,
    /// Close gracefully: once every queued send is out, shut down the
    /// sending side, then drop whatever the peer still sends until it
    /// closes or a short linger ends (so an early answer is read, not
    /// reset away). The session hears nothing more but `on_close`.
    Finish,
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed (and the session then closed).
    Eof,
    /// The session asked ([`Flow::Close`]).
    Session,
    /// Silent for longer than [`Session::idle_timeout`].
    IdleTimeout,
    /// A receive or send failed.
    Error,
    /// The image had no buffer space left to receive into.
    NoSpace,
    /// The server is stopping.
    Shutdown,
}

/// When a loop turn began, read once for everything the turn does (a
/// request's start, its deadlines, the Date of its answer): a turn is
/// microseconds long, far below any timeout, and the vDSO clock showed
/// in a loop's samples. This reads the clock fewer times per request
/// (docs/DESIGN.md, "The event loops"); the saving was below the
/// benchmark's noise.
///
/// Never a record's time: received bytes carry their own
/// ([`Session::on_data`]'s `rx`, the kernel's receive time).
#[derive(Clone, Copy, Debug)]
pub struct TurnClock {
    /// The wall clock at the turn's start, ns since the epoch (an answer's
    /// Date; the stand-in receive time when the kernel gave none). Never
    /// behind the loop's previous turn.
    pub wall_ns: u64,
    /// The monotonic clock at the turn's start (deadlines, durations).
    pub now: Instant,
}

/// How fast a peer must take what a session sends once the socket's send
/// buffer is full ([`Session::send_rule`]): at least `min_bytes_per_sec`,
/// judged over each `window` (and whenever the session's own deadline
/// comes first); a peer below it is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRule {
    pub window: Duration,
    pub min_bytes_per_sec: u64,
}

/// One connection's protocol state, driven by the loop thread that owns
/// the connection.
pub trait Session<'v> {
    /// The connection is admitted and its receive armed (a session may
    /// answer at once, e.g. refuse over a cap).
    fn on_open(&mut self) -> Flow<'v> {
        Flow::Continue
    }
    /// The bytes of one receive completion landed in the image during the
    /// turn `at`. `rx` is their receive time: the kernel's
    /// (`RxTime::Kernel`, SO_TIMESTAMPNS; for TCP the arrival of the
    /// newest segment the receive took), or the turn's clock where the
    /// kernel gave none (`RxTime::Clock`); never earlier than the
    /// connection's previous receive. Make them a piece now, while they
    /// are hot (a record takes `rx` as it is); commit at
    /// [`Session::end_turn`].
    fn on_data(&mut self, data: RxHeld<'v>, rx: RxTime, at: TurnClock) -> Flow<'v>;
    /// How many bytes the socket should hold before the loop hears of
    /// them (SO_RCVLOWAT; 1: every byte at once), asked after every call
    /// into the session. A session taking a large body in asks for more,
    /// so each receive brings a large piece instead of whatever arrived
    /// since the last turn (netpath/src/http/session.rs says how much and
    /// how a slow client still makes progress).
    fn rcvlowat(&self) -> u32 {
        1
    }
    /// The end of a loop turn in which `on_data` was called: commit the
    /// batch (one commit per connection per turn).
    fn end_turn(&mut self) -> Flow<'v>;
    /// The peer closed its side (everything it sent was delivered first).
    fn on_eof(&mut self) -> Flow<'v>;
    /// A [`Flow::Send`] is all out (`Ok(bytes)`) or failed. The message's
    /// head buffer comes back (cleared) for reuse.
    fn on_sent(&mut self, result: io::Result<u64>, _spent: Vec<u8>) -> Flow<'v> {
        match result {
            Ok(_) => Flow::Continue,
            Err(_) => Flow::Close,
        }
    }
    /// When the session wants [`Session::on_timer`] (besides the idle
    /// timeout the loop keeps).
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    fn on_timer(&mut self, _now: Instant) -> Flow<'v> {
        Flow::Continue
    }
    /// The connection's next bytes have nowhere to land: the volume has no
    /// free buffer space for the ring, and none came free by the end of
    /// the turn. Nothing more will be received for this session. The
    /// default closes (what was committed stays); a session that answers
    /// returns the answer with [`Flow::Finish`], and the loop then reads
    /// what the peer still sends into DRAM and throws it away until the
    /// peer closes or the linger ends.
    fn on_starved(&mut self) -> Flow<'v> {
        Flow::Close
    }
    /// Whether the session waits for the first bytes of a request, or the
    /// rest of its head, with nothing else pending. When no packet buffer
    /// can be had, the loop then reads the bytes into DRAM and hands them
    /// to [`Session::on_dram`] instead of telling it
    /// [`Session::on_starved`]: requests that need no space (GET, DELETE)
    /// are still served on a full image.
    fn wants_head(&self) -> bool {
        false
    }
    /// Bytes read into DRAM because the ring had no buffer (only offered
    /// while [`Session::wants_head`]). They are in no packet buffer, so
    /// they can only be parsed, never linked into a file.
    fn on_dram(&mut self, _bytes: &[u8]) -> Flow<'v> {
        Flow::Close
    }
    /// The connection's waker, given once when it is admitted: another
    /// thread (a tier fetch, `crate::transmit::fetch`) calls it to have
    /// [`Session::on_wake`] called on the loop.
    fn on_waker(&mut self, _w: super::wake::Waker) {}
    /// Something this session waits for on another thread is ready (or a
    /// place it waited for freed).
    fn on_wake(&mut self) -> Flow<'v> {
        Flow::Continue
    }
    /// Longest silence before the loop closes the connection.
    fn idle_timeout(&self) -> Duration;
    /// The pace a peer must keep once it, not the server, limits the
    /// sends (asked when a send is first only partly taken; None: no rule,
    /// only [`Session::idle_timeout`]).
    fn send_rule(&self) -> Option<SendRule> {
        None
    }
    /// The peer kept to the [`SendRule`] over a window: it is reading, so
    /// a deadline the session keeps for a client that does not read
    /// restarts from `now`.
    fn on_send_progress(&mut self, _now: Instant) {}
    /// The connection is closed (its socket goes right after).
    fn on_close(&mut self, why: CloseReason);
}

/// A protocol served by the loops.
pub trait Protocol: Send + Sync {
    /// Short name for logs ("raw", "http").
    fn name(&self) -> &'static str;
    /// A session for a new connection from `peer`, or `None` to close it
    /// at once.
    fn open<'v>(&'v self, vol: &'v Volume, peer: SocketAddr) -> Option<Box<dyn Session<'v> + 'v>>;
}
