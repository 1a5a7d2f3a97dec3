//! HTTP/1.1: PUT/POST store, GET/HEAD send (with Range), DELETE removes.
//!
//! Keep-alive and pipelining: requests on a connection are handled in
//! order; bytes after a request (the next pipelined request) stay in the
//! packet buffer for the next parse. Request heads are parsed by `httparse`
//! straight from the packet buffer they landed in, and skipped.
//!
//! # Storing
//! `PUT`/`POST /path` receives the body into an unnamed file
//! ([`Volume::tmpfile`], freed when dropped unnamed): body bytes become pieces where they landed
//! (after the head, between chunk framing) and are committed in batches of
//! at most one reservation; the last batch is committed together with the
//! file's name ([`Volume::rx_link`], one commit, replacing an existing file
//! atomically), so a small upload costs one commit. Only then is `201 Created` (or `204` for a
//! replacement) sent. An upload that does not complete (client gone,
//! timeout, bad framing, no space) is freed and never visible; after a
//! crash an unnamed file is gone by construction. Missing parent
//! directories are created at that point, after the body is stored.
//!
//! # Status codes
//! 400 malformed request or unsafe path; 401 missing/wrong bearer token on
//! a change; 404 no such file; 405 change on a read-only server, or PUT on
//! `/`; 408 head or body too slow; 409 PUT onto a directory, through a
//! non-directory, or DELETE of a non-empty directory; 411 PUT without a
//! length; 413 file too large; 416 unsatisfiable range; 417 unknown
//! expectation; 431 head too large; 501 unknown method or transfer coding;
//! 503 over the connection cap; 507 body larger than the free space (and
//! nothing is left behind).

use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pktfs::{FileType, FsError, RxPiece, Volume};
use rustix::net::SendFlags;

use crate::config::Change;
use crate::path::{encode_segment, ReqPath};
use crate::rxstream::{RxJob, RxStream, IDLE_RESERVATION};
use crate::server::Shared;
use crate::tx::send_held;
use crate::util::http_date;

/// Coalesce body bytes into pieces of at least this size (unless the body
/// or the reservation ends first), so a trickle of small segments does not
/// become a record per segment.
const MIN_PIECE: u32 = 16 << 10;
const MAX_HEADERS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Get,
    Head,
    Put,
    Post,
    Delete,
    Options,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RangeSpec {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

/// What a request head says, owned (the head's bytes stay in the buffer).
#[derive(Debug)]
struct Head {
    method: Method,
    http11: bool,
    content_length: Option<u64>,
    chunked: bool,
    expect_continue: bool,
    keep_alive: bool,
    /// None: no Authorization header; Some(ok).
    auth: Option<bool>,
    range: Option<RangeSpec>,
    /// A problem found in the head: (status, message).
    error: Option<(u16, &'static str)>,
    path_error: Option<&'static str>,
}

impl Head {
    fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }
}

#[derive(Debug)]
enum Framing {
    Length(u64),
    Chunked,
}

/// Bodies up to this size are not checked against the target's type
/// before they are received (a PUT onto a directory is refused after).
const SMALL_BODY: u64 = 64 << 10;

/// Where body bytes go.
enum Sink<'s, 'v> {
    /// Skipped (a body nobody stores).
    Discard,
    /// Pieces made and committed on the connection's thread.
    Inline { ino: u64, records: u64 },
    /// Handed to a persister thread.
    Persister {
        tx: std::sync::mpsc::SyncSender<Work<'v>>,
        failed: &'s AtomicBool,
    },
}

/// What the persister thread is given, in stream order.
enum Work<'v> {
    Job(RxJob<'v>),
    Piece(RxPiece<'v>),
}

/// The persister: make each piece, commit in batches of `batch` bytes.
/// Returns the records committed. After a failure it only drains (and
/// frees) what it is sent; `failed` tells the receiver to stop early.
fn persister<'v>(
    vol: &'v Volume,
    ino: u64,
    rx: std::sync::mpsc::Receiver<Work<'v>>,
    batch: u64,
    failed: &AtomicBool,
) -> Result<u64, FsError> {
    let mut pieces: Vec<RxPiece<'v>> = Vec::new();
    let mut bytes = 0u64;
    let mut records = 0u64;
    let mut err = None;
    for w in rx {
        if err.is_some() {
            drop(w); // its reference goes back
            continue;
        }
        let p = match w {
            Work::Job(j) => j.piece(),
            Work::Piece(p) => p,
        };
        bytes += p.len() as u64;
        pieces.push(p);
        if bytes >= batch {
            let n = pieces.len() as u64;
            match vol.rx_commit(ino, std::mem::take(&mut pieces)) {
                Ok(_) => records += n,
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    err = Some(e);
                }
            }
            bytes = 0;
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let n = pieces.len() as u64;
    if n > 0 {
        vol.rx_commit(ino, pieces)?;
    }
    Ok(records + n)
}

/// Why a body could not be read or stored.
#[derive(Debug)]
enum BodyError {
    /// The client went away (EOF, reset): nothing to answer.
    Gone,
    Timeout,
    Bad(&'static str),
    Fs(FsError),
}

fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

/// HTTP status for a Volume error.
fn status_of(e: &FsError) -> u16 {
    match e {
        FsError::NotFound => 404,
        FsError::Exists | FsError::IsDir | FsError::NotEmpty | FsError::NotDir => 409,
        FsError::NameTooLong | FsError::Invalid(_) => 400,
        FsError::NoSpace(_) => 507,
        FsError::TooBig => 413,
        FsError::ReadOnly | FsError::NotPermitted(_) => 405,
        _ => 500,
    }
}

fn parse_range(v: &[u8]) -> Option<RangeSpec> {
    let v = std::str::from_utf8(v).ok()?.trim();
    let (unit, set) = v.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None; // other units, or several ranges: ignored (RFC 9110 14.2)
    }
    let (a, b) = set.trim().split_once('-')?;
    let num = |s: &str| {
        if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse::<u64>().ok()
        } else {
            None
        }
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        return num(b).map(RangeSpec::Suffix);
    }
    let first = num(a)?;
    if b.is_empty() {
        return Some(RangeSpec::FromTo(first, None));
    }
    let last = num(b)?;
    (last >= first).then_some(RangeSpec::FromTo(first, Some(last)))
}

/// Resolve a range against a size: Ok(None) = the whole file,
/// Ok(Some((start, end))) = partial, Err(()) = unsatisfiable.
fn resolve_range(r: Option<RangeSpec>, size: u64) -> Result<Option<(u64, u64)>, ()> {
    match r {
        None => Ok(None),
        Some(RangeSpec::FromTo(a, b)) => {
            if a >= size {
                return Err(());
            }
            Ok(Some((
                a,
                b.map(|b| b.saturating_add(1).min(size)).unwrap_or(size),
            )))
        }
        Some(RangeSpec::Suffix(n)) => {
            if n == 0 || size == 0 {
                return Err(());
            }
            Ok(Some((size.saturating_sub(n), size)))
        }
    }
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&c| c == b',').map(|t| t.trim_ascii())
}

