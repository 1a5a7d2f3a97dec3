//! The thread-per-connection transport: one connection's requests over a
//! blocking socket, received into the image with [`RxStream`], walked by
//! the one body walker (`crate::receive::body`) and acted on by the
//! protocol (plain HTTP; the S3 endpoint runs on the loops only).
//!
//! Its own ways, beside the loops': a body is taken in pieces of at least
//! [`MIN_PIECE`] where it landed (a trickle of small receives is not a
//! record per receive), its pace is kept by `super::pace`, and a large
//! body's pieces are made and committed by a persister thread
//! (`crate::receive::persist`) while this one receives.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::conn::{serve, Conn, Next, Protocol, Receive, Received, Spare};
use super::head::{parse_head, Head, Method};
use super::pace::RecvPace;
use super::plain::Plain;
use crate::receive::body::{BodyError, Framing, Hooks, Pieces, Walk};
use crate::receive::persist::with_persister;
use crate::receive::stream::{RxStream, IDLE_RESERVATION};
use crate::shared::Shared;

/// Coalesce body bytes into pieces of at least this size (unless the body
/// or the reservation ends first), so a trickle of small receives does not
/// become a record per receive.
const MIN_PIECE: u32 = 16 << 10;

enum HeadResult {
    Req(Head),
    /// Nothing more on this connection (EOF, idle timeout, reset).
    Done,
    /// Answer this and close.
    Fail(u16, &'static str),
}

/// Serve one HTTP connection on this thread until it ends.
pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, peer: SocketAddr) {
    if let Err(e) = sock.set_nodelay(true) {
        tracing::debug!("HTTP connection from {peer}: TCP_NODELAY: {e}");
    }
    if let Err(e) = sock.set_write_timeout(Some(sh.cfg.io_timeout)) {
        tracing::warn!("HTTP connection from {peer}: cannot set the send timeout: {e}; closing");
        return;
    }
    let rx = RxStream::new(&sh.vol, &sock, sh.cfg.rx_chunk);
    let mut b = Blocking {
        c: Conn::new(sh, Some(&sock), peer, None),
        p: Plain,
        rx,
        pace: RecvPace::default(),
    };
    b.run();
}

/// One connection on its thread: the core, its protocol, its input.
struct Blocking<'a, P> {
    c: Conn<'a>,
    p: P,
    rx: RxStream<'a>,
    /// The body being read keeps to `Config::min_recv_rate`.
    pace: RecvPace,
}

