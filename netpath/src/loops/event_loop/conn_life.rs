//! A connection's life on a loop: admitted (or refused at the limit),
//! its receive armed, its session's flow applied (answers queued, idle
//! deadline and timers moved), closed, its peer's end seen, and dropped
//! once the kernel holds nothing of it.
//!
//! Why a file of its own: the loop's turn (`event_loop.rs`) reads as
//! "reap, hand each completion on, end the turn"; what happens to one
//! connection along the way is this.

use std::cmp::Reverse;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::super::conn_table::Conn;
use super::super::protocol::{CloseReason, Flow};
use super::Loop;

impl<'v> Loop<'v> {
    pub(super) fn admit(&mut self, svc: usize, sock: TcpStream, now: Instant) {
        let open = self.shared.active.load(Ordering::Relaxed);
        if open >= self.params.max_connections {
            self.shared.refused.fetch_add(1, Ordering::Relaxed);
            let _ = sock.shutdown(std::net::Shutdown::Both);
            return;
        }
        let peer = match sock.peer_addr() {
            Ok(p) => p,
            Err(_) => return, // already gone
        };
        let Some(session) = self.services[svc].1.open(self.vol, peer) else {
            let _ = sock.shutdown(std::net::Shutdown::Both);
            return;
        };
        let idle_until = now + session.idle_timeout();
        let c = Conn {
            sock,
            svc,
            finishing: false,
            lingering: false,
            peer_eof: false,
            session,
            gen: 0,
            idle_until,
            recv_armed: false,
            draining: false,
            rearm: false,
            touched: false,
            closing: None,
            idle_entry: idle_until,
            sending: None,
            in_kernel_send: false,
            queued: VecDeque::new(),
            timer_at: None,
            lowat: 1,
            watch: None,
            last_rx: pktfs_fs::RxTime::Clock(0),
        };
        let tag = self.table.insert(c);
        let waker = self.wake.waker(tag);
        if let Some(c) = self.table.get(tag) {
            c.session.on_waker(waker);
        }
        self.shared.active.fetch_add(1, Ordering::Relaxed);
        self.shared.accepted.fetch_add(1, Ordering::Relaxed);
        self.report.accepted += 1;
        self.report.max_open = self.report.max_open.max(self.table.len());
        self.idle.push(Reverse((idle_until, tag)));
        self.arm_recv(tag);
        if let Some(c) = self.table.get(tag) {
            let f = c.session.on_open();
            self.apply(tag, f);
        }
    }

    pub(super) fn arm_recv(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        if c.recv_armed || c.closing.is_some() {
            return;
        }
        let armed = if c.draining {
            self.ring.recv_discard(c.sock.as_fd(), tag)
        } else {
            self.ring.recv_multi(c.sock.as_fd(), tag)
        };
        match armed {
            Ok(()) => c.recv_armed = true,
            Err(e) => {
                tracing::warn!("{}: arming a receive: {e}", self.services[c.svc].1.name());
                self.close(tag, CloseReason::Error);
                self.maybe_reap(tag);
            }
        }
    }

    pub(super) fn apply(&mut self, tag: u64, f: Flow<'v>) {
        match f {
            Flow::Continue => {}
            Flow::Close => {
                self.close(tag, CloseReason::Session);
                self.maybe_reap(tag);
            }
            Flow::Finish => {
                let Some(c) = self.table.get(tag) else { return };
                c.finishing = true;
                self.pump_send(tag);
            }
            Flow::Send(m) => {
                let Some(c) = self.table.get(tag) else { return };
                c.queued.push_back(m);
                self.pump_send(tag);
            }
        }
        self.sync_rcvlowat(tag);
        self.schedule_timer(tag);
    }

    /// Give the socket the low-water mark its session wants now, when that
    /// changed (a connection that is finishing takes every byte: it only
    /// drains).
    pub(super) fn sync_rcvlowat(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        let want = if c.finishing || c.closing.is_some() {
            1
        } else {
            c.session.rcvlowat().max(1)
        };
        if want == c.lowat {
            return;
        }
        // On a failure the mark is asked for again after the next call
        // into the session.
        match pktfs_fs::media::net::set_rcvlowat(c.sock.as_fd(), want) {
            Ok(()) => c.lowat = want,
            Err(e) => tracing::debug!("SO_RCVLOWAT {want}: {e}"),
        }
    }

    /// The silence limit from now, as the session's state says; a limit
    /// sooner than the heap's entry gets an entry of its own.
    pub(super) fn refresh_idle(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        if c.lingering || c.closing.is_some() {
            return;
        }
        // From the turn's start: a turn is short against any timeout, and
        // one clock read per turn is cheaper than one per connection.
        c.idle_until = c.idle_from(self.turn_now);
        if c.idle_until < c.idle_entry {
            c.idle_entry = c.idle_until;
            self.idle.push(Reverse((c.idle_until, tag)));
        }
    }

    pub(super) fn schedule_timer(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        if c.finishing {
            c.timer_at = None;
            return;
        }
        match c.session.next_timer() {
            Some(t) if c.timer_at != Some(t) => {
                c.timer_at = Some(t);
                self.timers.push(Reverse((t, tag)));
            }
            Some(_) => {}
            None => c.timer_at = None,
        }
    }