/// Read what matters from a parsed head.
fn read_head(req: &httparse::Request<'_, '_>, path: &mut ReqPath, cfg: &crate::Config) -> Head {
    let mut h = Head {
        method: match req.method.unwrap_or("") {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "PUT" => Method::Put,
            "POST" => Method::Post,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        },
        http11: req.version == Some(1),
        content_length: None,
        chunked: false,
        expect_continue: false,
        keep_alive: true,
        auth: None,
        range: None,
        error: None,
        path_error: None,
    };
    let mut close = false;
    let mut ka = false;
    let mut host = false;
    let mut te = false;
    let fail = |h: &mut Head, code: u16, msg: &'static str| {
        if h.error.is_none() {
            h.error = Some((code, msg));
        }
    };
    for hd in req.headers.iter() {
        let n = hd.name;
        let v = hd.value;
        if n.eq_ignore_ascii_case("content-length") {
            let t = v.trim_ascii();
            let parsed = if !t.is_empty() && t.len() <= 19 && t.iter().all(|c| c.is_ascii_digit()) {
                std::str::from_utf8(t)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            } else {
                None
            };
            match (parsed, h.content_length) {
                (None, _) => fail(&mut h, 400, "bad Content-Length"),
                (Some(x), Some(y)) if x != y => {
                    fail(&mut h, 400, "conflicting Content-Length headers")
                }
                (Some(x), _) => h.content_length = Some(x),
            }
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            if te {
                fail(&mut h, 400, "repeated Transfer-Encoding");
            }
            te = true;
            if v.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                h.chunked = true;
            } else {
                fail(&mut h, 501, "only the chunked transfer coding is supported");
            }
        } else if n.eq_ignore_ascii_case("connection") {
            for t in tokens(v) {
                close |= t.eq_ignore_ascii_case(b"close");
                ka |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if n.eq_ignore_ascii_case("expect") {
            if v.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
                h.expect_continue = true;
            } else {
                fail(&mut h, 417, "unknown expectation");
            }
        } else if n.eq_ignore_ascii_case("authorization") {
            let v = v.trim_ascii();
            let ok = v.len() > 7
                && v[..7].eq_ignore_ascii_case(b"bearer ")
                && cfg
                    .token
                    .as_ref()
                    .is_some_and(|t| t.matches(v[7..].trim_ascii()));
            h.auth = Some(ok);
        } else if n.eq_ignore_ascii_case("range") {
            h.range = parse_range(v);
        } else if n.eq_ignore_ascii_case("host") {
            host = true;
        }
    }
    if te && h.content_length.is_some() {
        fail(&mut h, 400, "both Content-Length and Transfer-Encoding");
    }
    if h.http11 && !host {
        fail(&mut h, 400, "HTTP/1.1 request without Host");
    }
    h.keep_alive = if h.http11 { !close } else { ka && !close };
    if let Err(e) = path.parse(req.path.unwrap_or("")) {
        h.path_error = Some(e);
    }
    h
}

/// One HTTP connection.
struct Conn<'a> {
    sh: &'a Shared,
    vol: &'a Volume,
    sock: &'a TcpStream,
    rx: RxStream<'a>,
    path: ReqPath,
    out: Vec<u8>,
    pieces: Vec<RxPiece<'a>>,
    date: (i64, String),
    /// An unnamed file made ahead of the next PUT (after a PUT's answer is
    /// sent, off the latency path); freed when the connection ends.
    spare: Option<pktfs::TmpFile<'a>>,
    /// This connection's counts not yet added to the server's shared
    /// counters: added every `TALLY_EVERY` requests and at the end, not
    /// per request (shared atomics moved a cache line between the cores
    /// serving different connections on every request).
    tally: Tally,
}

