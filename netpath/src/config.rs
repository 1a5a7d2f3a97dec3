//! Server configuration and the change callback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A bearer token. Its `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token from the contents of a token file: surrounding whitespace is
    /// dropped; empty or non-printable tokens are refused.
    pub fn from_file_contents(s: &str) -> Result<Token, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("the token file is empty".into());
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token must be printable ASCII without spaces".into());
        }
        Ok(Token(t.to_string()))
    }

    /// The token itself, for a client that must present it (the raw
    /// preface). Not `Display`, so it does not end up in a log by accident.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with what a client presented.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let t = self.0.as_bytes();
        let mut diff = u8::from(t.len() != presented.len());
        for (i, &b) in t.iter().enumerate() {
            diff |= b ^ presented.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// How the raw stream server serves its connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// io_uring event loops when this kernel and process allow them
    /// (probed at start), else the same loops on epoll; the choice and
    /// its reason are logged and printed.
    #[default]
    Auto,
    /// io_uring event loops; starting fails when they are not usable.
    Uring,
    /// The event loops on epoll (what Auto falls back to): the same
    /// loops, sessions and packet-buffer pool, readiness and non-blocking
    /// syscalls instead of io_uring requests.
    Epoll,
    /// A thread per connection.
    Threads,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "uring" | "io_uring" => Ok(IoMode::Uring),
            "epoll" => Ok(IoMode::Epoll),
            "threads" => Ok(IoMode::Threads),
            _ => Err(format!(
                "unknown io mode {s:?} (auto, uring, epoll, threads)"
            )),
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IoMode::Auto => "auto",
            IoMode::Uring => "uring",
            IoMode::Epoll => "epoll",
            IoMode::Threads => "threads",
        })
    }
}

/// One fact another part of the process (the tier engine) adds to
/// `/metrics` and `pktfs stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtraStat {
    /// Metric name (`pktfs_` is prefixed on /metrics) and JSON key.
    pub name: &'static str,
    pub help: &'static str,
    pub value: u64,
    /// A counter (only grows) rather than a gauge.
    pub counter: bool,
}

/// Where the extra facts come from, read at every scrape or stat.
#[derive(Clone)]
pub struct Extra(pub std::sync::Arc<dyn Fn() -> Vec<ExtraStat> + Send + Sync>);

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Extra(..)")
    }
}

