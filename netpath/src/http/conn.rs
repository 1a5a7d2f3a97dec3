//! One HTTP connection over a blocking socket: read heads from the packet
//! buffer, dispatch, send answers, keep the counters, log each request.

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use pktfs_engine::TxMsg;
use pktfs_fs::{RxPiece, TmpFile, TxHold, Volume};
use rustix::net::SendFlags;

use super::head::{parse_head, Framing, Head, Method};
use super::response::{begin, error_body, http_date};
use super::spare::Spare;
use crate::loops::TurnClock;
use crate::metrics::RequestLabels;
use crate::path::ReqPath;
use crate::receive::stream::{RxStream, IDLE_RESERVATION};
use crate::shared::Shared;

/// Bodies up to this size are read and dropped after an early refusal, so
/// the connection can be kept.
pub(super) const SMALL_BODY: u64 = 64 << 10;

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
}

/// Where answers go when the connection is an event loop's session
/// ([`super::on_loop`]): queued as messages the loop sends, and what the
/// session must do with the request's body noted instead of done here.
#[derive(Debug, Default)]
pub(super) struct Outbox<'a> {
    pub msgs: VecDeque<TxMsg<'a>>,
    /// Close gracefully once what is queued is out (the linger).
    pub finish: bool,
    /// The request's body is to be read and dropped.
    pub skip_body: Option<Framing>,
    /// The request's body is an upload into this unnamed file.
    pub upload: Option<(TmpFile<'a>, Framing)>,
    /// An S3 upload's body state (digests, aws-chunked signatures), with
    /// `upload`.
    pub s3_body: Option<Box<super::s3::S3Body>>,
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

/// DRAM a queued message holds: its head bytes, and for a held file range
/// its own bookkeeping and any tiered bytes fetched for it (the file's
/// local bytes are in the image, not in DRAM, and are not counted).
pub(super) fn msg_dram(head: usize, hold: Option<&TxHold<'_>>) -> usize {
    head + hold.map_or(0, |h| h.dram_bytes())
}

/// One HTTP connection: the protocol's per-connection state and the
/// request handlers, over a blocking socket (`sock`, `rx`) or for an event
/// loop's session (`outbox`).
pub(super) struct Conn<'a> {
    pub sh: &'a Shared,
    pub vol: &'a Volume,
    /// The blocking socket (None on an event loop).
    pub sock: Option<&'a TcpStream>,
    pub outbox: Option<Outbox<'a>>,
    pub peer: SocketAddr,
    pub rx: RxStream<'a>,
    pub path: ReqPath,
    pub out: Vec<u8>,
    pub pieces: Vec<RxPiece<'a>>,
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
    /// Loop sessions: input stream position of the next byte no request
    /// has consumed yet (the threaded path asks its `RxStream`).
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
    /// Threads: the body being read keeps to `Config::min_recv_rate`
    /// ([`super::pace`]).
    pub pace: super::pace::RecvPace,
    /// This connection speaks S3 ([`super::s3`]).
    pub s3: bool,
    /// The S3 GET being answered asked for its checksum
    /// (`x-amz-checksum-mode: ENABLED`).
    pub s3_checksum_mode: bool,
    /// The S3 listener's state, on its connections.
    pub s3_state: Option<std::sync::Arc<super::s3::S3State>>,
}

enum HeadResult {
    Req(Head),
    /// Nothing more on this connection (EOF, idle timeout, reset).
    Done,
    /// Answer this and close.
    Fail(u16, &'static str),
}

pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, peer: SocketAddr) {
    if let Err(e) = sock.set_nodelay(true) {
        tracing::debug!("HTTP connection from {peer}: TCP_NODELAY: {e}");
    }
    if let Err(e) = sock.set_write_timeout(Some(sh.cfg.io_timeout)) {
        tracing::warn!("HTTP connection from {peer}: cannot set the send timeout: {e}; closing");
        return;
    }
    let vol = &*sh.vol;
    let rx = RxStream::new(vol, &sock, sh.cfg.rx_chunk);
    let mut c = Conn::new(sh, Some(&sock), peer, rx);
    c.run();
}