#[derive(Debug, Default)]
struct Tally {
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
    files_stored: u64,
}

/// Requests between additions of a connection's tally to the shared
/// counters ([`crate::Services::stats`] lags a busy connection by at most
/// this many).
const TALLY_EVERY: u64 = 32;

impl Conn<'_> {
    fn flush_tally(&mut self) {
        let t = std::mem::take(&mut self.tally);
        let c = &self.sh.counters;
        for (n, a) in [
            (t.requests, &c.requests),
            (t.bytes_in, &c.bytes_in),
            (t.bytes_out, &c.bytes_out),
            (t.files_stored, &c.files_stored),
        ] {
            if n > 0 {
                a.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        // `spare` (an unnamed file made ahead) frees itself when dropped.
        self.flush_tally();
    }
}

pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, _peer: SocketAddr) {
    let _ = sock.set_nodelay(true);
    let _ = sock.set_write_timeout(Some(sh.cfg.io_timeout));
    let vol = &*sh.vol;
    let mut c = Conn {
        sh,
        vol,
        sock: &sock,
        rx: RxStream::new(vol, &sock, sh.cfg.rx_chunk),
        path: ReqPath::new(),
        out: Vec::with_capacity(512),
        pieces: Vec::new(),
        date: (0, String::new()),
        spare: None,
        tally: Tally::default(),
    };
    c.run();
}

enum HeadResult {
    Req(Head),
    /// Nothing more on this connection (EOF, idle timeout, reset).
    Done,
    /// Answer this and close.
    Fail(u16, &'static str),
}

impl<'a> Conn<'a> {
    fn run(&mut self) {
        loop {
            if self.sh.stop.load(Ordering::Relaxed) {
                return;
            }
            self.rx.at_rest();
            let h = match self.next_head() {
                HeadResult::Req(h) => h,
                HeadResult::Done => return,
                HeadResult::Fail(code, msg) => {
                    self.error(code, msg, false);
                    self.linger();
                    return;
                }
            };
            self.tally.requests += 1;
            if self.tally.requests >= TALLY_EVERY {
                self.flush_tally();
            }
            let was_put = matches!(h.method, Method::Put | Method::Post);
            if !self.handle(h) {
                return;
            }
            if was_put && self.spare.is_none() && !self.sh.read_only() {
                self.spare = self.vol.tmpfile(0o644, self.sh.uid, self.sh.gid).ok();
            }
        }
    }