/// What the servers do and their limits.
#[derive(Clone, Debug)]
pub struct Config {
    /// HTTP/1.1 listener (None: no HTTP).
    pub http_listen: Option<SocketAddr>,
    /// Raw stream listener (None: no raw mode).
    pub raw_listen: Option<SocketAddr>,
    /// S3 listener (None: no S3 endpoint): the S3 API over the same
    /// loops, every request signed (SigV4) with a key stored in the image
    /// (`pktfs keys`), so it needs no token to be exposed
    /// ([`crate::http::s3`]).
    pub s3_listen: Option<SocketAddr>,
    /// The region the S3 endpoint names (GetBucketLocation). Requests are
    /// verified with the region their own signature scope names.
    pub s3_region: String,
    /// Directory inside the volume that raw connections land in (created
    /// if missing).
    pub raw_dir: String,
    /// Bearer token every HTTP request must present (`Authorization:
    /// Bearer`), whatever its method, unless [`Config::public_read`] or
    /// [`Config::public_metrics`] exempts it; raw connections present it
    /// in a preface line ([`crate::raw`]). None (the default): no
    /// authentication, which [`crate::Services::start`] allows only on
    /// loopback addresses unless [`Config::insecure_no_auth`].
    pub token: Option<Token>,
    /// With a token: GET and HEAD of files and listings need none (changes,
    /// OPTIONS and the metrics still do). Default false.
    pub public_read: bool,
    /// With a token: GET and HEAD of the metrics path need none. Default
    /// false.
    pub public_metrics: bool,
    /// Without a token, listen on non-loopback addresses anyway (anyone who
    /// can reach the port reads and changes everything). Default false:
    /// starting fails instead, naming the address.
    pub insecure_no_auth: bool,
    /// Raw connections served at once, on their own (HTTP connections do
    /// not count against it; the total is still capped by
    /// [`Config::max_connections`]). More are closed at once. Default
    /// [`Config::RAW_MAX_CONNECTIONS_DEFAULT`].
    pub raw_max_connections: usize,
    /// Refuse every change (also implied by a read-only volume).
    pub read_only: bool,
    /// Who HTTP requests act as: every request is checked against the
    /// modes and POSIX ACLs of what it touches as this identity would be by
    /// the kernel (`pktfs_fs::Volume::permits`; 403 when refused), and files
    /// and directories it creates are this identity's (their group as a
    /// setgid directory says). Default: the server process's effective
    /// uid, gid and supplementary groups ([`Config::process_identity`]).
    pub as_user: pktfs_fs::Cred,
    /// Connections served at once (HTTP and raw together); more are
    /// answered 503 (HTTP) or closed (raw). `None`: as the transport
    /// allows: on the io_uring loops a connection costs an fd and no
    /// thread, so the file-descriptor limit bounds them; a thread per
    /// connection is capped at [`Config::THREADS_DEFAULT_MAX`].
    pub max_connections: Option<usize>,
    /// Keep-alive: how long a connection may sit between requests.
    pub idle_timeout: Duration,
    /// How long a request head may take to arrive once it has started.
    pub header_timeout: Duration,
    /// Longest wait for the next body bytes, or for room to send.
    pub io_timeout: Duration,
    /// Raw mode: longest silence before the connection is closed.
    pub raw_idle_timeout: Duration,
    /// Largest packet-buffer reservation per receive (bytes).
    pub rx_chunk: u32,
    /// Largest request head (request line + headers), and largest chunk
    /// line / trailer section.
    pub max_header_bytes: usize,
    /// Bodies at least this large (and chunked ones) are received with a
    /// persister thread that makes and commits the pieces while the
    /// connection's thread receives the next bytes (`u64::MAX`: never).
    pub persister_min: u64,
    /// Where the HTTP server answers GET/HEAD with its Prometheus metrics
    /// (None: nowhere). The path is reserved: a file of that name in the
    /// volume is not reachable over HTTP, and changes to it are refused.
    pub metrics_path: Option<String>,
    /// Raw mode: io_uring event loops or threads (HTTP uses threads).
    pub io: IoMode,
    /// io_uring event loops (0: one per two available cores, at least one).
    pub loops: usize,
    /// Each loop's ring of free packet buffers lent to the kernel: entries
    /// (a power of two) and bytes per entry. The ring bounds what one
    /// turn receives before its pieces are checksummed and written back:
    /// 4 x 256 KiB keeps a turn inside a core's L2, where a ring of 64 x 64
    /// KiB let a large upload land more than L2 holds per turn and be
    /// checksummed and written back from memory; and an entry of 256 KiB
    /// (the largest record) lets one receive take that much, where each
    /// 64 KiB receive could send a window update (on loopback the receiver
    /// then runs the sender's transmit; docs/DESIGN.md, "The event loops").
    /// Small requests share entries (incremental consumption), so 10,000
    /// connections are served as well with the smaller ring.
    pub ring_entries: u16,
    pub ring_entry_bytes: u32,
    /// io_uring loops: after a turn that did work, how long a loop polls
    /// for the next completion before it sleeps (zero: it sleeps at once).
    /// Polling saves a request arriving within it the wake-up of an idle
    /// core (most of the one-connection latency in a VM) and costs up to
    /// this much CPU time per quiet spell; a loop with nothing to do
    /// sleeps, and one whose polls keep finding nothing (requests further
    /// apart than this) pauses polling with a growing backoff
    /// (`loops/event_loop/busy_poll.rs`). The threads transport does not poll.
    pub busy_poll: Duration,
    /// More facts for /metrics (the tier engine's counters).
    pub extra: Option<Extra>,
    /// Event loops: DRAM one connection's queued answers may hold (response
    /// heads and small bodies copied into DRAM, plus a held file range's own
    /// DRAM: its segment list and any tiered bytes fetched for it, never
    /// the file's length). Past it the connection's parsing pauses
    /// (landed requests wait in packet buffers, at most 4 MiB) and a
    /// client that does not read is closed after `io_timeout`. Default
    /// [`Config::MAX_QUEUED_BYTES_DEFAULT`].
    pub max_queued_bytes: usize,
    /// The slowest a client may take answers once it, not the server,
    /// sets the pace (the server's socket buffer is full), in bytes per
    /// second, judged over each `io_timeout`: on the loops, a connection
    /// whose client took less over a window (bytes the kernel accepted
    /// after its full buffer was drained by the client's
    /// acknowledgements) is closed; one that keeps to it stays, however
    /// long a large GET takes, and its paused pipeline's `io_timeout`
    /// restarts. So a client that never reads is closed one to two
    /// `io_timeout`s after the server's socket buffer filled, and a slow
    /// but steady reader of a large file is served. The threads transport
    /// sends with `io_timeout` as its send timeout (a send that times out
    /// closes the connection) and applies the same pace to answers and to
    /// a file's bytes (`tx::send_held_paced`) once a send is only partly
    /// taken. Default
    /// [`Config::MIN_SEND_RATE_DEFAULT`] (16 KiB/s: 128 kbit/s).
    pub min_send_rate: u64,
    /// The slowest a request body may arrive, in bytes per second, judged
    /// over each `io_timeout` from the end of its head (data and chunk
    /// framing alike): a body that brought less than this rate times
    /// `io_timeout` in a window gets no more time: it is answered 408 and
    /// closed `io_timeout` after its last bytes before the judgement, later
    /// bytes no longer count as progress, and nothing is stored. A
    /// chunk-size line or a trailer section gets the same treatment once it
    /// is not complete within `header_timeout` of its first byte. Without
    /// both, a client sending a byte just under every `io_timeout` held a
    /// connection (a thread, on threads) for ever; with them a body holds
    /// it at most two `io_timeout`s beyond its last good window. 0: no
    /// rate (only `io_timeout` of silence). Default
    /// [`Config::MIN_RECV_RATE_DEFAULT`] (1 KiB/s).
    pub min_recv_rate: u64,
    /// Event loops: DRAM all connections together may hold for request
    /// heads being assembled, chunk lines and queued answers, beyond the
    /// first [`Config::CONN_FREE_DRAM`] of each connection (uncounted, so a
    /// small request never touches the shared counter). Past it a
    /// connection that needs more is answered 503 (or waits, for answers
    /// to be read) and new connections are answered 503. Default
    /// [`Config::MAX_INFLIGHT_BYTES_DEFAULT`].
    pub max_inflight_bytes: u64,
    /// Uploads leave this much buffer space free: one of unknown length
    /// (chunked) is refused 507 before its body is read when less than
    /// twice this is free, and any upload is stopped 507 (nothing stored)
    /// when it would eat into it. Default 1 MiB.
    pub upload_reserve_bytes: u64,
    /// Uploads leave this many records free (as `upload_reserve_bytes`):
    /// one client's body cannot take the record table to zero. Default
    /// 256.
    pub upload_reserve_records: u64,
    /// A GET of a tiered file is fetched from the store and sent in
    /// windows of at most this many fetched bytes (whole records; one
    /// record if a record is larger). A connection holds at most two
    /// windows at once: one being sent, the next fetched meanwhile.
    /// Default [`Config::TIER_WINDOW_BYTES_DEFAULT`].
    pub tier_window_bytes: u64,
    /// Fetched tiered bytes all connections together may hold (being
    /// fetched, waiting, being sent); a window waits until its bytes fit.
    /// Default [`Config::TIER_FETCH_BYTES_DEFAULT`].
    pub tier_fetch_bytes: u64,
    /// Threads that fetch windows for the event loops (shared by the
    /// server, started on the first tiered GET). Default 4.
    pub tier_fetch_threads: usize,
    /// Windows waiting for a fetch thread; past it a GET waits for a
    /// place (at most `io_timeout`, then its connection is closed).
    /// Default 256.
    pub tier_fetch_queue: usize,
}

