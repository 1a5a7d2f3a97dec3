//! The connection core: one HTTP connection's state, whatever protocol
//! speaks on it (plain HTTP, `super::plain`; S3, `super::s3`) and whichever
//! driver feeds it (`super::session` on an event loop, `super::blocking` on
//! a thread). The drivers read heads and walk bodies; the core sends the
//! answers the protocols build (over the blocking socket, or queued in the
//! [`Outbox`] for the loop to send; tiered ranges a window at a time,
//! [`tiered`]), counts the requests, writes the access log and keeps the
//! unnamed file of the next upload ([`Spare`]). It calls into no protocol:
//! one that words its refusals its own way lends an [`ErrorForm`].
//!
//! # What the core asks a protocol
//! A protocol ([`Protocol`]) decides what a request does: it answers
//! through [`Conn`] and returns what is to become of the request's body
//! ([`Next`]): nothing more (the next request or the close), skipped, or
//! received into an unnamed file and handed back once it is in
//! ([`Protocol::body_done`]). Nothing is left on the connection for the
//! driver to find.
//!
//! # Spare files
//! Creating the unnamed file an upload lands in is Volume work (an inode,
//! its slot) that would otherwise sit between a request's arrival and its
//! answer. After a PUT's answer is out, a keep-alive connection makes the
//! file for its next PUT instead, off the client's wait.
//!
//! Each spare holds an inode until it is used or its connection ends, so
//! the number held server-wide is capped ([`MAX_SPARES`]): with thousands
//! of connections only the first few hundred keep one, the others create
//! the file when the request comes, as without spares. Nor are spares made
//! while fewer than [`SPARE_MIN_FREE_INODES`] inodes are free: on a small
//! or nearly full image idle connections must not hold the inodes other
//! uploads need. A crash loses nothing: an unnamed file is gone after the
//! next open.

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pktfs_engine::TxMsg;
use pktfs_fs::{FsError, RxPiece, TmpFile, TxHold, Volume};
use rustix::net::SendFlags;

use super::head::Head;
use super::response::{begin, error_body, http_date, status_of};
use crate::loops::TurnClock;
use crate::metrics::RequestLabels;
use crate::path::ReqPath;
use crate::receive::body::{BodyError, Framing, Hooks, Pieces, SpaceGuard};
use crate::shared::Shared;

pub(super) mod tiered;

/// DRAM a queued message holds: its head bytes, and for a held file range
/// its own bookkeeping and any tiered bytes fetched for it (the file's
/// local bytes are in the image, not in DRAM, and are not counted).
pub(in crate::http) fn msg_dram(head: usize, hold: Option<&TxHold<'_>>) -> usize {
    head + hold.map_or(0, |h| h.dram_bytes())
}

/// Bytes a hold sends.
pub(super) fn held_len(h: &TxHold<'_>) -> u64 {
    h.segs().iter().map(pktfs_fs::TxSeg::len).sum()
}

