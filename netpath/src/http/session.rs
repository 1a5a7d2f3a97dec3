//! The connection core on the event loops: a [`Session`] per connection,
//! fed the bytes that landed in the loop's ring of free packet buffers,
//! for either protocol ([`Protocol`]: plain HTTP, S3).
//!
//! The session parses heads and walks bodies (the one body walker,
//! `crate::receive::body`); the protocol acts on each request through
//! [`Conn`], whose answers are queued in its [`super::conn::Outbox`] as
//! messages (head bytes, then a held file range: one sendmsg each), and
//! says what becomes of the body ([`Next`]): skipped, or received into an
//! unnamed file and handed back once it is in.
//!
//! # A request
//! A head is parsed by `httparse` where it landed; one that spans landed
//! chunks is assembled in a DRAM buffer of at most `max_header_bytes`.
//! Body bytes become pieces where they landed (CRC while hot): the chunk
//! is split at the body's edges, so framing and the next pipelined request
//! are never linked. An upload's pieces are committed into its unnamed
//! file at the end of a loop turn once a batch (`rx_chunk`) gathered; the
//! last batch goes with the link (one commit for a small PUT), and
//! 201/204 is queued only after that commit returned.
//!
//! # Timeouts
//! A head must complete within `header_timeout` of its first byte, a body
//! must progress within `io_timeout`: either answers 408 and closes. A
//! body must also keep to `Config::min_recv_rate`, judged over each
//! `io_timeout` window from the end of its head, and a chunk-size line or
//! trailer section must complete within `header_timeout` of its first
//! byte; one that does not gets no more time: its deadline stops moving
//! (`io_timeout` after its last bytes before the judgement), so a client
//! trickling a byte per `io_timeout` is answered 408 within two
//! `io_timeout`s instead of never. Bytes are counted as the session takes
//! them; in a window's last quarter the low-water mark stays down, so
//! what arrived is taken before the window is judged. An
//! idle connection (between requests) is closed by the loop after
//! `idle_timeout`. None of it blocks the loop: they are deadlines on its
//! timer heap.
//!
//! # Large bodies arrive in large receives
//! While an upload's body has at least [`LOWAT_MIN_BYTES`] to come, the
//! session asks the socket for a low-water mark (SO_RCVLOWAT, through
//! [`Session::rcvlowat`]) of what is left, at most [`LOWAT_BYTES`] (the
//! largest piece a record holds), so the loop hears of the body only once
//! that much waits and each receive makes one large piece. Without it a
//! loop that polls took a body in whatever had arrived since its last
//! turn: a large upload from a bursty sender (curl) came in thousands of
//! small turns (a record, a CRC call and a write-back per piece) and cost
//! the loop far more CPU than it costs with the mark, which is level
//! with the threaded transport's blocking 256 KiB receives
//! (docs/DESIGN.md, "The event loops"). A client that
//! slows down is not held to the mark: after a quarter of `io_timeout`
//! without bytes the session's timer lowers it to 1, so what did arrive
//! is taken (and the body's deadline moves) long before the body times
//! out; the next bytes raise it again.
//!
//! # Bounds
//! Answers waiting to be sent hold at most `Config::max_queued_bytes` of
//! DRAM (heads and small bodies; a held file range counts by its own DRAM,
//! not its length) and at most [`MAX_QUEUED`] messages. Past either,
//! parsing pauses and landed bytes wait in their packet buffers (at most
//! [`MAX_BACKLOG_BYTES`], else the connection is closed); while paused,
//! bytes arriving are not progress: a client that does not read is closed
//! `io_timeout` after the last answer it took. Once the socket's buffer is
//! full the loop holds the client to `Config::min_send_rate` over each
//! `io_timeout` (`Session::send_rule`): the kernel taking a few bytes when
//! the client's window opens a little is not progress, and a client that
//! keeps to the pace restarts the pause's clock (`on_send_progress`). So a
//! client that pipelines without reading cannot grow the server's memory
//! nor hold its connection.
//!
//! What a session holds in DRAM (the head being assembled, a chunk line,
//! queued answers) beyond `Config::CONN_FREE_DRAM` is charged to the
//! loops' shared budget (`Config::max_inflight_bytes`) in grains
//! ([`crate::loops::limits::DramCharge`]; a small request never touches the
//! shared counter). Over it, a head still being assembled is answered 503
//! and the connection closed, a session whose answers need it pauses until
//! they are read, and new connections are answered 503. Its bytes are
//! counted once allocated, so the budget is exceeded by at most one
//! receive's growth per loop.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use pktfs_fs::{RxHeld, RxTime, TmpFile, Volume};