/// A configuration that would serve every file to anyone who can reach
/// the port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to listen on {addr} without a token: anyone who can reach it could read, \
     replace and delete every file; give a token (--token-file FILE), listen on a \
     loopback address, or pass --insecure-no-auth to serve it unauthenticated anyway"
)]
pub struct Unprotected {
    pub addr: SocketAddr,
}

impl Config {
    /// The listen-address rule: without a token, only loopback addresses
    /// (127.0.0.0/8, ::1, and ::ffff:127.x) may be listened on, HTTP and
    /// raw alike, unless [`Config::insecure_no_auth`]. A wildcard address
    /// (0.0.0.0, ::) is not loopback. [`crate::Services::start`] checks it.
    pub fn check_exposure(&self) -> Result<(), Unprotected> {
        if self.token.is_some() || self.insecure_no_auth {
            return Ok(());
        }
        for addr in [self.http_listen, self.raw_listen].into_iter().flatten() {
            if !addr.ip().to_canonical().is_loopback() {
                return Err(Unprotected { addr });
            }
        }
        Ok(())
    }

    /// The cap on thread-served connections when none is configured (each
    /// costs a thread with its stack).
    pub const THREADS_DEFAULT_MAX: usize = 256;

    /// [`Config::busy_poll`] unless set: long enough to span a client's
    /// turnaround on one connection over loopback in a VM, short enough
    /// that a lone request costs little CPU.
    pub const BUSY_POLL_DEFAULT: Duration = Duration::from_micros(50);