/// How a protocol words an error answer (S3: its Error XML); without one
/// the core answers text, or JSON for a client that accepts it.
pub(super) trait ErrorForm {
    fn answer(&self, c: &mut Conn<'_>, code: u16, msg: &str, keep: bool);
}

/// Bodies up to this size are read and dropped after an early refusal, so
/// the connection can be kept.
pub(super) const SMALL_BODY: u64 = 64 << 10;

/// The request being served, for the access log and the metrics.
#[derive(Debug)]
pub(super) struct ReqState {
    pub method: &'static str,
    /// The status of the answer sent (0: none, the client went away).
    pub status: u16,
    pub started: Instant,
    /// Input stream position where the request's head began (its
    /// `bytes_in` are what was consumed from there).
    pub in_before: u64,
    pub out_before: u64,
    /// Error bodies as JSON.
    pub json: bool,
    /// Header lines every answer to this request carries (S3's CORS
    /// headers for a request from another origin; empty otherwise).
    pub cors: String,
}

/// One HTTP connection's state (module docs): answered over a blocking
/// socket (`sock`) or queued for an event loop (`outbox`).
pub(super) struct Conn<'a> {
    pub sh: &'a Shared,
    pub vol: &'a Volume,
    /// The blocking socket (None on an event loop).
    pub sock: Option<&'a TcpStream>,
    pub outbox: Option<Outbox<'a>>,
    pub peer: SocketAddr,
    /// How errors are worded (None: plain HTTP's).
    pub(super) form: Option<&'a dyn ErrorForm>,
    pub path: ReqPath,
    pub out: Vec<u8>,
    /// Scratch for an upload's name and its answer's extra header lines,
    /// kept between requests: taken, filled, put back (no allocation per
    /// request once warm; an error path that does not put them back only
    /// costs the next request an allocation).
    pub scratch_name: Vec<u8>,
    pub scratch_head: String,
    date: (i64, String),
    /// An unnamed file made ahead of the next PUT (after a PUT's answer is
    /// sent, off the latency path); freed when the connection ends.
    pub spare: Option<Spare<'a>>,
    /// An upload was answered: make a spare once the answer is out (event
    /// loop: in `on_sent`).
    pub spare_wanted: bool,
    /// A file an upload replaced, held until the answer is out (event
    /// loop: the send happens after the handler returns); dropping it
    /// gives the old version's space back.
    pub replaced: Option<pktfs_fs::Linked<'a>>,
    tally: Tally,
    /// Bytes received and sent on this connection so far.
    pub conn_in: u64,
    /// Input stream position up to which requests consumed the bytes (a
    /// request's head and the part of its body read): what a request's
    /// `bytes_in` is measured by, unlike what was received while serving
    /// it, which includes read-ahead of the next request and misses bytes
    /// received with the previous one. The driver keeps it.
    pub in_pos: u64,
    pub conn_out: u64,
    pub req: ReqState,
    /// A send on the blocking socket failed (timed out: the client does
    /// not read; or the connection broke): nothing more is served on it.
    /// Handlers that answer an error do not look at whether the answer
    /// went out, so without this a client that pipelined requests and
    /// never reads held its thread for one send timeout per buffered
    /// request (hours, for a few MB of requests).
    pub send_failed: bool,
    /// On an event loop, while a session call of a turn runs: the turn's
    /// clock, read once for the turn ([`Conn::now`], [`Conn::date`]).
    pub turn: Option<TurnClock>,
}

impl<'a> Conn<'a> {
    pub(super) fn new(
        sh: &'a Shared,
        sock: Option<&'a TcpStream>,
        peer: SocketAddr,
        form: Option<&'a dyn ErrorForm>,
    ) -> Conn<'a> {
        Conn {
            sh,
            vol: &sh.vol,
            sock,
            outbox: None,
            peer,
            form,
            path: ReqPath::new(),
            out: Vec::with_capacity(512),
            scratch_name: Vec::new(),
            scratch_head: String::new(),
            date: (0, String::new()),
            spare: None,
            spare_wanted: false,
            replaced: None,
            turn: None,
            send_failed: false,
            tally: Tally::default(),
            conn_in: 0,
            in_pos: 0,
            conn_out: 0,
            req: ReqState {
                method: "-",
                status: 0,
                started: Instant::now(),
                in_before: 0,
                out_before: 0,
                json: false,
                cors: String::new(),
            },
        }
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        // `spare` (an unnamed file made ahead) frees itself when dropped.
        self.flush_tally();
    }
}

impl<'a> Conn<'a> {
    /// The monotonic clock: the loop turn's when there is one (a request's
    /// start and deadlines, off by at most the turn so far), else read.
    pub(super) fn now(&self) -> Instant {
        self.turn.map_or_else(Instant::now, |t| t.now)
    }

    /// A new request begins (its head was just read or failed).
    pub(super) fn begin_request(&mut self) {
        self.req = ReqState {
            method: "-",
            status: 0,
            started: self.now(),
            in_before: self.in_pos,
            out_before: self.conn_out,
            json: false,
            cors: String::new(),
        };
    }

    /// `100 Continue` when the client waits for it before sending the body
    /// it is about to be read (RFC 9110 10.1.1: a final status or 100 at
    /// once). False: the client is gone.
    pub(super) fn send_continue(&mut self, h: &Head) -> bool {
        if !(h.expect_continue && h.http11) {
            return true;
        }
        self.out.clear();
        self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        self.send_out(false)
    }

    /// Answer an error before reading the request's body: whether the
    /// connection goes on. A small body the client is sending anyway is
    /// then read and dropped, so it can; a large body, or one the client
    /// is waiting for a 100 Continue to send, closes it.
    pub(super) fn refuse(&mut self, h: &Head, code: u16, msg: &str) -> bool {
        let mut keep = h.keep_alive;
        if h.has_body() {
            let small = h.content_length.is_some_and(|n| n <= SMALL_BODY);
            keep = keep && small && !h.expect_continue;
        }
        // Answered before the body is read (a refusal changes nothing, and
        // the client may stop sending); the driver then reads and drops
        // the body (`protocol::Next::answered`).
        self.error(code, msg, keep);
        if !keep {
            self.linger();
        }
        keep
    }