    /// Receive and parse the next request head (in the packet buffer).
    fn next_head(&mut self) -> HeadResult {
        let cfg = &self.sh.cfg;
        let mut started: Option<Instant> = None;
        loop {
            let w = self.rx.window();
            if !w.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(w) {
                    Ok(httparse::Status::Complete(n)) => {
                        if n > cfg.max_header_bytes {
                            return HeadResult::Fail(431, "request head too large");
                        }
                        let h = read_head(&req, &mut self.path, cfg);
                        self.rx.consume(n as u32);
                        return HeadResult::Req(h);
                    }
                    Ok(httparse::Status::Partial) => {
                        // The head's clock starts at its first bytes (a
                        // head that arrives whole needs no clock).
                        started.get_or_insert_with(Instant::now);
                        if w.len() >= cfg.max_header_bytes {
                            return HeadResult::Fail(431, "request head too large");
                        }
                    }
                    Err(httparse::Error::TooManyHeaders) => {
                        return HeadResult::Fail(431, "too many header fields")
                    }
                    Err(_) => return HeadResult::Fail(400, "malformed request"),
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
                Ok(0) => return HeadResult::Done,
                Ok(n) => {
                    self.tally.bytes_in += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut && started.is_some() => {
                    return HeadResult::Fail(408, "request head too slow")
                }
                Err(_) => return HeadResult::Done,
            }
        }
    }

    /// Handle one request; false = close the connection.
    fn handle(&mut self, h: Head) -> bool {
        if let Some((code, msg)) = h.error {
            self.error(code, msg, false);
            self.linger();
            return false;
        }
        if let Some(msg) = h.path_error {
            return self.refuse(&h, 400, msg);
        }
        match h.method {
            Method::Get | Method::Head => self.get(&h),
            Method::Put | Method::Post => self.put(&h),
            Method::Delete => self.delete(&h),
            Method::Options => {
                if h.has_body() && !self.discard_body(&h) {
                    return false;
                }
                self.head_only(
                    204,
                    h.keep_alive,
                    "Allow: GET, HEAD, PUT, POST, DELETE, OPTIONS\r\n",
                );
                h.keep_alive
            }
            Method::Other => self.refuse(&h, 501, "method not implemented"),
        }
    }

    /// Answer an error before reading the request's body. A small body
    /// the client is sending anyway is read and dropped, so the connection
    /// can be kept; otherwise (a large body, or one the client is waiting
    /// for a 100 Continue to send) the connection is closed.
    fn refuse(&mut self, h: &Head, code: u16, msg: &str) -> bool {
        let mut keep = h.keep_alive;
        if h.has_body() {
            let small = h.content_length.is_some_and(|n| n <= SMALL_BODY);
            keep = keep && small && !h.expect_continue;
            if keep && !self.discard_body(h) {
                return false; // the body failed; that was answered
            }
        }
        self.error(code, msg, keep);
        if !keep {
            self.linger();
        }
        keep
    }

    // ----- responses -----

    fn date(&mut self) -> &str {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        if self.date.0 != now {
            self.date = (now, http_date(now));
        }
        &self.date.1
    }

    /// Start a response head in `self.out` (ends with the extra headers; the
    /// caller adds nothing but the blank line via `end_head`).
    fn begin(&mut self, code: u16, len: u64, keep: bool, extra: &str) {
        self.date();
        // Appended piece by piece (no `fmt` machinery): this is on every
        // answer's path, before the send.
        let mut num = itoa::Buffer::new();
        let o = &mut self.out;
        o.clear();
        o.extend_from_slice(b"HTTP/1.1 ");
        o.extend_from_slice(num.format(code).as_bytes());
        o.push(b' ');
        o.extend_from_slice(reason(code).as_bytes());
        o.extend_from_slice(b"\r\nServer: pktfs\r\nDate: ");
        o.extend_from_slice(self.date.1.as_bytes());
        o.extend_from_slice(b"\r\nContent-Length: ");
        o.extend_from_slice(num.format(len).as_bytes());
        o.extend_from_slice(b"\r\n");
        if !keep {
            o.extend_from_slice(b"Connection: close\r\n");
        }
        o.extend_from_slice(extra.as_bytes());
        o.extend_from_slice(b"\r\n");
    }

    fn send_out(&mut self, more: bool) -> bool {
        let flags = if more {
            SendFlags::NOSIGNAL | SendFlags::MORE
        } else {
            SendFlags::NOSIGNAL
        };
        let mut at = 0;
        while at < self.out.len() {
            match rustix::net::send(self.sock, &self.out[at..], flags) {
                Ok(n) => at += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return false,
            }
        }
        self.tally.bytes_out += at as u64;
        true
    }

    fn head_only(&mut self, code: u16, keep: bool, extra: &str) -> bool {
        self.begin(code, 0, keep, extra);
        self.send_out(false)
    }

    fn with_body(
        &mut self,
        code: u16,
        keep: bool,
        extra: &str,
        body: &[u8],
        send_body: bool,
    ) -> bool {
        self.begin(code, body.len() as u64, keep, extra);
        if send_body {
            self.out.extend_from_slice(body);
        }
        self.send_out(false)
    }

    fn error(&mut self, code: u16, msg: &str, keep: bool) {
        let body = format!("{code} {}: {msg}\n", reason(code));
        let extra = match code {
            401 => "WWW-Authenticate: Bearer realm=\"pktfs\"\r\nContent-Type: text/plain; charset=utf-8\r\n",
            405 => "Allow: GET, HEAD, OPTIONS\r\nContent-Type: text/plain; charset=utf-8\r\n",
            _ => "Content-Type: text/plain; charset=utf-8\r\n",
        };
        self.with_body(code, keep, extra, body.as_bytes(), true);
    }

    /// Close gracefully after an early answer: stop sending, then read and
    /// drop what the client is still sending for a short while, so the
    /// close does not reset the connection before the answer is read.
    fn linger(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Write);
        let _ = self.sock.set_read_timeout(Some(Duration::from_millis(500)));
        let start = Instant::now();
        let mut buf = [0u8; 16 << 10];
        let mut total = 0usize;
        while start.elapsed() < Duration::from_secs(2) && total < (64 << 20) {
            match std::io::Read::read(&mut &*self.sock, &mut buf) {
                Ok(n) if n > 0 => total += n,
                _ => break,
            }
        }
    }

    // ----- bodies -----

    /// Receive a body into `sink`. Returns the body's byte count.
    fn read_body(&mut self, framing: Framing, sink: &mut Sink<'_, 'a>) -> Result<u64, BodyError> {
        let mut total = 0u64;
        let r = match framing {
            Framing::Length(n) => self.body_bytes(n, sink, &mut total),
            Framing::Chunked => self.chunked_body(sink, &mut total),
        };
        // An inline body's last pieces stay in `self.pieces`: they are
        // committed together with the file's name (`Volume::rx_link`), so
        // a small upload is one journalled commit, not two.
        if r.is_err() {
            self.vol.rx_abort(std::mem::take(&mut self.pieces));
        }
        r.map(|_| total)
    }

    fn chunked_body(&mut self, sink: &mut Sink<'_, 'a>, total: &mut u64) -> Result<(), BodyError> {
        loop {
            let size = self.chunk_line()?;
            if size == 0 {
                return self.trailers();
            }
            self.body_bytes(size, sink, total)?;
            self.expect_crlf()?;
        }
    }