    /// [`Config::raw_max_connections`] unless set: a raw connection costs
    /// an fd (a thread on the threads transport) for as long as its sender
    /// is silent (`raw_idle_timeout`), so raw senders alone must not use up
    /// the descriptors HTTP needs.
    pub const RAW_MAX_CONNECTIONS_DEFAULT: usize = 1024;

    /// [`Config::max_queued_bytes`] unless set.
    pub const MAX_QUEUED_BYTES_DEFAULT: usize = 256 << 10;
    /// Default of [`Config::min_send_rate`].
    pub const MIN_SEND_RATE_DEFAULT: u64 = 16 << 10;
    /// Default of [`Config::min_recv_rate`]: far below any real link, far
    /// above a byte per `io_timeout`.
    pub const MIN_RECV_RATE_DEFAULT: u64 = 1 << 10;

    /// The bytes a body must bring in each `io_timeout` window
    /// ([`Config::min_recv_rate`]; 0: no rate). Asked only when a window
    /// ends, never per receive.
    pub(crate) fn min_window_bytes(&self) -> u64 {
        let ms = self.io_timeout.as_millis().min(u64::MAX as u128) as u64;
        self.min_recv_rate.saturating_mul(ms) / 1000
    }

    /// [`Config::tier_window_bytes`] unless set: large enough that a
    /// window is a few of the tier engine's ranged GETs' worth of records,
    /// small enough that 256 connections' two windows each stay within
    /// the default total ([`Config::TIER_FETCH_BYTES_DEFAULT`]) only by
    /// waiting their turn.
    pub const TIER_WINDOW_BYTES_DEFAULT: u64 = 4 << 20;

    /// [`Config::tier_fetch_bytes`] unless set.
    pub const TIER_FETCH_BYTES_DEFAULT: u64 = 64 << 20;