    // ----- responses -----

    fn date(&mut self) {
        // The Date header has whole seconds: the wall clock at the turn's
        // start serves as well as a read.
        let ns = self.turn.map_or_else(crate::util::now_ns, |t| t.wall_ns);
        let now = (ns / 1_000_000_000) as i64;
        if self.date.0 != now {
            self.date = (now, http_date(now));
        }
    }

    /// Start a response head in `self.out` (`len` None: chunked body).
    pub(super) fn begin(&mut self, code: u16, len: Option<u64>, keep: bool, extra: &str) {
        self.date();
        self.req.status = code;
        if self.req.cors.is_empty() {
            begin(&mut self.out, code, len, keep, &self.date.1, extra);
        } else {
            let extra = format!("{extra}{}", self.req.cors);
            begin(&mut self.out, code, len, keep, &self.date.1, &extra);
        }
    }

    /// Send `self.out` (on an event loop: queue it); false: the client is
    /// gone (logged).
    pub(super) fn send_out(&mut self, more: bool) -> bool {
        self.send_with(None, more)
    }

    /// Send `self.out`, then the held bytes (on an event loop: one
    /// message, one sendmsg); false: the client is gone (logged).
    pub(super) fn send_with(&mut self, hold: Option<TxHold<'a>>, more: bool) -> bool {
        let Some(sock) = self.sock else {
            let ob = self.outbox.get_or_insert_with(Outbox::default);
            let n = ob.queue(&mut self.out, hold);
            self.add_queued(n);
            return true;
        };
        if !self.send_socket(sock, more || hold.is_some()) {
            return false;
        }
        let Some(hold) = hold else { return true };
        match crate::transmit::chain::send_held_paced(
            sock,
            &hold,
            self.sh.cfg.io_timeout,
            self.sh.cfg.min_send_rate,
        ) {
            Ok(st) => {
                self.add_out(st.bytes);
                true
            }
            Err(e) => {
                // The head promised a length we cannot honour: cut the
                // connection so the client sees the transfer failed.
                match &e {
                    crate::transmit::chain::TxError::Fs(_) => tracing::warn!(
                        peer = %self.peer,
                        path = %self.path.display(),
                        "sending the file failed: {e}; connection cut"
                    ),
                    _ => tracing::info!(
                        peer = %self.peer,
                        path = %self.path.display(),
                        "sending the file failed: {e}; connection cut"
                    ),
                }
                let _ = sock.shutdown(Shutdown::Both);
                self.send_failed = true;
                false
            }
        }
    }

