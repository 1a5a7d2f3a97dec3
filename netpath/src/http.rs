//! HTTP/1.1 and S3: two protocols over one connection core. docs/NETPATH.md
//! describes the surface for clients, docs/S3.md the S3 endpoint.
//!
//! Keep-alive and pipelining: requests on a connection are handled in
//! order; bytes after a request (the next pipelined request) stay in the
//! packet buffer for the next parse. Request heads are parsed by `httparse`
//! straight from the packet buffer they landed in, and skipped.
//!
//! # Layout
//! The connection core reads heads, walks bodies and sends answers; it
//! asks the protocol what each request does and hears back through return
//! values ([`conn::Next`]: answered, body skipped, body received into
//! an unnamed file). From the bottom up:
//! - `head` (what a head says, and where it ends), `cond` (entity tags and
//!   precondition evaluation), `response` (heads and bodies into a
//!   `Vec<u8>`): protocol decisions free of socket I/O;
//! - `conn`: the core: a connection's state, its answers (sent on a
//!   blocking socket, or queued for a loop; tiered ranges a window at a
//!   time), its counters and access log, the unnamed file of its next
//!   upload made ahead, and what it asks a protocol ([`conn::Protocol`],
//!   [`conn::Next`]);
//! - `files`: what both protocols do with the Volume, as the identity
//!   requests act as (permissions, a file's GET, an upload's name);
//! - `plain` and `s3`: the two protocols;
//! - `session` (an event loop's session) and `blocking` (a thread per
//!   connection, with `pace`): the core's two drivers, each walking bodies
//!   with the one body walker (`crate::receive::body`).

mod blocking;
pub(crate) mod cond;
mod conn;
mod files;
pub(crate) mod head;
mod pace;
mod plain;
pub(crate) mod response;
pub(crate) mod s3;
mod session;
pub use conn::{MAX_SPARES, SPARE_MIN_FREE_INODES};

pub(crate) use blocking::serve_connection;
pub(crate) use plain::HttpListener;
pub(crate) use s3::S3Listener;