    fn more(&mut self, want: u64) -> Result<(), BodyError> {
        let want = want.clamp(1, u32::MAX as u64) as u32;
        match self.rx.fill(want, self.sh.cfg.io_timeout) {
            Ok(0) => Err(BodyError::Gone),
            Ok(n) => {
                self.tally.bytes_in += n as u64;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(BodyError::Timeout),
            Err(_) => Err(BodyError::Gone),
        }
    }

    fn commit(&mut self, ino: u64, records: &mut u64) -> Result<(), BodyError> {
        if self.pieces.is_empty() {
            return Ok(());
        }
        let n = self.pieces.len() as u64;
        self.vol
            .rx_commit(ino, std::mem::take(&mut self.pieces))
            .map_err(BodyError::Fs)?;
        *records += n;
        Ok(())
    }

    /// `left` body bytes: taken as pieces where they landed, or skipped.
    fn body_bytes(
        &mut self,
        mut left: u64,
        sink: &mut Sink<'_, 'a>,
        total: &mut u64,
    ) -> Result<(), BodyError> {
        let mut batch: u64 = self.pieces.iter().map(|p| p.len() as u64).sum();
        while left > 0 {
            let avail = self.rx.available() as u64;
            let after = left.saturating_sub(avail).min(u32::MAX as u64) as u32;
            let take_now = avail >= left
                || (avail > 0 && (avail >= MIN_PIECE as u64 || self.rx.will_move(after)));
            if !take_now {
                self.more(left - avail)?;
                continue;
            }
            let k = avail.min(left) as u32;
            match sink {
                Sink::Discard => self.rx.consume(k),
                Sink::Inline { ino, records } => {
                    self.rx
                        .take_into(k, &mut self.pieces)
                        .map_err(BodyError::Fs)?;
                    batch += k as u64;
                    if batch >= self.sh.cfg.rx_chunk as u64 {
                        let ino = *ino;
                        self.commit(ino, records)?;
                        batch = 0;
                    }
                }
                Sink::Persister { tx, failed } => {
                    if failed.load(Ordering::Relaxed) {
                        return Err(BodyError::Fs(FsError::NoSpace(
                            "the upload could not be stored",
                        )));
                    }
                    let work = match self.rx.take_job(k) {
                        Some(j) => vec![Work::Job(j)],
                        None => {
                            // DRAM fallback: pieces made here, in order.
                            let mut ps = Vec::new();
                            let r = self.rx.take_into(k, &mut ps);
                            if let Err(e) = r {
                                self.vol.rx_abort(ps);
                                return Err(BodyError::Fs(e));
                            }
                            ps.into_iter().map(Work::Piece).collect()
                        }
                    };
                    for w in work {
                        if let Err(std::sync::mpsc::SendError(w)) = tx.send(w) {
                            drop(w); // its reference goes back
                            return Err(BodyError::Fs(FsError::NoSpace(
                                "the upload could not be stored",
                            )));
                        }
                    }
                }
            }
            left -= k as u64;
            *total += k as u64;
        }
        Ok(())
    }

    /// A chunk-size line (extensions ignored), skipped in the buffer.
    fn chunk_line(&mut self) -> Result<u64, BodyError> {
        loop {
            let w = self.rx.window();
            if !w.is_empty() {
                if !w[0].is_ascii_hexdigit() {
                    return Err(BodyError::Bad("bad chunk size"));
                }
                match httparse::parse_chunk_size(w) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.rx.consume(n as u32);
                        return Ok(size);
                    }
                    Ok(httparse::Status::Partial) => {
                        if w.len() > self.sh.cfg.max_header_bytes {
                            return Err(BodyError::Bad("chunk line too long"));
                        }
                    }
                    Err(_) => return Err(BodyError::Bad("bad chunk size")),
                }
            }
            self.more(IDLE_RESERVATION as u64)?;
        }
    }

    fn expect_crlf(&mut self) -> Result<(), BodyError> {
        while self.rx.available() < 2 {
            self.more(IDLE_RESERVATION as u64)?;
        }
        if &self.rx.window()[..2] != b"\r\n" {
            return Err(BodyError::Bad("chunk data not followed by CRLF"));
        }
        self.rx.consume(2);
        Ok(())
    }

    fn trailers(&mut self) -> Result<(), BodyError> {
        loop {
            let w = self.rx.window();
            if w.starts_with(b"\r\n") {
                self.rx.consume(2);
                return Ok(());
            }
            if !w.is_empty() && w != b"\r" {
                let mut hs = [httparse::EMPTY_HEADER; 32];
                match httparse::parse_headers(w, &mut hs) {
                    Ok(httparse::Status::Complete((n, _))) => {
                        self.rx.consume(n as u32);
                        return Ok(());
                    }
                    Ok(httparse::Status::Partial) => {
                        if w.len() > self.sh.cfg.max_header_bytes {
                            return Err(BodyError::Bad("trailer section too large"));
                        }
                    }
                    Err(_) => return Err(BodyError::Bad("malformed trailer section")),
                }
            }
            self.more(IDLE_RESERVATION as u64)?;
        }
    }

    fn framing(h: &Head) -> Option<Framing> {
        if h.chunked {
            Some(Framing::Chunked)
        } else {
            h.content_length.map(Framing::Length)
        }
    }

    /// Read and drop a body nobody stores (GET with a body, ...). False:
    /// the connection is done.
    fn discard_body(&mut self, h: &Head) -> bool {
        let Some(f) = Self::framing(h) else {
            return true;
        };
        match self.read_body(f, &mut Sink::Discard) {
            Ok(_) => true,
            Err(e) => {
                self.body_failed(e);
                false
            }
        }
    }

    fn body_failed(&mut self, e: BodyError) {
        match e {
            BodyError::Gone => {}
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
        }
    }

    // ----- methods -----

