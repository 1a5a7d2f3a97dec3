//! A loop's sends: one send per connection in the kernel at a time (the
//! next queued answer goes when the previous one completed), partial sends
//! continued where the kernel stopped, and what a finished answer lets the
//! session do next.

use std::cmp::Reverse;
use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use pktfs_engine::{RxRing, RxRingConfig, SendStart, TxMsg, TxPos};

use super::super::conn_table::{SendWatch, Sending};
use super::super::protocol::CloseReason;
use super::{Loop, LINGER};

/// How a turn's answers leave: through the ring, or at once with a
/// non-blocking `sendmsg` from the loop (`RxRingConfig::inline_sends`).
///
/// Why per turn: the ring sends all of a turn's answers in the one
/// `io_uring_enter` the loop makes anyway to poll or wait, which pays when
/// a turn has several. A turn that received once has one answer and
/// nothing to batch it with; through the ring it costs an SQE, a
/// completion and a turn to reap it, where sent at once it is one
/// `sendmsg` and nothing after. Measured with 1 KiB PUTs from wrk, sending
/// at once was cheaper at one connection and the ring cheaper at 16 and
/// 256 (docs/DESIGN.md, "The event loops").
///
/// The same on epoll, whose "ring" queues a send until the loop's next
/// poll or wait and then makes its `sendmsg`s back to back
/// (`EpollRing::send_segments`): it cannot save the syscalls, but a turn's
/// answers leave together after its commits instead of one between each,
/// which measured more requests per second and less server CPU per
/// request at 256 connections than sending each at once.
pub(super) struct SendPath {
    /// Choose per turn (not configured to send at once always).
    per_turn: bool,
}

impl SendPath {
    pub(super) fn new(cfg: &RxRingConfig) -> SendPath {
        SendPath {
            per_turn: !cfg.inline_sends,
        }
    }

    /// Whether a turn whose completions delivered bytes `receives` times
    /// sends at once (None: the ring's configuration stands).
    fn at_once(&self, receives: usize) -> Option<bool> {
        self.per_turn.then_some(receives == 1)
    }

    /// Before a turn's completions are handled.
    pub(super) fn turn(&self, ring: &mut RxRing<'_>, receives: usize) {
        if let Some(on) = self.at_once(receives) {
            ring.set_inline_sends(on);
        }
    }
}

impl<'v> Loop<'v> {
    /// Start the next queued send if none is in the kernel; a finishing
    /// connection with nothing left to send shuts its sending side down
    /// and lingers.
    pub(super) fn pump_send(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        if c.in_kernel_send || c.closing.is_some() {
            return;
        }
        if c.sending.is_none() {
            let Some(m) = c.queued.pop_front() else {
                // Everything asked is out: the peer kept up.
                c.watch = None;
                if c.finishing && !c.lingering {
                    c.lingering = true;
                    let _ = c.sock.shutdown(std::net::Shutdown::Write);
                    if c.peer_eof {
                        self.close(tag, CloseReason::Session);
                        self.maybe_reap(tag);
                        return;
                    }
                    // The linger is bounded: the idle deadline is not
                    // moved by what still arrives.
                    c.idle_until = Instant::now() + LINGER;
                    c.idle_entry = c.idle_until;
                    self.idle.push(Reverse((c.idle_until, tag)));
                }
                return;
            };
            let total = m.len();
            c.sending = Some(Sending {
                msg: Some(m),
                pos: TxPos::default(),
                sent: 0,
                total,
            });
        }
        let s = c.sending.as_mut().expect("a send");
        if s.sent >= s.total {
            let total = s.total;
            let mut head = s.msg.take().map(|m| m.head).unwrap_or_default();
            head.clear();
            c.sending = None;
            if !c.finishing {
                let f = c.session.on_sent(Ok(total), head);
                self.apply(tag, f);
                // The session's state changed (an answer is out): its
                // silence limit may be shorter now.
                self.refresh_idle(tag);
            }
            self.pump_send(tag);
            return;
        }
        let msg = s.msg.take().expect("the message is here");
        match self.ring.send(c.sock.as_fd(), msg, s.pos, tag) {
            Ok(SendStart::Queued) => c.in_kernel_send = true,
            Ok(SendStart::Done { sent, msg }) => {
                // As if its completion had come: continue or finish.
                c.in_kernel_send = true;
                self.sent(tag, Ok(sent), msg);
            }
            Err((e, msg)) => {
                drop(msg);
                self.send_failed(tag, e);
            }
        }
    }

