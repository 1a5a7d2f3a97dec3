//! A loop's sends: one send per connection in the kernel at a time (the
//! next queued answer goes when the previous one completed), partial sends
//! continued where the kernel stopped, and what a finished answer lets the
//! session do next.

use std::cmp::Reverse;
use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use pktfs::{SendStart, TxMsg, TxPos};

use super::super::conn::Sending;
use super::super::session::CloseReason;
use super::{Loop, LINGER};

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
                s.msg = Some(msg);
                if !c.lingering {
                    // The turn's clock: the completion came in this turn.
                    c.idle_until = self.turn_now + c.session.idle_timeout();
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