    /// Walk the path from the root (symlinks are not followed).
    fn resolve(&self, segs: usize) -> Result<pktfs::Attr, FsError> {
        let mut a = self.vol.getattr(self.vol.root())?;
        for s in self.path.segments().take(segs) {
            if a.kind != FileType::Directory {
                return Err(FsError::NotFound);
            }
            a = self.vol.lookup(a.ino, s)?;
        }
        Ok(a)
    }

    fn check_change(&mut self, h: &Head) -> Option<bool> {
        if self.sh.read_only() {
            return Some(self.refuse(h, 405, "this server is read-only"));
        }
        if self.sh.cfg.token.is_some() && h.auth != Some(true) {
            let msg = if h.auth.is_none() {
                "a bearer token is required"
            } else {
                "wrong bearer token"
            };
            return Some(self.refuse(h, 401, msg));
        }
        None
    }

    fn get(&mut self, h: &Head) -> bool {
        if h.has_body() && !self.discard_body(h) {
            return false;
        }
        let send_body = h.method == Method::Get;
        let keep = h.keep_alive;
        // Take a hold on the bytes to send, and make sure it is the version
        // the name led to before and after (attributes for the head and
        // the held bytes must agree).
        for _ in 0..8 {
            let a = match self.resolve(self.path.len()) {
                Ok(a) => a,
                Err(e) => {
                    let code = if matches!(e, FsError::NotDir) {
                        404
                    } else {
                        status_of(&e)
                    };
                    self.error(code, &format!("{}: {e}", self.path.display()), keep);
                    return keep;
                }
            };
            if a.kind == FileType::Directory {
                return self.listing(a.ino, keep, send_body);
            }
            if a.kind != FileType::Regular {
                self.error(404, "not a regular file", keep);
                return keep;
            }
            let (code, start, end) = match resolve_range(h.range, a.size) {
                Ok(None) => (200, 0, a.size),
                Ok(Some((s, e))) => (206, s, e),
                Err(()) => {
                    let extra = format!(
                        "Content-Range: bytes */{}\r\nContent-Type: text/plain; charset=utf-8\r\n",
                        a.size
                    );
                    return self.with_body(416, keep, &extra, b"416 Range Not Satisfiable\n", true)
                        && keep;
                }
            };
            let hold = if send_body && end > start {
                match self.vol.tx_hold(a.ino, start, end - start) {
                    Ok(x) => Some(x),
                    // Known before the head: say so rather than send a
                    // body that fails its checksum (the Volume logged the
                    // file and range).
                    Err(
                        e @ (FsError::Damaged { .. }
                        | FsError::DamagedInode { .. }
                        | FsError::Failed(_)),
                    ) => {
                        self.error(500, &e.to_string(), keep);
                        return keep;
                    }
                    // Anything else: the file changed under us; look again.
                    Err(_) => continue,
                }
            } else {
                None
            };
            // The name must still lead to the same file, and the hold must
            // cover the range (a file that only grew, like a raw stream
            // being received, is fine: the held bytes are what is sent).
            let after = self.resolve(self.path.len());
            let ok = after.as_ref().is_ok_and(|b| b.ino == a.ino)
                && hold.as_ref().is_none_or(|x| x.size() >= end);
            if !ok {
                drop(hold);
                continue;
            }
            // Label the version only if it did not change meanwhile.
            let stable = after.is_ok_and(|b| (b.mtime_ns, b.size) == (a.mtime_ns, a.size));
            let r = self.send_file(&a, code, start, end, hold.as_ref(), keep, stable);
            drop(hold);
            return r;
        }
        self.error(503, "the file keeps changing; try again", keep);
        keep
    }

    #[allow(clippy::too_many_arguments)]
    fn send_file(
        &mut self,
        a: &pktfs::Attr,
        code: u16,
        start: u64,
        end: u64,
        hold: Option<&pktfs::TxHold<'_>>,
        keep: bool,
        stable: bool,
    ) -> bool {
        let mut extra =
            String::from("Content-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\n");
        if stable {
            let lm = http_date(a.mtime_ns.div_euclid(1_000_000_000));
            extra.push_str(&format!(
                "ETag: \"{:x}-{:x}-{:x}\"\r\nLast-Modified: {lm}\r\n",
                a.ino, a.mtime_ns, a.size
            ));
        }
        if code == 206 {
            extra.push_str(&format!(
                "Content-Range: bytes {start}-{}/{}\r\n",
                end - 1,
                a.size
            ));
        }
        self.begin(code, end - start, keep, &extra);
        if !self.send_out(hold.is_some()) {
            return false;
        }
        if let Some(hold) = hold {
            match send_held(self.sock, hold, self.sh.cfg.io_timeout) {
                Ok(st) => {
                    self.tally.bytes_out += st.bytes;
                }
                Err(_) => {
                    // The head promised a length we cannot honour: cut the
                    // connection so the client sees the transfer failed.
                    let _ = self.sock.shutdown(Shutdown::Both);
                    return false;
                }
            }
        }
        keep
    }

    /// A directory as text: one name per line, "/" after directories.
    fn listing(&mut self, dir: u64, keep: bool, send_body: bool) -> bool {
        let mut body = Vec::new();
        let r = self.vol.readdir(dir, 0, |e| {
            body.extend_from_slice(&e.name);
            if e.kind == FileType::Directory {
                body.push(b'/');
            }
            body.push(b'\n');
            true
        });
        if let Err(e) = r {
            self.error(status_of(&e), &e.to_string(), keep);
            return keep;
        }
        self.with_body(
            200,
            keep,
            "Content-Type: text/plain; charset=utf-8\r\n",
            &body,
            send_body,
        ) && keep
    }