use super::conn::{msg_dram, serve, Conn, ErrorForm, Next, Outbox, Protocol, Spare};
use super::head::{parse_head, Framing, Head};
use crate::config::Config;
use crate::loops::limits::DramCharge;
use crate::loops::{CloseReason, Flow, SendRule, Session, TurnClock};
use crate::receive::body::{assemble, BodyError, Dram, Pieces, Walk};
use crate::shared::Shared;

mod body;
use body::no_body_space;

/// Answers queued (not yet handed to the loop) before parsing pauses.
const MAX_QUEUED: usize = 64;
/// Landed bytes kept while parsing is paused; beyond, the connection is
/// closed.
const MAX_BACKLOG_BYTES: u64 = 4 << 20;
/// Below this much body still to come, every byte is taken as it arrives.
const LOWAT_MIN_BYTES: u64 = 64 << 10;
/// The most a large body's receive waits for: the largest piece a record
/// holds.
const LOWAT_BYTES: u64 = 256 << 10;
/// Slack on the loop's own deadline while a request is under way: the
/// session's timers (408) fire first.
const SLACK: Duration = Duration::from_secs(1);

/// A session for a new connection from `peer` speaking `p` (`form`: how
/// its errors are worded), or None to close it at once. Over the
/// configured cap, or with the DRAM budget spent, it is answered 503 at
/// once (`on_open`).
pub(super) fn open<'v, P: Protocol<'v> + 'v>(
    sh: &'v Shared,
    vol: &'v Volume,
    peer: SocketAddr,
    p: P,
    form: Option<&'v dyn ErrorForm>,
) -> Option<Box<dyn Session<'v> + 'v>> {
    if !std::ptr::eq(vol, &*sh.vol) {
        return None;
    }
    let over_budget =
        sh.loops.dram.load(std::sync::atomic::Ordering::Relaxed) >= sh.cfg.max_inflight_bytes;
    if over_budget {
        sh.loops
            .dram_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    let refused = over_budget || sh.open_connections() >= sh.cfg.loop_cap();
    if refused {
        sh.metrics.refused.inc();
    } else {
        sh.metrics.accepted.inc();
    }
    let mut c = Conn::new(sh, None, peer, form);
    c.outbox = Some(Outbox::default());
    Some(Box::new(HttpSession {
        sh,
        c,
        p,
        head: Vec::new(),
        head_started: None,
        body: None,
        seq: 0,
        head_from: 0,
        in_flight: false,
        finishing: false,
        backlog: VecDeque::new(),
        backlog_bytes: 0,
        refused,
        sending_bytes: 0,
        paused_since: None,
        dram: DramCharge::default(),
        dram_short: false,
    }))
}

/// An upload being received.
struct Upload<'v, B> {
    tmp: TmpFile<'v>,
    head: Head,
    /// The body's data on its way into `tmp`: committed once a batch
    /// (`rx_chunk`) gathered at the end of a turn, the rest with the link.
    pieces: Pieces<'v>,
    /// The protocol's: what it checks of the body as it passes (S3's
    /// digests and aws-chunked signatures) and needs once it is in.
    body: B,
}

struct BodyRx<'v, B> {
    walk: Walk,
    /// None: the body is read and dropped.
    upload: Option<Upload<'v, B>>,
    /// The request to act on once its body was read and dropped
    /// ([`Head::read_body_first`]).
    then: Option<Head>,
    /// The body must make progress by then.
    deadline: Instant,
    /// No body bytes for a quarter of `io_timeout`: the low-water mark is
    /// down to 1 until bytes come again (`HttpSession::rcvlowat`).
    lowat_lapsed: bool,
    /// The end of the current `io_timeout` window the body's pace is
    /// judged over (`Config::min_recv_rate`), and the bytes (data and
    /// framing) it brought in it so far.
    window_end: Instant,
    window_bytes: u64,
    /// When the chunk-size line or trailer section under way began (it
    /// must be complete within `header_timeout`).
    line_since: Option<Instant>,
    /// The body broke the pace or a line's deadline: `deadline` no longer
    /// moves (module docs, "Timeouts").
    frozen: bool,
}