impl<'a, P: Protocol<'a>> Blocking<'a, P> {
    fn run(&mut self) {
        loop {
            if self.c.sh.stop.load(Ordering::Relaxed) {
                return;
            }
            self.rx.at_rest();
            let (i, o) = (self.rx.seq(), self.c.conn_out);
            let h = self.next_head();
            self.c.in_pos = self.rx.seq();
            self.c.begin_request();
            (self.c.req.in_before, self.c.req.out_before) = (i, o);
            let h = match h {
                HeadResult::Req(h) => h,
                HeadResult::Done => return,
                HeadResult::Fail(code, msg) => {
                    self.c.error(code, msg, false);
                    self.c.linger();
                    self.c.end_request();
                    return;
                }
            };
            self.c.req.method = h.method.as_str();
            self.c.req.json = h.accept_json;
            let was_put = matches!(h.method, Method::Put | Method::Post);
            let keep = self.serve(h);
            self.c.in_pos = self.rx.seq();
            self.c.end_request();
            if !keep || self.c.send_failed {
                return;
            }
            if was_put && self.c.spare.is_none() {
                self.c.spare = Spare::make(self.c.sh);
            }
        }
    }

    /// Receive and parse the next request head (in the packet buffer).
    fn next_head(&mut self) -> HeadResult {
        let cfg = &self.c.sh.cfg;
        let mut started: Option<Instant> = None;
        loop {
            let w = self.rx.window();
            if !w.is_empty() {
                let p = &mut self.p;
                match parse_head(w, &mut self.c.path, cfg, &mut |r| p.head_fields(r)) {
                    Ok(Some((n, h))) => {
                        self.rx.consume(n as u32);
                        return HeadResult::Req(h);
                    }
                    // The head's clock starts at its first bytes (a head
                    // that arrives whole needs no clock).
                    Ok(None) => {
                        started.get_or_insert_with(Instant::now);
                    }
                    Err((code, why)) => return HeadResult::Fail(code, why),
                }
            }
            let timeout = match started {
                None => cfg.idle_timeout,
                Some(t) => {
                    let left = cfg.header_timeout.saturating_sub(t.elapsed());
                    if left.is_zero() {
                        return HeadResult::Fail(408, "request head too slow");
                    }
                    left
                }
            };
            match self.rx.fill(IDLE_RESERVATION, timeout) {
                Ok(0) => {
                    if started.is_some() {
                        tracing::info!(
                            "HTTP connection from {}: closed in the middle of a request head",
                            self.c.peer
                        );
                    }
                    return HeadResult::Done;
                }
                Ok(n) => self.c.add_in(n as u64),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    if started.is_some() {
                        return HeadResult::Fail(408, "request head too slow");
                    }
                    tracing::debug!(
                        "HTTP connection from {}: idle for {:?}; closing",
                        self.c.peer,
                        cfg.idle_timeout
                    );
                    return HeadResult::Done;
                }
                Err(e) => {
                    tracing::info!(
                        "HTTP connection from {}: receiving a request head: {e}",
                        self.c.peer
                    );
                    return HeadResult::Done;
                }
            }
        }
    }

    /// Serve one request; false = close the connection. A body the
    /// request does not store is read and dropped first, when the
    /// protocol admits the request.
    fn serve(&mut self, mut h: Head) -> bool {
        if let Some(f) = h.framing().filter(|_| h.read_body_first()) {
            if self.p.admits(&self.c, &h) {
                if !(self.c.send_continue(&h) && self.skip(f)) {
                    return false;
                }
                h = h.without_body();
            }
        }
        match serve(&mut self.c, &mut self.p, &h) {
            Next::Done(keep) => keep,
            Next::Skip(f) => self.skip(f),
            Next::Receive(r) => self.receive(&h, r),
        }
    }

    /// Read and drop a body nobody stores. False: the connection is done.
    fn skip(&mut self, f: Framing) -> bool {
        let mut walk = Walk::new(f, self.c.sh.cfg.max_header_bytes);
        match self.walk_body(&mut walk, None, None, &mut ()) {
            Ok(()) => true,
            Err(e) => {
                self.p.body_failed(&mut self.c, e.widen());
                false
            }
        }
    }

    /// Receive an upload's body, then hand it to the protocol. Large
    /// bodies (`Config::persister_min`, any chunked one) are made and
    /// committed by a persister thread, unless the protocol's hooks see
    /// the pieces.
    fn receive(&mut self, h: &Head, mut r: Receive<'a, P::Body>) -> bool {
        let ino = r.file.ino();
        let min = self.c.sh.cfg.persister_min;
        let big = match r.framing {
            Framing::Length(n) => n >= min,
            Framing::Chunked { .. } | Framing::Stream => min != u64::MAX,
        };
        let got = if big && !<P::Body as Hooks>::SEES_PIECES {
            self.receive_pipelined(r.framing, ino, &mut r.body)
        } else {
            self.receive_inline(r.framing, ino, &mut r.body)
        };
        match got {
            Ok((bytes, records, tail)) => {
                let received = Received {
                    file: r.file,
                    tail,
                    bytes,
                    records,
                };
                self.p.body_done(&mut self.c, h, received, r.body)
            }
            Err(e) => {
                drop(r.file); // never named: freed
                self.p.body_failed(&mut self.c, e);
                false
            }
        }
    }

    /// Receive the body into `ino` on this thread: its bytes, its records
    /// and the last pieces (left for the link).
    #[allow(clippy::type_complexity)]
    fn receive_inline(
        &mut self,
        framing: Framing,
        ino: u64,
        hooks: &mut P::Body,
    ) -> Result<(u64, u64, Vec<pktfs_fs::RxPiece<'a>>), BodyError<<P::Body as Hooks>::Error>> {
        let mut walk = Walk::new(framing, self.c.sh.cfg.max_header_bytes);
        let mut pieces = self.c.upload_pieces();
        if let Err(e) = self.walk_body(&mut walk, Some(&mut pieces), Some(ino), hooks) {
            pieces.abort(self.c.vol);
            return Err(e);
        }
        let tail = pieces.tail(hooks);
        let records = pieces.records() + tail.len() as u64;
        Ok((walk.data_bytes(), records, tail))
    }

    /// A large body: this thread only receives and walks it; a persister
    /// thread makes the pieces and commits them. Everything is committed
    /// before this returns Ok.
    #[allow(clippy::type_complexity)]
    fn receive_pipelined(
        &mut self,
        framing: Framing,
        ino: u64,
        hooks: &mut P::Body,
    ) -> Result<(u64, u64, Vec<pktfs_fs::RxPiece<'a>>), BodyError<<P::Body as Hooks>::Error>> {
        let (vol, sh) = (self.c.vol, self.c.sh);
        let cfg = &sh.cfg;
        let commits = &sh.metrics.commit_seconds;
        let (walked, committed) = with_persister(vol, ino, cfg.rx_chunk as u64, commits, |p| {
            let p = p?;
            let mut pieces = Pieces::off_thread(Some(self.c.space_guard()), p);
            let mut walk = Walk::new(framing, cfg.max_header_bytes);
            let r = self
                .walk_body(&mut walk, Some(&mut pieces), None, hooks)
                .and_then(|()| pieces.flush_small().map_err(BodyError::Fs));
            // Dropped here: the thread hears the body ended.
            drop(pieces);
            Some(r.map(|()| walk.data_bytes()))
        });
        match (walked, committed) {
            // No thread could be started: this one does it all.
            (None, _) => self.receive_inline(framing, ino, hooks),
            (Some(Ok(bytes)), Ok(records)) => Ok((bytes, records, Vec::new())),
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(_)), Err(e)) => Err(BodyError::Fs(e)),
        }
    }

    /// Walk a body off the blocking socket: its data into `into` (None:
    /// read and dropped) after `hooks` saw it; once `rx_chunk` bytes
    /// gathered they are committed into `ino` (the rest stays in `into`
    /// for the commit that names the file).
    fn walk_body<H: Hooks>(
        &mut self,
        walk: &mut Walk,
        mut into: Option<&mut Pieces<'a>>,
        ino: Option<u64>,
        hooks: &mut H,
    ) -> Result<(), BodyError<H::Error>> {
        self.pace.begin();
        let vol = self.c.vol;
        while !walk.done() {
            let Some(n) = self.ready(walk)? else {
                continue;
            };
            let (at, mut seq) = (self.rx.stamp_next(), self.rx.seq());
            let start = seq;
            // What the step leaves is walked from the stream again, with
            // the receive time of its own first byte.
            let landed = self.rx.landed(n);
            walk.step(landed, at, &mut seq, into.as_deref_mut(), hooks, vol)?;
            self.rx.consume((seq - start) as u32);
            if walk.in_line() {
                self.pace.line_open();
            } else {
                self.pace.line_done();
            }
            if let (Some(p), Some(ino)) = (into.as_deref_mut(), ino) {
                if p.batch() >= self.c.sh.cfg.rx_chunk as u64 && p.pending_small() == 0 {
                    p.commit(vol, ino, hooks)?;
                }
            }
        }
        Ok(())
    }

    /// How many received bytes to walk next, or None once more were
    /// received (look again). Data is taken in pieces of at least
    /// [`MIN_PIECE`] unless the frame or the reservation ends first.
    fn ready<E>(&mut self, walk: &Walk) -> Result<Option<u32>, BodyError<E>> {
        let avail = self.rx.available();
        let Some(left) = walk.data_left() else {
            if avail > 0 {
                return Ok(Some(avail));
            }
            self.more(IDLE_RESERVATION as u64)?;
            return Ok(None);
        };
        let after = left.saturating_sub(avail as u64).min(u32::MAX as u64) as u32;
        let now =
            avail as u64 >= left || (avail > 0 && (avail >= MIN_PIECE || self.rx.will_move(after)));
        if now {
            return Ok(Some((avail as u64).min(left) as u32));
        }
        self.more(left - avail as u64)?;
        Ok(None)
    }

    /// Wait for more of the body, keeping to its pace
    /// (`Config::min_recv_rate`, a line's `header_timeout`: `super::pace`);
    /// a receive that times out before the pace is judged waits again.
    fn more<E>(&mut self, want: u64) -> Result<(), BodyError<E>> {
        let want = want.clamp(1, u32::MAX as u64) as u32;
        loop {
            let timeout = self
                .pace
                .wait(Instant::now(), self.c.req.started, &self.c.sh.cfg)
                .map_err(|_| BodyError::Timeout)?;
            match self.rx.fill(want, timeout) {
                Ok(0) => return Err(BodyError::Gone("the client closed the connection".into())),
                Ok(n) => {
                    self.c.add_in(n as u64);
                    self.pace.got(n as u64);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                Err(e) => return Err(BodyError::Gone(e.to_string())),
            }
        }
    }
}