impl<'a> Conn<'a> {
    pub(super) fn new(
        sh: &'a Shared,
        sock: Option<&'a TcpStream>,
        peer: SocketAddr,
        rx: RxStream<'a>,
    ) -> Conn<'a> {
        Conn {
            sh,
            vol: &sh.vol,
            sock,
            outbox: None,
            peer,
            rx,
            path: ReqPath::new(),
            out: Vec::with_capacity(512),
            pieces: Vec::new(),
            scratch_name: Vec::new(),
            scratch_head: String::new(),
            date: (0, String::new()),
            spare: None,
            spare_wanted: false,
            replaced: None,
            turn: None,
            pace: Default::default(),
            s3: false,
            s3_checksum_mode: false,
            s3_state: None,
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
            in_before: self.consumed(),
            out_before: self.conn_out,
            json: false,
        };
    }

    fn run(&mut self) {
        loop {
            if self.sh.stop.load(Ordering::Relaxed) {
                return;
            }
            self.rx.at_rest();
            let (i, o) = (self.consumed(), self.conn_out);
            let h = self.next_head();
            self.begin_request();
            (self.req.in_before, self.req.out_before) = (i, o);
            let h = match h {
                HeadResult::Req(h) => h,
                HeadResult::Done => return,
                HeadResult::Fail(code, msg) => {
                    self.error(code, msg, false);
                    self.linger();
                    self.end_request();
                    return;
                }
            };
            self.req.method = h.method.as_str();
            self.req.json = h.accept_json;
            let was_put = matches!(h.method, Method::Put | Method::Post);
            let keep = self.handle(&h);
            self.end_request();
            if !keep || self.send_failed {
                return;
            }
            if was_put && self.spare.is_none() {
                self.spare = Spare::make(self.sh);
            }
        }
    }

    /// Input stream position up to which requests consumed the bytes (a
    /// request's head and the part of its body read): what a request's
    /// `bytes_in` is measured by, unlike what was received while serving
    /// it, which includes read-ahead of the next request and misses bytes
    /// received with the previous one.
    fn consumed(&self) -> u64 {
        if self.sock.is_some() {
            self.rx.seq()
        } else {
            self.in_pos
        }
    }

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
            bytes_in = self.consumed().saturating_sub(r.in_before),
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

    /// Receive and parse the next request head (in the packet buffer).
    fn next_head(&mut self) -> HeadResult {
        let cfg = &self.sh.cfg;
        let mut started: Option<Instant> = None;
        loop {
            let w = self.rx.window();
            if !w.is_empty() {
                match parse_head(w, &mut self.path, cfg, false) {
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
                            self.peer
                        );
                    }
                    return HeadResult::Done;
                }
                Ok(n) => self.add_in(n as u64),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    if started.is_some() {
                        return HeadResult::Fail(408, "request head too slow");
                    }
                    tracing::debug!(
                        "HTTP connection from {}: idle for {:?}; closing",
                        self.peer,
                        cfg.idle_timeout
                    );
                    return HeadResult::Done;
                }
                Err(e) => {
                    tracing::info!(
                        "HTTP connection from {}: receiving a request head: {e}",
                        self.peer
                    );
                    return HeadResult::Done;
                }
            }
        }
    }

    /// Handle one request; false = close the connection.
    pub(super) fn handle(&mut self, h: &Head) -> bool {
        if self.s3 {
            return self.s3_handle(h);
        }
        if let Some((code, msg)) = h.error {
            self.error(code, msg, false);
            self.linger();
            return false;
        }
        // From the head, before any body is read or any name looked up.
        if let Some(keep) = self.check_auth(h) {
            return keep;
        }
        if h.read_body_first() && self.outbox.is_none() {
            // (An event loop's session reads it before calling this.)
            return self.send_continue(h)
                && self.discard_body(h)
                && self.handle(&h.clone().without_body());
        }
        if h.metrics {
            return self.metrics(h);
        }
        if let Some(msg) = h.path_error {
            return self.refuse(h, 400, msg);
        }
        match h.method {
            Method::Get | Method::Head => self.get(h),
            Method::Put | Method::Post => self.put(h),
            Method::Delete => self.delete(h),
            Method::Options => {
                if h.has_body() && !self.discard_body(h) {
                    return false;
                }
                self.head_only(
                    204,
                    h.keep_alive,
                    "Allow: GET, HEAD, PUT, POST, DELETE, OPTIONS\r\n",
                );
                h.keep_alive
            }
            Method::Other => self.refuse(h, 501, "method not implemented"),
        }
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

    /// Answer an error before reading the request's body. A small body
    /// the client is sending anyway is read and dropped, so the connection
    /// can be kept; otherwise (a large body, or one the client is waiting
    /// for a 100 Continue to send) the connection is closed.
    pub(super) fn refuse(&mut self, h: &Head, code: u16, msg: &str) -> bool {
        let mut keep = h.keep_alive;
        if h.has_body() {
            let small = h.content_length.is_some_and(|n| n <= SMALL_BODY);
            keep = keep && small && !h.expect_continue;
        }
        // Answered before the body is read (a refusal changes nothing, and
        // the client may stop sending), as an event loop's session does.
        self.error(code, msg, keep);
        if !keep {
            self.linger();
            return false;
        }
        // A body that then fails closes the connection.
        self.discard_body(h)
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
        begin(&mut self.out, code, len, keep, &self.date.1, extra);
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
            let spare = ob.bufs.pop().unwrap_or_default();
            let head = std::mem::replace(&mut self.out, spare);
            let n = head.len() as u64 + hold.as_ref().map_or(0, |h| held_len(h));
            ob.queued_bytes += msg_dram(head.len(), hold.as_ref());
            match ob.msgs.back_mut() {
                // Bytes after bytes: one message.
                Some(last) if last.hold.is_none() && hold.is_none() => {
                    last.head.extend_from_slice(&head);
                    ob.bufs.push(head);
                }
                _ => ob.msgs.push_back(TxMsg { head, hold }),
            }
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
        if self.s3 {
            // Every refusal on the S3 listener is S3's Error XML.
            let e = pktfs_s3::error::S3Error::new(super::s3::code_of_status(code), msg);
            return self.s3_error(&e, keep);
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
}

/// Bytes a hold sends.
fn held_len(h: &TxHold<'_>) -> u64 {
    h.segs().iter().map(pktfs_fs::TxSeg::len).sum()
}