struct HttpSession<'v, P: Protocol<'v>> {
    sh: &'v Shared,
    c: Conn<'v>,
    /// The protocol spoken (plain HTTP, S3) and its state.
    p: P,
    /// A head that spans landed chunks, assembled (at most
    /// `max_header_bytes`).
    head: Vec<u8>,
    head_started: Option<Instant>,
    body: Option<BodyRx<'v, P::Body>>,
    /// Stream position of the next landed byte to be handled.
    seq: u64,
    /// Stream position where the request head being read began.
    head_from: u64,
    /// A message is with the loop.
    in_flight: bool,
    /// No more requests: close once the answers are out.
    finishing: bool,
    /// Landed bytes waiting while parsing is paused.
    backlog: VecDeque<(RxHeld<'v>, RxTime)>,
    backlog_bytes: u64,
    /// Over `max_connections`: answer 503 and close.
    refused: bool,
    /// DRAM of the message with the loop ([`super::conn::msg_dram`]).
    sending_bytes: usize,
    /// Parsing paused (backlog) since, with no answer taken by the client
    /// since: the connection closes `io_timeout` after.
    paused_since: Option<Instant>,
    /// This session's share of the loops' DRAM budget.
    dram: DramCharge,
    /// The DRAM budget had no room for this session's answers: parsing
    /// pauses until they are read.
    dram_short: bool,
}

impl<'v, P: Protocol<'v>> HttpSession<'v, P> {
    /// A request (or a failed head) begins being served; its `bytes_in`
    /// count from its head's first byte.
    fn begin_request(&mut self) {
        self.c.begin_request();
        self.c.req.in_before = self.head_from;
    }

    /// Count the request and log it, with the bytes it consumed so far.
    fn end_request(&mut self) {
        self.c.in_pos = self.seq;
        self.c.end_request();
    }

    fn idle(&self) -> bool {
        self.body.is_none() && self.head.is_empty()
    }

