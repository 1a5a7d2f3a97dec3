//! One event loop: a thread with its own io_uring, its own ring of the
//! image's free packet buffers (buffer group), its own SO_REUSEPORT
//! listener and its connections.
//!
//! # A turn
//! 1. Submit everything queued and wait for a completion (one
//!    `io_uring_enter`), at most until the next deadline. After a turn
//!    that did work, the loop first polls for up to `busy_poll` without
//!    sleeping (see [`LoopParams::busy_poll`]).
//! 2. Read the clock once (deadlines, an answer's Date; the receive time
//!    only of bytes the kernel gave none for).
//! 3. Handle the completions: accepts open sessions and arm a multishot
//!    receive; receives hand the landed bytes to their session with the
//!    kernel's receive time of that completion (which makes pieces at
//!    once: CRC while hot); sends continue or finish.
//! 4. End of turn: each session that got bytes commits them (one commit
//!    per connection per turn); receives that ended are re-armed, those
//!    that found the ring empty once it has entries again; expired idle
//!    deadlines close their connections; session timers fire.
//!
//! A connection costs its fd and its small state here: no thread, and no
//! packet buffer until bytes arrive (the ring is shared by every
//! connection of the loop).
//!
//! One connection's life (admitted, armed, its session's flow applied,
//! closed, reaped) is `conn_life.rs`; its sends `send.rs`; whether the
//! loop polls before it sleeps `poll.rs`.

use std::collections::BinaryHeap;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::cmp::Reverse;

use pktfs_engine::{RingEvent, RxData, RxRing, RxRingConfig};
use pktfs_fs::Volume;

use super::conn_table::Table;
use super::protocol::{CloseReason, Protocol, TurnClock};
use crate::util::now_ns;

mod busy_poll;
mod conn_life;
mod send;
mod woken;

use busy_poll::{Plan, PollGovernor};
use send::SendPath;

/// Longest wait in one turn: how soon a stop request is seen.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// After accept failed (EMFILE, ENFILE): wait this long before re-arming,
/// so a full fd table does not turn the loop into a busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);
/// After a graceful close's answer is out: how long what the peer still
/// sends is read and dropped before the connection is cut (as the
/// threaded transport's linger).
const LINGER: Duration = Duration::from_secs(2);

/// State shared by the loops of one server and its handle.
#[derive(Debug, Default)]
pub struct LoopShared {
    pub stop: AtomicBool,
    /// Connections open on all loops.
    pub active: AtomicUsize,
    pub accepted: AtomicU64,
    pub refused: AtomicU64,
    pub idle_closed: AtomicU64,
    pub nospace_closed: AtomicU64,
    pub dram_reads: AtomicU64,
    pub enobufs: AtomicU64,
    /// Turns whose completions were found by polling, not by sleeping.
    pub polled: AtomicU64,
    /// Polls for the peer's next bytes that found nothing (CPU spent for
    /// no latency; see `poll.rs`).
    pub poll_misses: AtomicU64,
    /// Loops that are running.
    pub running: AtomicUsize,
    /// DRAM the loops' sessions hold beyond each one's uncounted first
    /// `Config::CONN_FREE_DRAM` (head assembly, chunk lines, queued
    /// answers), against `Config::max_inflight_bytes`
    /// ([`super::limits::DramCharge`]).
    pub dram: AtomicU64,
    /// Times a session or a new connection was refused DRAM over that
    /// budget.
    pub dram_refused: AtomicU64,
}

/// How a loop runs.
#[derive(Clone, Copy, Debug)]
pub struct LoopParams {
    pub ring: RxRingConfig,
    /// Connections all loops together take (by the fd limit).
    pub max_connections: usize,
    /// After a turn that did work, how long the loop looks for the next
    /// completion without sleeping (zero: never). A loop asleep when a
    /// request arrives is woken by an interrupt to its idle core, which
    /// costs that request tens of microseconds in a VM; polling trades CPU
    /// time for that latency, and pauses while its polls keep finding
    /// nothing (`poll.rs`).
    pub busy_poll: Duration,
}

/// A listener of the loop and the protocol it serves (accept tag: its
/// index).
pub type Service = (TcpListener, Arc<dyn Protocol>);

/// What a loop did, for its log line at exit.
#[derive(Debug, Default, Clone, Copy)]
pub struct LoopReport {
    pub accepted: u64,
    pub max_open: usize,
    pub turns: u64,
    pub enobufs: u64,
    /// Turns whose work was found by polling.
    pub polled: u64,
    /// Polls for the peer that found nothing.
    pub poll_misses: u64,
}