    fn put(&mut self, h: &Head) -> bool {
        if let Some(r) = self.check_change(h) {
            return r;
        }
        if self.path.is_empty() {
            return self.refuse(h, 405, "cannot store onto /");
        }
        let Some(framing) = Self::framing(h) else {
            return self.refuse(
                h,
                411,
                "a body length (Content-Length or chunked) is required",
            );
        };
        // Early refusals, before anything is received or created.
        let st = self.vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        if let Framing::Length(n) = framing {
            if n > free {
                return self.refuse(h, 507, "the body is larger than the free space");
            }
            if n > pktfs::volume::MAX_FILE_SIZE {
                return self.refuse(h, 413, "file too large");
            }
        }
        let n = self.path.len();
        let small = matches!(framing, Framing::Length(len) if len <= SMALL_BODY);
        if !small {
            // Before receiving a large body: would it be refused at the end?
            match self.resolve(n) {
                Ok(a) if a.kind == FileType::Directory => {
                    return self.refuse(h, 409, "a directory has that name")
                }
                Ok(_) | Err(FsError::NotFound) => {}
                Err(e) => return self.refuse(h, status_of(&e), &e.to_string()),
            }
        }
        let mut tmp = match self.spare.take() {
            Some(t) => t,
            None => match self.vol.tmpfile(0o644, self.sh.uid, self.sh.gid) {
                Ok(t) => t,
                Err(e) => return self.refuse(h, status_of(&e), &e.to_string()),
            },
        };
        if h.expect_continue && h.http11 {
            self.out.clear();
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            if !self.send_out(false) {
                self.drop_tmp(tmp);
                return false;
            }
        }
        let big = match framing {
            Framing::Length(n) => n >= self.sh.cfg.persister_min,
            Framing::Chunked => self.sh.cfg.persister_min != u64::MAX,
        };
        let r = if big {
            self.receive_pipelined(framing, tmp.ino())
        } else {
            self.receive_inline(framing, tmp.ino())
        };
        let (bytes, records) = match r {
            Ok(t) => t,
            Err(e) => {
                self.drop_tmp(tmp);
                self.body_failed(e);
                return false;
            }
        };
        if bytes == 0 {
            // No data commit set the times: an unnamed file made ahead of
            // time must not carry its creation time as the upload's.
            let now = pktfs::SetAttr {
                mtime: Some(pktfs::TimeSet::Now),
                atime: Some(pktfs::TimeSet::Now),
                ..Default::default()
            };
            let _ = self.vol.setattr(tmp.ino(), &now);
        }
        // The body is durable in the unnamed file: give it its name.
        let keep = h.keep_alive;
        let notify = |c: Change<'_>| self.sh.notify(c);
        let parent = match self.parent_dir(n - 1, &notify) {
            Ok(p) => p,
            Err(e) => {
                self.drop_tmp(tmp);
                let code = if matches!(e, FsError::NotDir | FsError::Exists) {
                    409
                } else {
                    status_of(&e)
                };
                self.error(code, &format!("{}: {e}", self.path.display()), keep);
                return keep;
            }
        };
        let name = self.path.name().expect("non-empty path").to_vec();
        // One call, under the directory's lock: whether a file was replaced
        // comes back from it (no separate lookup that would queue behind
        // other uploads into the same directory).
        let tail = std::mem::take(&mut self.pieces);
        // `linked` holds a replaced file until the answer is out: its space
        // is freed after, off the client's wait (dropped at the end).
        let linked = match tmp.link(tail, parent, &name, true) {
            Ok(l) => l,
            Err(e) => {
                self.drop_tmp(tmp);
                let (code, msg) = match e {
                    FsError::IsDir => (409, "a directory has that name".to_string()),
                    e => (status_of(&e), format!("{}: {e}", self.path.display())),
                };
                self.error(code, &msg, keep);
                return keep;
            }
        };
        self.tally.files_stored += 1;
        self.sh.notify(Change::Entry {
            parent,
            name: &name,
            ino: tmp.ino(),
        });
        if linked.replaced() {
            self.head_only(204, keep, "") && keep
        } else {
            let mut loc = String::from("Location: ");
            for s in self.path.segments() {
                loc.push('/');
                encode_segment(s, &mut loc);
            }
            loc.push_str("\r\nContent-Type: text/plain; charset=utf-8\r\n");
            let body = format!("stored {bytes} bytes as {records} records\n");
            self.with_body(201, keep, &loc, body.as_bytes(), true) && keep
        }
    }

    fn receive_inline(&mut self, framing: Framing, tmp: u64) -> Result<(u64, u64), BodyError> {
        let mut sink = Sink::Inline {
            ino: tmp,
            records: 0,
        };
        let bytes = self.read_body(framing, &mut sink)?;
        let Sink::Inline { records, .. } = sink else {
            unreachable!()
        };
        // Plus the tail still in `self.pieces`, which `rx_link` commits.
        Ok((bytes, records + self.pieces.len() as u64))
    }