    /// Begin closing: no more bytes are taken; the socket is shut down so
    /// the receive ends, and the connection goes once nothing of it is in
    /// flight.
    pub(super) fn close(&mut self, tag: u64, why: CloseReason) {
        let Some(c) = self.table.get(tag) else { return };
        if c.closing.is_some() {
            return;
        }
        c.closing = Some(why);
        let _ = c.sock.shutdown(std::net::Shutdown::Both);
        if c.recv_armed || c.in_kernel_send {
            let _ = self.ring.cancel(tag);
        }
        match why {
            CloseReason::IdleTimeout => {
                self.shared.idle_closed.fetch_add(1, Ordering::Relaxed);
            }
            CloseReason::NoSpace => {
                self.shared.nospace_closed.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// The peer closed its sending side.
    pub(super) fn peer_closed(&mut self, tag: u64, now: Instant) {
        let Some(c) = self.table.get(tag) else { return };
        c.peer_eof = true;
        if c.finishing && c.closing.is_none() {
            if c.lingering {
                self.close(tag, CloseReason::Session);
            }
            // Otherwise closed once the answer is out.
        } else if c.closing.is_none() {
            // Commit what this turn brought before the end.
            let f = if c.touched {
                c.touched = false;
                c.session.end_turn()
            } else {
                Flow::Continue
            };
            self.apply(tag, f);
            if let Some(c) = self.table.get(tag) {
                if c.closing.is_none() {
                    let f = c.session.on_eof();
                    self.apply(tag, f);
                }
            }
            if let Some(c) = self.table.get(tag) {
                if c.closing.is_none() {
                    // Half-closed and the session goes on (it is
                    // sending): nothing more to receive.
                    c.idle_until = c.idle_from(now);
                }
            }
        }
        self.maybe_reap(tag);
    }

    /// The ring has no buffer and the volume none to give, but the session
    /// only waits for a request head: read what arrived into DRAM (one
    /// non-blocking recv; the data is there, it is what found the ring
    /// empty) and hand it over, then arm the receive again.
    pub(super) fn receive_dram(&mut self, tag: u64) {
        let now = Instant::now();
        let mut buf = [0u8; 16 << 10];
        let Some(c) = self.table.get(tag) else { return };
        let name = self.services[c.svc].1.name();
        match rustix::net::recv(&c.sock, &mut buf[..], rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return self.peer_closed(tag, now),
            Ok((n, _)) => {
                self.shared.dram_reads.fetch_add(1, Ordering::Relaxed);
                c.idle_until = c.idle_from(now);
                let f = c.session.on_dram(&buf[..n]);
                self.apply(tag, f);
                self.refresh_idle(tag);
            }
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::debug!("{name}: receive: {e}");
                self.close(tag, CloseReason::Error);
                self.maybe_reap(tag);
                return;
            }
        }
        let Some(c) = self.table.get(tag) else { return };
        if c.closing.is_none() {
            // The next bytes find the ring as it is then: refilled, or
            // empty again (and come here).
            c.draining |= c.finishing;
            self.arm_recv(tag);
        }
    }

    /// `tag`'s receive found no buffer, and the volume has none to give.
    pub(super) fn starved_for_good(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        if c.closing.is_some() || c.recv_armed {
            return;
        }
        if !c.finishing && c.session.wants_head() {
            return self.receive_dram(tag);
        }
        if !c.finishing {
            match c.session.on_starved() {
                Flow::Close => {
                    self.close(tag, CloseReason::NoSpace);
                    self.maybe_reap(tag);
                    return;
                }
                f => {
                    // Ended for lack of space all the same (answered).
                    self.shared.nospace_closed.fetch_add(1, Ordering::Relaxed);
                    self.apply(tag, f);
                }
            }
        }
        let Some(c) = self.table.get(tag) else { return };
        if c.closing.is_some() {
            return;
        }
        // Nothing more reaches the session: what the peer still sends is
        // read into DRAM and thrown away while the answer goes out.
        c.draining = true;
        let silent =
            !c.finishing && c.sending.is_none() && !c.in_kernel_send && c.queued.is_empty();
        if silent {
            // Nothing to say and nothing more to hear: finish now.
            self.apply(tag, Flow::Finish);
        }
        self.arm_recv(tag);
    }

    /// Drop a closing connection once the kernel holds nothing of it.
    pub(super) fn maybe_reap(&mut self, tag: u64) {
        let Some(c) = self.table.get(tag) else { return };
        let Some(why) = c.closing else { return };
        if c.recv_armed || c.in_kernel_send {
            return;
        }
        let mut c = self.table.remove(tag).expect("present");
        c.session.on_close(why);
        // Counted out only once everything the connection held (its spare
        // unnamed file, its pieces) is given back: `active() == 0` is what
        // a caller waits for before it checks the Volume, and a drop still
        // running then took inode and table locks under the checker.
        drop(c);
        self.shared.active.fetch_sub(1, Ordering::Relaxed);
    }
}