    /// [`Config::max_inflight_bytes`] unless set.
    pub const MAX_INFLIGHT_BYTES_DEFAULT: u64 = 256 << 20;

    /// DRAM of each loop connection not counted against
    /// [`Config::max_inflight_bytes`]: a small request's answer and the
    /// odd head that spans two receives fit, so the hot path never touches
    /// the shared counter; all connections' together are bounded by the
    /// connection cap.
    pub const CONN_FREE_DRAM: usize = 4 << 10;

    /// The cap for the thread-per-connection transport.
    pub fn thread_cap(&self) -> usize {
        self.max_connections.unwrap_or(Self::THREADS_DEFAULT_MAX)
    }

    /// This process's effective uid and gid and its supplementary groups
    /// (the default [`Config::as_user`]).
    pub fn process_identity() -> pktfs_fs::Cred {
        let groups = rustix::process::getgroups().unwrap_or_default();
        pktfs_fs::Cred::new(
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
            groups.into_iter().map(|g| g.as_raw()),
        )
    }

    /// The cap for the io_uring loops (beyond the fd limit they keep).
    pub fn loop_cap(&self) -> usize {
        self.max_connections.unwrap_or(usize::MAX)
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            http_listen: None,
            raw_listen: None,
            s3_listen: None,
            s3_region: "us-east-1".into(),
            raw_dir: "/raw".into(),
            token: None,
            public_read: false,
            public_metrics: false,
            insecure_no_auth: false,
            raw_max_connections: Self::RAW_MAX_CONNECTIONS_DEFAULT,
            read_only: false,
            as_user: Self::process_identity(),
            max_connections: None,
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(30),
            raw_idle_timeout: Duration::from_secs(300),
            rx_chunk: 1 << 20,
            max_header_bytes: 16 << 10,
            persister_min: 2 << 20,
            metrics_path: Some("/metrics".into()),
            io: IoMode::Auto,
            loops: 0,
            // The Volume's ring default (4 x 256 KiB), one number in one place.
            ring_entries: pktfs_engine::RxRingConfig::default().entries,
            ring_entry_bytes: pktfs_engine::RxRingConfig::default().entry_bytes,
            busy_poll: Self::BUSY_POLL_DEFAULT,
            extra: None,
            max_queued_bytes: Self::MAX_QUEUED_BYTES_DEFAULT,
            min_send_rate: Self::MIN_SEND_RATE_DEFAULT,
            min_recv_rate: Self::MIN_RECV_RATE_DEFAULT,
            max_inflight_bytes: Self::MAX_INFLIGHT_BYTES_DEFAULT,
            upload_reserve_bytes: 1 << 20,
            upload_reserve_records: 256,
            tier_window_bytes: Self::TIER_WINDOW_BYTES_DEFAULT,
            tier_fetch_bytes: Self::TIER_FETCH_BYTES_DEFAULT,
            tier_fetch_threads: 4,
            tier_fetch_queue: 256,
        }
    }
}

/// A change the servers made, for whoever caches the namespace (the FUSE
/// mount: `Entry`/`Removed` -> `inval_entry(parent, name)`, `Data` ->
/// `inval_inode(ino)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// `name` in directory `parent` now names `ino` (created or replaced;
    /// also directories created for a PUT's path).
    Entry {
        parent: u64,
        name: &'a [u8],
        ino: u64,
    },
    /// `name` (which named `ino`) was removed from `parent`.
    Removed {
        parent: u64,
        name: &'a [u8],
        ino: u64,
    },
    /// `ino`'s data grew to `size` (raw stream appends; per connection at
    /// most every 100 ms, and within 100 ms of the last append).
    Data { ino: u64, size: u64 },
}

/// The change callback. Called on the connection's thread after the change
/// is durable; it must not block for long.
pub type OnChange = Arc<dyn Fn(Change<'_>) + Send + Sync>;