    fn send_socket(&mut self, sock: &TcpStream, more: bool) -> bool {
        let flags = if more {
            SendFlags::NOSIGNAL | SendFlags::MORE
        } else {
            SendFlags::NOSIGNAL
        };
        let mut at = 0;
        // Once a send was only partly taken (the socket's buffer is full),
        // the client sets the pace: each blocking send waits at most
        // `io_timeout`, but a client whose window opens a little now and
        // then would make every wait end early. From then on it must take
        // `min_send_rate` over each `io_timeout` (Config docs).
        let mut slow: Option<(Instant, usize)> = None;
        while at < self.out.len() {
            match rustix::net::send(sock, &self.out[at..], flags) {
                Ok(n) => {
                    at += n;
                    if at < self.out.len() {
                        let (since, from) = *slow.get_or_insert((Instant::now(), at));
                        let cfg = &self.sh.cfg;
                        let spent = since.elapsed();
                        if spent >= cfg.io_timeout {
                            let need = cfg.min_send_rate as f64 * spent.as_secs_f64();
                            if ((at - from) as f64) < need {
                                tracing::info!(
                                    "HTTP connection from {}: the client took {} bytes in {spent:?}, below {} bytes/s; closing",
                                    self.peer,
                                    at - from,
                                    cfg.min_send_rate
                                );
                                self.add_out(at as u64);
                                self.send_failed = true;
                                let _ = sock.shutdown(Shutdown::Both);
                                return false;
                            }
                            slow = Some((Instant::now(), at));
                        }
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    tracing::info!(
                        "HTTP connection from {}: sending the answer to {} {}: {e}",
                        self.peer,
                        self.req.method,
                        self.path.display()
                    );
                    self.add_out(at as u64);
                    self.send_failed = true;
                    return false;
                }
            }
        }
        self.add_out(at as u64);
        true
    }

    pub(super) fn head_only(&mut self, code: u16, keep: bool, extra: &str) -> bool {
        self.begin(code, Some(0), keep, extra);
        self.send_out(false)
    }

    pub(super) fn with_body(
        &mut self,
        code: u16,
        keep: bool,
        extra: &str,
        body: &[u8],
        send_body: bool,
    ) -> bool {
        self.begin(code, Some(body.len() as u64), keep, extra);
        if send_body {
            self.out.extend_from_slice(body);
        }
        self.send_out(false)
    }

    /// Answer an error with a body that says what went wrong, and log it:
    /// server-side failures (5xx) as warnings, refusals of the client's
    /// request at info, the everyday ones (404, 412, 304-like) at debug.
    pub(super) fn error(&mut self, code: u16, msg: &str, keep: bool) {
        if let Some(form) = self.form {
            // Every refusal on the S3 listener is S3's Error XML.
            return form.answer(self, code, msg, keep);
        }
        let (m, path, peer) = (self.req.method, self.path.display(), self.peer);
        match code {
            500.. => {
                tracing::warn!(%peer, method = m, %path, status = code, "request failed: {msg}")
            }
            404 | 412 => {
                tracing::debug!(%peer, method = m, %path, status = code, "request refused: {msg}")
            }
            _ => tracing::info!(%peer, method = m, %path, status = code, "request refused: {msg}"),
        }
        let (body, ty) = error_body(code, msg, self.req.json);
        let mut extra = String::with_capacity(96);
        match code {
            401 => extra.push_str("WWW-Authenticate: Bearer realm=\"pktfs\"\r\n"),
            405 => extra.push_str("Allow: GET, HEAD, OPTIONS\r\n"),
            503 => extra.push_str("Retry-After: 1\r\n"),
            _ => {}
        }
        extra.push_str("Content-Type: ");
        extra.push_str(ty);
        extra.push_str("\r\n");
        self.with_body(code, keep, &extra, &body, self.req.method != "HEAD");
    }

    /// Close gracefully after an early answer: stop sending, then read and
    /// drop what the client is still sending for a short while, so the
    /// close does not reset the connection before the answer is read.
    pub(super) fn linger(&mut self) {
        let Some(sock) = self.sock else {
            // The loop lingers once the answer is out (`Flow::Finish`).
            self.outbox.get_or_insert_with(Outbox::default).finish = true;
            return;
        };
        let _ = sock.shutdown(Shutdown::Write);
        let _ = sock.set_read_timeout(Some(Duration::from_millis(500)));
        let start = Instant::now();
        let mut buf = [0u8; 16 << 10];
        let mut total = 0usize;
        while start.elapsed() < Duration::from_secs(2) && total < (64 << 20) {
            match std::io::Read::read(&mut &*sock, &mut buf) {
                Ok(n) if n > 0 => total += n,
                _ => break,
            }
        }
    }

    /// Answer (when there is anyone to answer) and log a failed body. A
    /// refusal by the protocol's hooks comes back for the protocol to
    /// answer.
    pub(super) fn body_failed<E>(&mut self, e: BodyError<E>) -> Option<E> {
        match e {
            BodyError::Gone(why) => tracing::info!(
                peer = %self.peer,
                method = self.req.method,
                path = %self.path.display(),
                "request body incomplete: {why}; nothing was stored"
            ),
            BodyError::Timeout => self.error(408, "request body too slow", false),
            BodyError::Bad(m) => {
                self.error(400, m, false);
                self.linger();
            }
            BodyError::Fs(e) => {
                let code = status_of(&e);
                self.error(code, &e.to_string(), false);
                self.linger();
            }
            BodyError::Hook(e) => return Some(e),
        }
        None
    }

    /// The unnamed file an upload's body goes into: the one made ahead
    /// (`spare`), else a new one.
    pub(super) fn upload_file(&mut self) -> Result<TmpFile<'a>, FsError> {
        match self.spare.take() {
            Some(t) => Ok(t.take()),
            None => self.vol.tmpfile(0o644, self.sh.uid, self.sh.gid),
        }
    }

    /// What keeps an upload from the volume's reserve.
    pub(super) fn space_guard(&self) -> SpaceGuard {
        let cfg = &self.sh.cfg;
        SpaceGuard::new(cfg.upload_reserve_bytes, cfg.upload_reserve_records)
    }