    /// `tag`'s silence limit passed at `now`. A peer the server waits on
    /// that took at least its [`SendRule`](super::super::protocol::SendRule)'s
    /// pace since the window began gets a new window (true); otherwise
    /// (no watch, or too slow) the caller closes it.
    ///
    /// Why by pace and not by "some bytes moved": the kernel takes a few
    /// bytes whenever the peer's window opens a little, and a client that
    /// reads a trickle (or whose kernel collapses its receive queue while
    /// it reads nothing) would otherwise hold its connection, its queued
    /// answers and its held file ranges for ever.
    pub(super) fn send_watch_renewed(&mut self, tag: u64, now: Instant) -> bool {
        let Some(c) = self.table.get(tag) else {
            return false;
        };
        let Some(w) = c.watch else { return false };
        if !w.kept(now) {
            tracing::info!(
                "{}: the client took {} bytes in {:?}, below {} bytes/s: closing",
                self.services[c.svc].1.name(),
                w.taken,
                now.saturating_duration_since(w.since),
                w.rule.min_bytes_per_sec
            );
            return false;
        }
        c.watch = Some(SendWatch {
            since: now,
            taken: 0,
            ..w
        });
        c.session.on_send_progress(now);
        c.idle_until = c.idle_from(now);
        if c.idle_until <= now {
            // The session's own limit is spent all the same.
            return false;
        }
        c.idle_entry = c.idle_until;
        self.idle.push(Reverse((c.idle_until, tag)));
        true
    }

    pub(super) fn send_failed(&mut self, tag: u64, e: io::Error) {
        let Some(c) = self.table.get(tag) else { return };
        c.sending = None;
        c.queued.clear();
        if c.finishing {
            self.close(tag, CloseReason::Error);
            self.maybe_reap(tag);
            return;
        }
        let f = c.session.on_sent(Err(e), Vec::new());
        self.apply(tag, f);
    }

    pub(super) fn sent(&mut self, tag: u64, result: io::Result<usize>, msg: TxMsg<'v>) {
        let Some(c) = self.table.get(tag) else { return };
        c.in_kernel_send = false;
        if c.closing.is_some() {
            drop(msg);
            c.sending = None;
            self.maybe_reap(tag);
            return;
        }
        let Some(s) = c.sending.as_mut() else { return };
        match result {
            Ok(n) if n > 0 => {
                // Continue a partial send where the kernel stopped.
                s.sent += n as u64;
                msg.advance(&mut s.pos, n as u64);
                let partial = s.sent < s.total;
                s.msg = Some(msg);
                match c.watch.as_mut() {
                    Some(w) => w.taken += n as u64,
                    // The kernel took only part: the socket's buffer is
                    // full, the peer sets the pace from here (the bytes
                    // that filled the buffer do not count).
                    None if partial => {
                        c.watch = c.session.send_rule().map(|rule| SendWatch {
                            rule,
                            since: self.turn_now,
                            taken: 0,
                        });
                    }
                    None => {}
                }
                if !c.lingering {
                    // The turn's clock: the completion came in this turn.
                    c.idle_until = c.idle_from(self.turn_now);
                }
                self.pump_send(tag);
            }
            Ok(_) => {
                drop(msg);
                self.send_failed(tag, io::Error::from(io::ErrorKind::WriteZero));
            }
            Err(e) => {
                drop(msg);
                self.send_failed(tag, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_receive_sends_at_once() {
        let path = SendPath::new(&RxRingConfig::default());
        assert_eq!(path.at_once(1), Some(true));
        assert_eq!(path.at_once(0), Some(false), "send completions only");
        assert_eq!(path.at_once(2), Some(false), "answers to batch");
        let always = RxRingConfig {
            inline_sends: true,
            ..Default::default()
        };
        let always = SendPath::new(&always);
        assert_eq!(always.at_once(3), None, "configured: always at once");
    }
}