    /// The next thing for the loop: a queued answer, or the close.
    fn flow(&mut self) -> Flow<'v> {
        // A tiered answer's windows whose bytes are in join the queue
        // (`super::conn::tiered`); one that failed mid-body cuts the
        // connection.
        let tiered = self.c.outbox.as_ref().is_some_and(|o| o.tiered.is_some());
        if tiered && !self.c.pump_tiered() {
            return Flow::Close;
        }
        if !self.in_flight {
            let ob = self.c.outbox.as_mut().expect("a loop session's outbox");
            if let Some(m) = ob.msgs.pop_front() {
                let cost = msg_dram(m.head.len(), m.hold.as_ref());
                ob.queued_bytes -= cost;
                self.sending_bytes = cost;
                self.in_flight = true;
                return Flow::Send(m);
            }
        }
        let ob = self.c.outbox.as_ref().expect("a loop session's outbox");
        if (self.finishing || ob.finish) && ob.msgs.is_empty() && ob.tiered.is_none() {
            self.finishing = true;
            return Flow::Finish;
        }
        Flow::Continue
    }

    fn queued(&self) -> usize {
        self.c
            .outbox
            .as_ref()
            .map_or(0, |o| o.msgs.len() + usize::from(o.tiered.is_some()))
    }

    /// Parsing waits: the queued answers are at their bound (module docs,
    /// "Bounds").
    fn paused(&self) -> bool {
        let Some(o) = self.c.outbox.as_ref() else {
            return false;
        };
        o.msgs.len() >= MAX_QUEUED
            || o.tiered.is_some()
            || o.queued_bytes + self.sending_bytes >= self.sh.cfg.max_queued_bytes
            || self.dram_short
    }

    /// Landed bytes wait for room (parsing paused).
    fn defer(&mut self, d: RxHeld<'v>, ts: RxTime) {
        self.backlog_bytes += d.len() as u64;
        self.backlog.push_back((d, ts));
        if self.paused_since.is_none() {
            self.paused_since = Some(self.c.now());
        }
    }

    /// DRAM this session holds now (the head being assembled, a chunk
    /// line, queued answers and the one being sent).
    fn dram_used(&self) -> u64 {
        let q = self.c.outbox.as_ref().map_or(0, |o| o.queued_bytes);
        let line = self.body.as_ref().map_or(0, |b| b.walk.dram());
        (self.head.capacity() + line + q + self.sending_bytes) as u64
    }

    /// Charge the session's DRAM to the shared budget; over it, a head
    /// being assembled is refused (503, close) and answers wait.
    fn account(&mut self) {
        let cfg = &self.sh.cfg;
        let ok = self.dram.account(
            &self.sh.loops.dram,
            self.dram_used(),
            Config::CONN_FREE_DRAM as u64,
            cfg.max_inflight_bytes,
        );
        self.dram_short = !ok;
        if ok {
            return;
        }
        self.sh
            .loops
            .dram_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !self.head.is_empty() && !self.finishing {
            tracing::info!(
                peer = %self.c.peer,
                "HTTP connection: the server's in-flight memory budget (max_inflight_bytes) is spent; request head refused"
            );
            self.head = Vec::new();
            self.begin_request();
            self.c.error(503, "the server is busy; try again", false);
            self.end_request();
            self.finishing = true;
            // The answer is small and must go out: charged when it can be.
            self.dram_short = false;
        }
    }

    /// Handle landed bytes; bytes behind others that wait, or arriving
    /// while paused, wait at the back of the backlog.
    fn feed(&mut self, data: RxHeld<'v>, ts: RxTime) -> Flow<'v> {
        if !self.backlog.is_empty() || self.paused() {
            self.defer(data, ts);
            if self.backlog_bytes > MAX_BACKLOG_BYTES {
                tracing::info!(
                    peer = %self.c.peer,
                    "HTTP connection: {} bytes of requests wait for answers the client does not read; closing",
                    self.backlog_bytes
                );
                self.abort_upload();
                return Flow::Close;
            }
            return self.flow();
        }
        if let Some(rest) = self.take_in(data, ts) {
            self.defer(rest, ts);
        }
        self.flow()
    }

    /// Parse and act on landed bytes in order until they are used up or
    /// parsing pauses; returns what is left then (for the caller to keep
    /// in its place in the backlog).
    fn take_in(&mut self, data: RxHeld<'v>, ts: RxTime) -> Option<RxHeld<'v>> {
        let mut rest = Some(data);
        while let Some(d) = rest.take() {
            if self.finishing {
                return None; // dropped: nothing more is handled
            }
            rest = match self.body.is_some() {
                true => self.body_bytes(d, ts),
                false => self.head_bytes(d),
            };
            if rest.is_some() && self.paused() {
                return rest;
            }
        }
        None
    }

    /// Bytes of a request head; returns what follows it.
    fn head_bytes(&mut self, mut d: RxHeld<'v>) -> Option<RxHeld<'v>> {
        match self.head_slice(d.bytes()) {
            Some(n) if n < d.len() as usize => {
                let _head = d.split_to(n as u32);
                Some(d)
            }
            _ => None,
        }
    }

    /// Head bytes, wherever they landed: parsed, and the request
    /// dispatched once its head is complete. Returns how many of `bytes`
    /// the completed head took (`None`: all of them went into a head still
    /// incomplete, or the head was refused and the connection finishes).
    fn head_slice(&mut self, bytes: &[u8]) -> Option<usize> {
        if self.head.is_empty() {
            // A new head starts with these bytes.
            self.head_from = self.seq;
        }
        let cfg = &self.sh.cfg;
        let max = cfg.max_header_bytes;
        let path = &mut self.c.path;
        let p = &mut self.p;
        let r = assemble(&mut self.head, bytes, max, |w| {
            parse_head(w, path, cfg, &mut |r| p.head_fields(r))
        });
        match r {
            Ok(None) => {
                // The head's clock starts at its first bytes.
                let now = self.c.now();
                self.head_started.get_or_insert(now);
                self.seq += bytes.len() as u64;
                None
            }
            Err(e) => {
                let (code, msg) = e.unwrap_or((431, "request head too large"));
                self.head.clear();
                self.begin_request();
                self.c.error(code, msg, false);
                self.c.linger();
                self.end_request();
                self.finishing = true;
                None
            }
            Ok(Some((n, h))) => {
                self.head_started = None;
                self.seq += n as u64;
                if self.head.capacity() > Config::CONN_FREE_DRAM {
                    // A large head's buffer is not kept for the next.
                    self.head = Vec::new();
                }
                self.dispatch(h);
                Some(n)
            }
        }
    }

    /// Handle a parsed request with the shared handlers.
    fn dispatch(&mut self, h: Head) {
        self.begin_request();
        self.c.req.method = h.method.as_str();
        self.c.req.json = h.accept_json;
        // A request the token refuses is answered from its head (`act`),
        // its body not read first.
        let admitted = self.p.admits(&self.c, &h);
        if let Some(f) = h.framing().filter(|_| h.read_body_first() && admitted) {
            // Acted on when its body is in (`body_complete`). On a loop
            // the 100 is queued, which cannot fail.
            self.c.send_continue(&h);
            self.receive_body(f, None, Some(h.without_body()));
            return;
        }
        self.act(h);
    }

    /// Act on a request begun (its body, if it stores one, still to come).
    fn act(&mut self, h: Head) {
        match serve(&mut self.c, &mut self.p, &h) {
            Next::Receive(r) => {
                // Answered (and logged) when the body is in.
                let upload = Upload {
                    tmp: r.file,
                    head: h,
                    pieces: self.c.upload_pieces(),
                    body: r.body,
                };
                self.receive_body(r.framing, Some(upload), None);
            }
            Next::Skip(f) => {
                self.end_request();
                self.receive_body(f, None, None);
            }
            Next::Done(keep) => {
                self.end_request();
                if !keep {
                    self.finishing = true;
                }
            }
        }
    }

    /// A large upload's body with enough still to come, whose mark has not
    /// lapsed (module docs, "Large bodies arrive in large receives").
    fn wants_lowat(&self, b: &BodyRx<'v, P::Body>) -> bool {
        b.upload.is_some()
            && !b.lowat_lapsed
            && b.walk
                .length_left()
                .is_some_and(|left| left >= LOWAT_MIN_BYTES)
    }

    /// When a raised mark lapses: a quarter of `io_timeout` after the last
    /// body bytes (the deadline is `io_timeout` after them).
    fn lowat_until(&self, b: &BodyRx<'v, P::Body>) -> Option<Instant> {
        let t = self.sh.cfg.io_timeout;
        b.deadline.checked_sub(t - t / 4)
    }

    /// Walk the body framed by `f` as it lands: into `upload`, or dropped
    /// (and then `then` acted on).
    fn receive_body(
        &mut self,
        f: Framing,
        upload: Option<Upload<'v, P::Body>>,
        then: Option<Head>,
    ) {
        let deadline = self.c.now() + self.sh.cfg.io_timeout;
        self.body = Some(BodyRx {
            walk: Walk::new(f, self.sh.cfg.max_header_bytes),
            upload,
            then,
            deadline,
            lowat_lapsed: false,
            window_end: deadline,
            window_bytes: 0,
            line_since: None,
            frozen: false,
        });
        self.body_done_if_empty();
    }
}

impl<'v, P: Protocol<'v>> Session<'v> for HttpSession<'v, P> {
    fn on_open(&mut self) -> Flow<'v> {
        if self.refused {
            tracing::warn!(
                "HTTP connection from {} refused: {} connections are being served (max_connections)",
                self.c.peer,
                self.sh.cfg.loop_cap()
            );
            self.c.error(503, "too many connections; try again", false);
            self.finishing = true;
        }
        self.flow()
    }

    fn on_data(&mut self, data: RxHeld<'v>, rx: RxTime, at: TurnClock) -> Flow<'v> {
        self.c.add_in(data.len() as u64);
        // The turn's clock for what these bytes start (a request's start,
        // its body's deadline, its answer's Date); not kept past the call,
        // where it would go stale. The bytes' records take `rx`, their
        // receive completion's time.
        self.c.turn = Some(at);
        let f = self.feed(data, rx);
        self.account();
        self.c.turn = None;
        match f {
            Flow::Continue if self.finishing => self.flow(),
            f => f,
        }
    }

    fn rcvlowat(&self) -> u32 {
        match &self.body {
            Some(b) if self.wants_lowat(b) => match b.walk.length_left() {
                Some(left) => left.min(LOWAT_BYTES) as u32,
                None => 1,
            },
            _ => 1,
        }
    }

    fn end_turn(&mut self) -> Flow<'v> {
        // An upload's batch is committed once it reached `rx_chunk` (the
        // rest goes with the link).
        let Some(b) = self.body.as_mut() else {
            return self.flow();
        };
        let Some(u) = b.upload.as_mut() else {
            return self.flow();
        };
        if u.pieces.batch() < self.sh.cfg.rx_chunk as u64 {
            return self.flow();
        }
        let ino = u.tmp.ino();
        let vol = self.c.vol;
        let r = u
            .pieces
            .flush_small()
            .and_then(|()| u.pieces.commit(vol, ino, &mut u.body));
        if let Err(e) = r {
            self.body_error(BodyError::Fs(e));
        }
        self.flow()
    }

    fn on_eof(&mut self) -> Flow<'v> {
        if self.body.is_some() {
            self.body_error(BodyError::Gone("the client closed the connection".into()));
        } else if !self.head.is_empty() {
            tracing::info!(
                "HTTP connection from {}: closed in the middle of a request head",
                self.c.peer
            );
        }
        self.finishing = true;
        self.flow()
    }

    fn on_sent(&mut self, result: std::io::Result<u64>, spent: Vec<u8>) -> Flow<'v> {
        self.in_flight = false;
        self.sending_bytes = 0;
        // The client took an answer: progress.
        self.paused_since = None;
        // The answer is out: a file the upload replaced is freed now, off
        // the client's wait.
        self.c.replaced = None;
        match result {
            Ok(n) => self.c.add_sent(n),
            Err(e) => {
                tracing::info!(
                    "HTTP connection from {}: sending an answer: {e}",
                    self.c.peer
                );
                self.abort_upload();
                return Flow::Close;
            }
        }
        if let Some(ob) = self.c.outbox.as_mut() {
            // Only small buffers are kept: a large answer's would stay
            // allocated, uncounted, for the connection's life.
            if ob.bufs.len() < 4 && spent.capacity() <= 2048 {
                ob.bufs.push(spent);
            }
        }
        self.account();
        // An upload's answer is out: the file for the next one is made now,
        // while the client reads the answer.
        if std::mem::take(&mut self.c.spare_wanted) && self.c.spare.is_none() && !self.finishing {
            self.c.spare = Spare::make(self.c.sh);
        }
        // Landed bytes that waited for room are handled now, oldest first,
        // straight (not through `feed`, which would put them behind the
        // rest of the backlog again: with two or more waiting that spun
        // the loop thread for ever, deaf to timeouts and to the stop); what
        // is left when parsing pauses again keeps its place at the front.
        while !self.paused() && !self.finishing {
            let Some((d, ts)) = self.backlog.pop_front() else {
                break;
            };
            self.backlog_bytes -= d.len() as u64;
            if let Some(rest) = self.take_in(d, ts) {
                self.backlog_bytes += rest.len() as u64;
                self.backlog.push_front((rest, ts));
                break;
            }
        }
        if !self.backlog.is_empty() {
            // Still paused: the clock runs from this answer.
            self.paused_since = Some(Instant::now());
        }
        self.account();
        self.flow()
    }

    fn next_timer(&self) -> Option<Instant> {
        if let Some(b) = &self.body {
            let mut t = b.deadline;
            if !b.frozen {
                if self.sh.cfg.min_recv_rate > 0 {
                    t = t.min(b.window_end);
                }
                if let Some(s) = b.line_since {
                    t = t.min(s + self.sh.cfg.header_timeout);
                }
            }
            if self.wants_lowat(b) {
                if let Some(l) = self.lowat_until(b) {
                    t = t.min(l);
                }
            }
            return Some(t);
        }
        self.head_started
            .filter(|_| !self.head.is_empty())
            .map(|t| t + self.sh.cfg.header_timeout)
    }

    fn on_timer(&mut self, now: Instant) -> Flow<'v> {
        if let Some(b) = self.body.as_mut() {
            let cfg = &self.sh.cfg;
            if b.deadline <= now {
                self.body_error(BodyError::Timeout);
            } else if !b.frozen && b.line_since.is_some_and(|s| s + cfg.header_timeout <= now) {
                b.frozen = true;
                tracing::info!(
                    "HTTP connection from {}: a chunk-size line or trailer section not complete within header_timeout; no more time",
                    self.c.peer
                );
            } else if !b.frozen && cfg.min_recv_rate > 0 && b.window_end <= now {
                if b.window_bytes < cfg.min_window_bytes() {
                    b.frozen = true;
                    tracing::info!(
                        "HTTP connection from {}: the body brought {} bytes in {:?} (min_recv_rate {}/s); no more time",
                        self.c.peer,
                        b.window_bytes,
                        cfg.io_timeout,
                        cfg.min_recv_rate
                    );
                } else {
                    b.window_end = now + cfg.io_timeout;
                    b.window_bytes = 0;
                }
            } else {
                // The mark's quarter of `io_timeout` passed without bytes:
                // take what arrived (`rcvlowat` is 1 from now on).
                b.lowat_lapsed = true;
            }
        } else if let Some(t) = self.head_started {
            if !self.head.is_empty() && t + self.sh.cfg.header_timeout <= now {
                self.head.clear();
                self.begin_request();
                self.c.error(408, "request head too slow", false);
                self.end_request();
                self.finishing = true;
            }
        }
        self.flow()
    }

    fn wants_head(&self) -> bool {
        self.body.is_none() && !self.finishing && self.backlog.is_empty()
    }

    fn on_dram(&mut self, bytes: &[u8]) -> Flow<'v> {
        // The image is full and these bytes are in DRAM: heads are parsed
        // and their requests served as usual (GET, HEAD, DELETE need no
        // buffer space), bodies that are skipped walked over; an upload's
        // body cannot be stored from here (507).
        self.c.add_in(bytes.len() as u64);
        let mut at = 0;
        while at < bytes.len() && !self.finishing {
            if self.body.as_ref().is_some_and(|b| b.upload.is_some()) {
                // An upload cannot be stored from here.
                self.body_error(no_body_space());
                break;
            }
            if self.body.is_some() {
                // A body to skip (its request is answered): its framing is
                // walked here as from a packet buffer.
                let rest = self.body_bytes(Dram(&bytes[at..]), pktfs_fs::RxTime::Clock(0));
                at = bytes.len() - rest.map_or(0, |r| r.0.len());
                continue;
            }
            if self.paused() {
                // Pipelined past what waits for the client to read; with
                // nowhere to keep the rest, answer what was asked and close.
                self.finishing = true;
                break;
            }
            match self.head_slice(&bytes[at..]) {
                Some(n) => at += n,
                None => at = bytes.len(),
            }
        }
        if self.body.as_ref().is_some_and(|b| b.upload.is_some()) {
            self.body_error(no_body_space());
        }
        self.account();
        self.flow()
    }

    fn on_starved(&mut self) -> Flow<'v> {
        // The image is full: nothing more of this connection can be
        // received. An upload is given up (never visible) and answered
        // 507, as the threaded server answers; a request head that cannot
        // be received is answered 503 (nothing was asked yet that 507
        // would describe).
        if self.body.is_some() {
            self.body_error(no_body_space());
        } else if !self.finishing {
            if self.head.is_empty() {
                self.head_from = self.seq;
            }
            self.head.clear();
            self.begin_request();
            self.c.error(
                503,
                "the image is full: no buffer space to receive the request into",
                false,
            );
            self.end_request();
            self.finishing = true;
        }
        self.flow()
    }

    fn idle_timeout(&self) -> Duration {
        let cfg = &self.sh.cfg;
        if let Some(t) = self.paused_since {
            // Paused for a client that does not read: bytes it sends
            // meanwhile do not move the deadline.
            return (t + cfg.io_timeout).saturating_duration_since(Instant::now());
        }
        if self.idle() && !self.in_flight && self.queued() == 0 {
            cfg.idle_timeout
        } else {
            cfg.io_timeout.max(cfg.header_timeout) + SLACK
        }
    }

    fn on_waker(&mut self, w: crate::loops::wake::Waker) {
        if let Some(o) = self.c.outbox.as_mut() {
            o.waker = Some(w);
        }
    }

    fn on_wake(&mut self) -> Flow<'v> {
        // A tiered window's bytes are in (`flow` queues them), or the
        // fetch queue has a place for the next.
        let f = self.flow();
        self.account();
        f
    }

    fn send_rule(&self) -> Option<SendRule> {
        Some(SendRule {
            window: self.sh.cfg.io_timeout,
            min_bytes_per_sec: self.sh.cfg.min_send_rate,
        })
    }

    fn on_send_progress(&mut self, now: Instant) {
        // The client reads at the configured pace: a pipeline paused for
        // it is not a client that does not read.
        if self.paused_since.is_some() {
            self.paused_since = Some(now);
        }
    }

    fn on_close(&mut self, why: CloseReason) {
        // A tiered answer cut short gives back its plan and windows now
        // (a fetch in flight drops its bytes when it ends).
        if let Some(o) = self.c.outbox.as_mut() {
            o.tiered = None;
        }
        if self.abort_upload() {
            tracing::info!(
                peer = %self.c.peer,
                path = %self.c.path.display(),
                closed = ?why,
                "request body incomplete; nothing was stored"
            );
        }
        self.backlog.clear();
        self.dram.release(&self.sh.loops.dram);
    }
}