    /// The pieces an upload's body becomes, kept from the volume's
    /// reserve, their commits timed.
    pub(super) fn upload_pieces(&self) -> Pieces<'a> {
        Pieces::new(
            Some(self.space_guard()),
            Some(&self.sh.metrics.commit_seconds),
        )
    }
}

/// Where answers go when the connection is an event loop's session
/// (`crate::http::session`): queued as messages the loop sends.
#[derive(Debug, Default)]
pub(super) struct Outbox<'a> {
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
    /// ([`tiered`]); answers to later requests wait for it.
    pub tiered: Option<tiered::Tiered<'a>>,
    /// How this connection's loop is woken from a fetch thread.
    pub waker: Option<crate::loops::wake::Waker>,
}

impl<'a> Outbox<'a> {
    /// Queue the answer head in `out` (taken; a spare buffer is left in its
    /// place) and `hold` after it: bytes after bytes go as one message.
    /// Returns the bytes it sends.
    #[inline]
    pub(super) fn queue(&mut self, out: &mut Vec<u8>, hold: Option<TxHold<'a>>) -> u64 {
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

/// Requests between additions of a connection's tally to the shared
/// metrics ([`crate::Services::stats`] lags a busy connection by at most
/// this many).
const TALLY_EVERY: u64 = 32;

/// This connection's counts not yet added to the shared metrics: added
/// every `TALLY_EVERY` requests and at the end, not per request (shared
/// atomics moved a cache line between the cores serving different
/// connections on every request).
#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    /// (method, status) -> count; a handful of entries per connection.
    by_label: Vec<(&'static str, u16, u64)>,
    bytes_in: u64,
    bytes_out: u64,
    files_stored: u64,
}

impl Conn<'_> {
    /// Count the request and write its access-log line.
    pub(super) fn end_request(&mut self) {
        let r = &self.req;
        let t = &mut self.tally;
        t.requests += 1;
        match t
            .by_label
            .iter_mut()
            .find(|(m, s, _)| *m == r.method && *s == r.status)
        {
            Some(e) => e.2 += 1,
            None => t.by_label.push((r.method, r.status, 1)),
        }
        tracing::info!(
            target: "pktfs::access",
            peer = %self.peer,
            method = r.method,
            path = %self.path.display(),
            status = r.status,
            bytes_in = self.in_pos.saturating_sub(r.in_before),
            bytes_out = self.conn_out - r.out_before,
            us = r.started.elapsed().as_micros() as u64,
            "access"
        );
        if self.tally.requests >= TALLY_EVERY {
            self.flush_tally();
        }
    }

    fn flush_tally(&mut self) {
        let t = std::mem::take(&mut self.tally);
        let m = &self.sh.metrics;
        if t.requests > 0 {
            m.requests_all.inc_by(t.requests);
        }
        for (method, status, n) in t.by_label {
            m.requests
                .get_or_create(&RequestLabels { method, status })
                .inc_by(n);
        }
        for (n, c) in [
            (t.bytes_in, &m.bytes_in),
            (t.bytes_out, &m.bytes_out),
            (t.files_stored, &m.files_stored),
        ] {
            if n > 0 {
                c.inc_by(n);
            }
        }
    }

    pub(super) fn add_in(&mut self, n: u64) {
        self.conn_in += n;
        self.tally.bytes_in += n;
    }

    /// `n` bytes of answers sent (threads: the socket took them).
    pub(super) fn add_out(&mut self, n: u64) {
        self.conn_out += n;
        self.tally.bytes_out += n;
    }

    /// `n` bytes of answers queued for an event loop to send: the
    /// request's size in the access log; counted as sent ([`Self::add_sent`])
    /// only once the kernel took them, so a client that never reads does
    /// not inflate `bytes_out`.
    pub(super) fn add_queued(&mut self, n: u64) {
        self.conn_out += n;
    }

    /// An event loop's send completed: `n` bytes went to the kernel.
    pub(super) fn add_sent(&mut self, n: u64) {
        self.tally.bytes_out += n;
    }

    pub(super) fn stored_file(&mut self) {
        self.tally.files_stored += 1;
    }
}

/// Spares held by all connections of a server at most.
pub const MAX_SPARES: usize = 256;
/// No spare is made while fewer inodes than this are free.
pub const SPARE_MIN_FREE_INODES: u64 = 2 * MAX_SPARES as u64;

/// An unnamed file made ahead, counted in the server's spares while held;
/// dropped unused, the file is freed.
pub(super) struct Spare<'a> {
    tmp: Option<TmpFile<'a>>,
    held: &'a AtomicUsize,
}

