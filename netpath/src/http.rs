//! HTTP/1.1: PUT/POST store, GET/HEAD send (with Range and conditional
//! requests), DELETE removes, a directory lists itself (text, or JSON for
//! `Accept: application/json`), and the metrics path serves Prometheus
//! metrics. docs/NETPATH.md describes the surface for clients.
//!
//! Keep-alive and pipelining: requests on a connection are handled in
//! order; bytes after a request (the next pipelined request) stay in the
//! packet buffer for the next parse. Request heads are parsed by `httparse`
//! straight from the packet buffer they landed in, and skipped.
//!
//! # Storing
//! `PUT`/`POST /path` receives the body into an unnamed file
//! ([`pktfs_fs::Volume::tmpfile`], freed when dropped unnamed): body bytes
//! become pieces where they landed (after the head, between chunk framing)
//! and are committed in batches of at most one reservation; the last batch
//! is committed together with the file's name ([`pktfs_fs::Volume::rx_link`],
//! one commit, replacing an existing file atomically unless the request
//! says `If-None-Match: *`), so a small upload costs one commit. Only then
//! is `201 Created` (or `204` for a replacement) sent. An upload that does
//! not complete (client gone, timeout, bad framing, no space) is freed and
//! never visible; after a crash an unnamed file is gone by construction.
//! Missing parent directories are created at that point, after the body
//! is stored.
//!
//! # Status codes
//! 304 not modified (If-None-Match / If-Modified-Since on GET/HEAD); 400
//! malformed request or unsafe path; 401 missing/wrong bearer token (any
//! method, unless a public flag opens reads: `auth`); 403 the identity
//! requests act as (`--as-user`) lacks a mode or ACL permission (`perm`);
//! 404 no such file;
//! 405 change on a read-only server, PUT on `/`, or a change to the
//! metrics path; 408 head or body too slow; 409 PUT
//! onto a directory, through a non-directory, or DELETE of a non-empty
//! directory; 411 PUT without a length; 412 a precondition failed
//! (If-Match, If-None-Match on a change, If-Unmodified-Since); 413 file
//! too large; 416 unsatisfiable range; 417 unknown expectation; 431 head
//! too large; 500 damaged data; 501 unknown method or transfer coding;
//! 503 over the connection cap; 507 body larger than the free space (and
//! nothing is left behind).
//!
//! # Layout
//! Protocol decisions are free of socket I/O so another transport can
//! reuse them: `head` (what a head says, and where it ends), `auth` (the
//! token rules), `chunked`
//! (the chunked coding's lines), `cond` (entity tags and
//! precondition evaluation), `response` (heads and bodies into a
//! `Vec<u8>`). The blocking-socket transport is `conn` (the per-connection
//! loop, counters, access log), `framing` (bodies), `upload` (PUT/POST)
//! and `handlers` (GET/HEAD/DELETE/listings/metrics); `session` runs
//! the same handlers on an io_uring loop, and `spare` makes the unnamed
//! file of a connection's next upload ahead of time (both transports).

mod auth;
pub(crate) mod cond;
mod conn;
mod framing;
mod handlers;
pub(crate) mod head;
mod on_loop;
mod pace;
mod perm;
pub(crate) mod response;
mod spare;
mod tiered;
pub use spare::{MAX_SPARES, SPARE_MIN_FREE_INODES};
pub(crate) mod s3;
mod upload;

pub(crate) use conn::serve_connection;
pub(crate) use on_loop::HttpProtocol;