    /// A large body: this thread only receives; a persister thread makes
    /// the pieces (CRC, cache-line write-back) and commits them, so that
    /// work overlaps the next `recv` (on another core when one is free).
    /// Everything is committed before this returns Ok.
    fn receive_pipelined(&mut self, framing: Framing, tmp: u64) -> Result<(u64, u64), BodyError> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Work>(256);
        let failed = AtomicBool::new(false);
        let vol = self.vol;
        let batch = self.sh.cfg.rx_chunk as u64;
        std::thread::scope(|sc| {
            let failed = &failed;
            let worker = std::thread::Builder::new()
                .name("pktfs-persist".into())
                .stack_size(256 << 10)
                .spawn_scoped(sc, move || persister(vol, tmp, rx, batch, failed));
            let worker = match worker {
                Ok(w) => w,
                Err(_) => return self.receive_inline(framing, tmp),
            };
            let mut sink = Sink::Persister { tx, failed };
            let r = self.read_body(framing, &mut sink);
            drop(sink);
            let w = worker
                .join()
                .unwrap_or(Err(FsError::Invalid("persister thread failed")));
            match (r, w) {
                (Ok(bytes), Ok(records)) => Ok((bytes, records)),
                (Err(e), _) => Err(e),
                (Ok(_), Err(e)) => Err(BodyError::Fs(e)),
            }
        })
    }

    /// Free an unnamed file that will not be linked.
    /// Give up an upload: its uncommitted tail and its unnamed file.
    fn drop_tmp(&mut self, tmp: pktfs::TmpFile<'a>) {
        self.vol.rx_abort(std::mem::take(&mut self.pieces));
        drop(tmp); // frees the unnamed file
    }

    /// The directory for the first `n` segments, created if missing.
    fn parent_dir(&self, n: usize, notify: &dyn Fn(Change<'_>)) -> Result<u64, FsError> {
        let mut ino = self.vol.root();
        for s in self.path.segments().take(n) {
            ino = match self.vol.lookup_kind(ino, s) {
                Ok((child, FileType::Directory)) => child,
                Ok(_) => return Err(FsError::NotDir),
                Err(FsError::NotFound) => {
                    match self.vol.mkdir(ino, s, 0o755, self.sh.uid, self.sh.gid) {
                        Ok(a) => {
                            notify(Change::Entry {
                                parent: ino,
                                name: s,
                                ino: a.ino,
                            });
                            a.ino
                        }
                        Err(FsError::Exists) => match self.vol.lookup_kind(ino, s)? {
                            (child, FileType::Directory) => child,
                            _ => return Err(FsError::NotDir),
                        },
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
        }
        Ok(ino)
    }

    fn delete(&mut self, h: &Head) -> bool {
        if let Some(r) = self.check_change(h) {
            return r;
        }
        if self.path.is_empty() {
            return self.refuse(h, 405, "cannot delete /");
        }
        if h.has_body() && !self.discard_body(h) {
            return false;
        }
        let keep = h.keep_alive;
        let n = self.path.len();
        let r = self.resolve(n - 1).and_then(|p| {
            if p.kind != FileType::Directory {
                return Err(FsError::NotFound);
            }
            let name = self.path.name().expect("non-empty");
            let a = self.vol.lookup(p.ino, name)?;
            if a.kind == FileType::Directory {
                self.vol.rmdir(p.ino, name)?;
            } else {
                self.vol.unlink(p.ino, name)?;
            }
            Ok((p.ino, a.ino))
        });
        match r {
            Ok((parent, ino)) => {
                let name = self.path.name().expect("non-empty").to_vec();
                self.sh.notify(Change::Removed {
                    parent,
                    name: &name,
                    ino,
                });
                self.head_only(204, keep, "") && keep
            }
            Err(e) => {
                self.error(
                    status_of(&e),
                    &format!("{}: {e}", self.path.display()),
                    keep,
                );
                keep
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(
            parse_range(b"bytes=0-9"),
            Some(RangeSpec::FromTo(0, Some(9)))
        );
        assert_eq!(parse_range(b"bytes=5-"), Some(RangeSpec::FromTo(5, None)));
        assert_eq!(parse_range(b"bytes=-5"), Some(RangeSpec::Suffix(5)));
        assert_eq!(
            parse_range(b"Bytes = 1-2"),
            Some(RangeSpec::FromTo(1, Some(2)))
        );
        assert_eq!(parse_range(b"bytes=9-1"), None);
        assert_eq!(parse_range(b"bytes=0-1,4-5"), None);
        assert_eq!(parse_range(b"items=0-1"), None);
        assert_eq!(parse_range(b"bytes=a-b"), None);
        assert_eq!(
            resolve_range(Some(RangeSpec::FromTo(0, Some(9))), 5),
            Ok(Some((0, 5)))
        );
        assert_eq!(resolve_range(Some(RangeSpec::FromTo(5, None)), 5), Err(()));
        assert_eq!(
            resolve_range(Some(RangeSpec::Suffix(3)), 10),
            Ok(Some((7, 10)))
        );
        assert_eq!(
            resolve_range(Some(RangeSpec::Suffix(30)), 10),
            Ok(Some((0, 10)))
        );
        assert_eq!(resolve_range(Some(RangeSpec::Suffix(0)), 10), Err(()));
        assert_eq!(resolve_range(None, 0), Ok(None));
    }
}