impl<'a> Spare<'a> {
    /// A spare, unless the server is read-only, `MAX_SPARES` are held,
    /// inodes are scarce, or the Volume cannot make the file now (then the
    /// next PUT makes it and answers the error).
    pub(super) fn make(sh: &'a Shared) -> Option<Spare<'a>> {
        if sh.read_only() || sh.vol.statfs().files_free < SPARE_MIN_FREE_INODES {
            return None;
        }
        // Count first, so concurrent connections cannot overshoot the cap.
        if sh.spares.fetch_add(1, Ordering::AcqRel) >= MAX_SPARES {
            sh.spares.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let held = &sh.spares;
        match sh.vol.tmpfile(0o644, sh.uid, sh.gid) {
            Ok(t) => Some(Spare { tmp: Some(t), held }),
            Err(e) => {
                held.fetch_sub(1, Ordering::AcqRel);
                tracing::debug!("making an unnamed file ahead of the next upload: {e}");
                None
            }
        }
    }

    /// The file, for an upload (no longer counted as a spare).
    pub(super) fn take(mut self) -> TmpFile<'a> {
        self.tmp.take().expect("a spare holds its file until taken")
    }
}

impl Drop for Spare<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What becomes of a request once its protocol acted on its head.
#[derive(Debug)]
pub(super) enum Next<'a, B> {
    /// Answered: go on with the next request (true) or close.
    Done(bool),
    /// Answered ahead of its body: read and drop the body, then go on.
    Skip(Framing),
    /// Receive the body into an unnamed file, then
    /// [`Protocol::body_done`].
    Receive(Receive<'a, B>),
}

impl<B> Next<'_, B> {
    /// A request answered from its head with `keep`: a body it still has
    /// coming is read and dropped before the next request (a refusal goes
    /// ahead of a small body the client sends anyway; a large one, or one
    /// that waits for `100 Continue`, closed the connection: `keep` false).
    pub(super) fn answered(h: &Head, keep: bool) -> Self {
        match h.framing() {
            Some(f) if keep && h.has_body() => Next::Skip(f),
            _ => Next::Done(keep),
        }
    }
}

/// A body to receive into an unnamed file.
#[derive(Debug)]
pub(super) struct Receive<'a, B> {
    pub file: TmpFile<'a>,
    pub framing: Framing,
    /// What the protocol checks of the body as it passes and needs once
    /// it is in (S3: its digests and signatures, what the body is for).
    pub body: B,
}

/// A body received: its file, the pieces still to commit (with the link,
/// so a small upload is one commit), its data bytes and records.
#[derive(Debug)]
pub(super) struct Received<'a> {
    pub file: TmpFile<'a>,
    pub tail: Vec<RxPiece<'a>>,
    pub bytes: u64,
    pub records: u64,
}

/// A protocol over the connection core (module docs).
pub(super) trait Protocol<'a> {
    /// What travels with a body being received ([`Receive::body`]).
    type Body: Hooks;
    /// A complete head as httparse read it (S3 keeps the fields SigV4
    /// signs); called before [`Protocol::request`].
    #[inline]
    fn head_fields(&mut self, _req: &httparse::Request<'_, '_>) {}
    /// Whether the core may read a body this request does not store
    /// before acting on it (GET, HEAD, DELETE, OPTIONS with a body: a
    /// request takes effect only once it is whole); false answers the
    /// request from its head (a token refused).
    fn admits(&self, c: &Conn<'a>, h: &Head) -> bool;
    /// Act on a request whose head is in.
    fn request(&mut self, c: &mut Conn<'a>, h: &Head) -> Next<'a, Self::Body>;
    /// The body of `h` is in: name it, keep it or act on it, and answer.
    /// Whether the connection goes on.
    fn body_done(&mut self, c: &mut Conn<'a>, h: &Head, r: Received<'a>, body: Self::Body) -> bool;
    /// A body failed (the upload was given up): answer it when there is
    /// anyone to answer.
    fn body_failed(&mut self, c: &mut Conn<'a>, e: BodyError<<Self::Body as Hooks>::Error>);
}

/// Act on a parsed request: a head the core found broken is refused here
/// (the connection closes), every other goes to its protocol.
pub(super) fn serve<'a, P: Protocol<'a>>(
    c: &mut Conn<'a>,
    p: &mut P,
    h: &Head,
) -> Next<'a, P::Body> {
    if let Some((code, msg)) = h.error {
        c.error(code, msg, false);
        c.linger();
        return Next::Done(false);
    }
    p.request(c, h)
}