struct Loop<'v> {
    vol: &'v Volume,
    ring: RxRing<'v>,
    table: Table<'v>,
    services: &'v [Service],
    shared: &'v LoopShared,
    params: LoopParams,
    idle: BinaryHeap<Reverse<(Instant, u64)>>,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    /// When the current turn began (its completions were reaped).
    turn_now: Instant,
    touched: Vec<u64>,
    rearm: Vec<u64>,
    starved: Vec<u64>,
    accept_armed: Vec<bool>,
    accept_retry_at: Vec<Option<Instant>>,
    /// Answers of a turn that received on one connection go out at once
    /// (`SendPath`, in `send.rs`).
    sends: SendPath,
    report: LoopReport,
    /// Other threads wake connections of this loop through it
    /// (`super::wake`; handled in `woken.rs`).
    wake: Arc<super::wake::LoopWake>,
    /// Scratch for the tags a wake-up names.
    woken: Vec<u64>,
}

/// Run one loop until `shared.stop`. Errors only when the ring cannot be
/// set up; once running, failures close connections, not the loop.
pub fn run(
    vol: Arc<Volume>,
    services: Vec<Service>,
    shared: Arc<LoopShared>,
    params: LoopParams,
    ready: std::sync::mpsc::Sender<io::Result<()>>,
) -> LoopReport {
    let ring = match pktfs_engine::RxRing::new(&vol, params.ring) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(io::Error::other(format!(
                "{} ring: {e}",
                params.ring.backend
            ))));
            return LoopReport::default();
        }
    };
    let sends = SendPath::new(&params.ring);
    let wake = match super::wake::LoopWake::new() {
        Ok(w) => w,
        Err(e) => {
            let _ = ready.send(Err(io::Error::other(format!("the loop's wake-up: {e}"))));
            return LoopReport::default();
        }
    };
    let mut l = Loop {
        vol: &vol,
        ring,
        table: Table::new(),
        turn_now: Instant::now(),
        services: &services,
        shared: &shared,
        params,
        idle: BinaryHeap::new(),
        timers: BinaryHeap::new(),
        touched: Vec::new(),
        rearm: Vec::new(),
        starved: Vec::new(),
        accept_armed: vec![false; services.len()],
        accept_retry_at: vec![None; services.len()],
        sends,
        report: LoopReport::default(),
        wake,
        woken: Vec::new(),
    };
    for k in 0..services.len() {
        if let Err(e) = l.arm_accept(k) {
            let _ = ready.send(Err(e));
            return LoopReport::default();
        }
    }
    if let Err(e) = l.arm_wake() {
        let _ = ready.send(Err(e));
        return LoopReport::default();
    }
    shared.running.fetch_add(1, Ordering::SeqCst);
    let _ = ready.send(Ok(()));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l.serve()));
    if let Err(p) = r {
        // A panic may leave the Volume's DRAM state half-changed: stop it
        // (fail-stop), as the thread-per-connection server does.
        vol.fail_after_panic("an event loop", &*p);
    }
    l.shutdown();
    shared.running.fetch_sub(1, Ordering::SeqCst);
    l.report
}

impl<'v> Loop<'v> {
    fn arm_accept(&mut self, k: usize) -> io::Result<()> {
        self.ring
            .accept_multi(self.services[k].0.as_fd(), k as u64)?;
        self.accept_armed[k] = true;
        Ok(())
    }

