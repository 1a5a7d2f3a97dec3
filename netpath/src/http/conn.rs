//! The connection core: one HTTP connection's state, whatever protocol
//! (`plain`, `s3`) speaks on it and whichever driver (`session` on an
//! event loop, `blocking` on a thread) feeds it. It sends the answers the
//! protocols build (over the blocking socket, or queued in the [`Outbox`]
//! for the loop to send), counts the requests and writes the access log.
//! It calls into no protocol: one that words its refusals its own way
//! lends an [`ErrorForm`].

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use pktfs_fs::{FsError, TmpFile, TxHold, Volume};
use rustix::net::SendFlags;

use super::head::Head;
use super::response::{begin, error_body, http_date, status_of};
use super::spare::Spare;
use crate::loops::TurnClock;
use crate::path::ReqPath;
use crate::receive::body::{BodyError, Pieces, SpaceGuard};
use crate::shared::Shared;

mod outbox;
mod tally;
pub(super) mod tiered;

pub(super) use outbox::Outbox;
use tally::Tally;

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
    form: Option<&'a dyn ErrorForm>,
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