    fn name(&self, svc: usize) -> &'static str {
        self.services[svc].1.name()
    }

    fn serve(&mut self) {
        let mut events = Vec::new();
        // Whether the last turn handled anything: only then is the next
        // completion likely soon enough to be worth polling for (an idle
        // loop sleeps at once).
        let mut worked = false;
        let mut wall_ns = 0;
        let mut governor = PollGovernor::new(self.params.busy_poll);
        while !self.shared.stop.load(Ordering::Relaxed) {
            let fresh_sends = self.ring.take_fresh_sends() > 0;
            // From the turn's clock, not a fresh read: a deadline is then
            // met at most one turn (microseconds) late, and a turn costs a
            // clock read less.
            let wait = self.wait_time(self.turn_now);
            let plan = governor.plan(worked, fresh_sends, wait);
            let mut polled = false;
            if let Plan::Poll { budget, judged } = plan {
                polled = match self.ring.submit_and_poll(budget) {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::error!("{} submit: {e}", self.ring.backend());
                        false
                    }
                };
                if judged {
                    governor.polled(polled);
                    if !polled {
                        self.shared.poll_misses.fetch_add(1, Ordering::Relaxed);
                        self.report.poll_misses += 1;
                    }
                }
            }
            // Only a paused sleep's length is used (a clock read less per
            // turn otherwise).
            let slept_from = (plan == Plan::Sleep).then(Instant::now);
            if polled {
                self.shared.polled.fetch_add(1, Ordering::Relaxed);
                self.report.polled += 1;
            } else {
                // A poll took time off the deadline; without one the wait
                // computed above still holds (a clock read less per turn).
                let wait = match plan {
                    Plan::Poll { .. } => self.wait_time(Instant::now()),
                    Plan::Sleep => wait,
                };
                if let Err(e) = self.ring.submit_and_wait(Some(wait)) {
                    tracing::error!("{} submit: {e}", self.ring.backend());
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            self.report.turns += 1;
            let now = Instant::now();
            self.turn_now = now;
            self.ring.completions(&mut events);
            worked = !events.is_empty();
            if let (true, Some(from)) = (worked, slept_from) {
                governor.slept(now.saturating_duration_since(from));
            }
            // How many receives the turn has decides how its answers
            // leave (`SendPath`). The wall clock only for a turn that
            // received bytes (a turn of send completions needs none); it
            // never goes back within a loop. Bytes are stamped with their
            // completion's kernel time, the clock only where the kernel
            // gave none (`Conn::stamp`).
            let receives = events
                .iter()
                .filter(|e| matches!(e, RingEvent::Received { .. }))
                .count();
            self.sends.turn(&mut self.ring, receives);
            if receives > 0 {
                wall_ns = now_ns().max(wall_ns);
            }
            let at = TurnClock { wall_ns, now };
            for ev in events.drain(..) {
                self.handle(ev, at);
            }
            self.end_turn(now);
        }
    }

    /// How long a turn may sleep, counted from `now`: until the next
    /// deadline, at most `MAX_WAIT`.
    fn wait_time(&self, now: Instant) -> Duration {
        self.next_deadline()
            .map_or(MAX_WAIT, |t| t.saturating_duration_since(now).min(MAX_WAIT))
    }

    fn next_deadline(&self) -> Option<Instant> {
        [
            self.idle.peek().map(|r| r.0 .0),
            self.timers.peek().map(|r| r.0 .0),
        ]
        .into_iter()
        .chain(self.accept_retry_at.iter().copied())
        .flatten()
        .min()
    }

    fn handle(&mut self, ev: RingEvent<'v>, at: TurnClock) {
        let now = at.now;
        match ev {
            RingEvent::Accepted { tag, conn, more } => {
                let k = tag as usize;
                if k >= self.services.len() {
                    return;
                }
                if !more {
                    self.accept_armed[k] = false;
                }
                match conn {
                    Ok(fd) => self.admit(k, TcpStream::from(fd), now),
                    Err(e) => {
                        if !more {
                            tracing::warn!("{}: accept: {e}; retrying", self.name(k));
                            self.accept_retry_at[k] = Some(now + ACCEPT_BACKOFF);
                        }
                    }
                }
            }
            RingEvent::Received { tag, data, .. } if tag == super::wake::TAG => self.woken(data),
            RingEvent::Received {
                tag,
                data,
                more,
                kernel_ns,
            } => {
                let Some(c) = self.table.get(tag) else { return };
                if !more {
                    c.recv_armed = false;
                }
                match data {
                    RxData::Bytes(h) => {
                        if c.finishing {
                            // Lingering (or about to): dropped unread.
                            if !more {
                                c.rearm = true;
                                self.rearm.push(tag);
                            }
                            return;
                        }
                        if c.closing.is_some() {
                            // Dropped: the connection is going.
                            self.maybe_reap(tag);
                            return;
                        }
                        c.idle_until = c.idle_from(now);
                        if !c.touched {
                            c.touched = true;
                            self.touched.push(tag);
                        }
                        let rx = c.stamp(kernel_ns, at.wall_ns);
                        let f = c.session.on_data(h, rx, at);
                        if !more {
                            c.rearm = true;
                            self.rearm.push(tag);
                        }
                        self.apply(tag, f);
                        self.refresh_idle(tag);
                    }
                    RxData::Ended => {
                        // No bytes (io_uring: the receive met an entry's
                        // short tail, which the ring eats before the
                        // re-arm is submitted).
                        if c.closing.is_some() {
                            self.maybe_reap(tag);
                        } else if !more {
                            c.rearm = true;
                            self.rearm.push(tag);
                        }
                    }
                    RxData::Eof => self.peer_closed(tag, now),
                    RxData::Discarded(_) => {
                        // A finishing connection's bytes, thrown away: go
                        // on reading until the peer closes or the linger
                        // ends.
                        if c.closing.is_some() {
                            self.maybe_reap(tag);
                        } else {
                            c.rearm = true;
                            self.rearm.push(tag);
                        }
                    }
                    RxData::Error(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        self.shared.enobufs.fetch_add(1, Ordering::Relaxed);
                        self.report.enobufs += 1;
                        if c.closing.is_none() && !(c.finishing && c.peer_eof) {
                            self.starved.push(tag);
                        } else {
                            self.maybe_reap(tag);
                        }
                    }
                    RxData::Error(e) => {
                        if e.raw_os_error() != Some(libc::ECANCELED) {
                            tracing::debug!("{}: receive: {e}", self.services[c.svc].1.name());
                        }
                        self.close(tag, CloseReason::Error);
                        self.maybe_reap(tag);
                    }
                }
            }
            RingEvent::Sent { tag, result, msg } => self.sent(tag, result, msg),
            RingEvent::Cancelled { .. } => {}
        }
    }

    fn end_turn(&mut self, now: Instant) {
        // The lists are walked out of `self` (handling may push new tags,
        // for the next turn) and their capacity kept: no allocation per turn.
        let mut touched = std::mem::take(&mut self.touched);
        for tag in touched.drain(..) {
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if !c.touched {
                continue;
            }
            c.touched = false;
            if c.closing.is_some() || c.finishing {
                continue;
            }
            let f = c.session.end_turn();
            self.apply(tag, f);
        }
        touched.append(&mut self.touched);
        self.touched = touched;
        let mut rearm = std::mem::take(&mut self.rearm);
        for tag in rearm.drain(..) {
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if std::mem::take(&mut c.rearm) && c.closing.is_none() {
                // A finishing connection's bytes are only thrown away: they
                // need no packet buffer.
                c.draining |= c.finishing;
                self.arm_recv(tag);
            } else {
                self.maybe_reap(tag);
            }
        }
        rearm.append(&mut self.rearm);
        self.rearm = rearm;
        if !self.starved.is_empty() {
            let have = self.ring.replenish();
            let starved = std::mem::take(&mut self.starved);
            if have > 0 {
                for tag in starved {
                    self.arm_recv(tag);
                }
            } else {
                // Not one entry, and the volume gives no more space: the
                // image is full. The session says what that means (HTTP
                // answers 507, as the threaded server does; raw keeps what
                // was stored and closes); a connection that is finishing
                // reads what its peer still sends into DRAM, so its answer
                // is not lost to a reset.
                for tag in starved {
                    self.starved_for_good(tag);
                }
            }
        }
        // Idle deadlines: a heap entry is checked against the connection's
        // current deadline, re-queued when it moved on.
        while let Some(&Reverse((t, tag))) = self.idle.peek() {
            if t > now {
                break;
            }
            self.idle.pop();
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if c.closing.is_some() || c.idle_entry != t {
                continue; // stale: a later entry counts
            }
            if c.idle_until <= now && !c.lingering && self.send_watch_renewed(tag, now) {
                // A slow reader that keeps to its session's pace
                // (`send.rs`): a new window.
                continue;
            }
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if c.idle_until <= now {
                // A linger that ended is a close the session asked for.
                let why = if c.lingering {
                    CloseReason::Session
                } else {
                    CloseReason::IdleTimeout
                };
                self.close(tag, why);
                self.maybe_reap(tag);
            } else {
                let u = c.idle_until;
                c.idle_entry = u;
                self.idle.push(Reverse((u, tag)));
            }
        }
        while let Some(&Reverse((t, tag))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(c) = self.table.get(tag) else {
                continue;
            };
            if c.timer_at != Some(t) || c.closing.is_some() || c.finishing {
                continue;
            }
            c.timer_at = None;
            let f = c.session.on_timer(now);
            self.apply(tag, f);
        }
        for k in 0..self.services.len() {
            if !self.accept_armed[k] && self.accept_retry_at[k].is_none_or(|t| t <= now) {
                self.accept_retry_at[k] = None;
                if let Err(e) = self.arm_accept(k) {
                    tracing::warn!("{}: arming accept: {e}", self.name(k));
                    self.accept_retry_at[k] = Some(now + ACCEPT_BACKOFF);
                }
            }
        }
    }

    /// Close every connection, wait for the kernel to let go of every
    /// buffer, then let the sessions go (their pending data committed).
    fn shutdown(&mut self) {
        for tag in self.table.tags() {
            if let Some(c) = self.table.get(tag) {
                if c.touched {
                    c.touched = false;
                    let f = c.session.end_turn();
                    drop(f);
                }
            }
            self.close(tag, CloseReason::Shutdown);
        }
        // Every request ends (cancelled) before any connection's socket
        // or buffer is let go.
        let _ = self.ring.cancel(super::wake::TAG);
        self.ring.quiesce();
        for tag in self.table.tags() {
            if let Some(c) = self.table.get(tag) {
                c.recv_armed = false;
                c.in_kernel_send = false;
            }
            self.maybe_reap(tag);
        }
    }
}
