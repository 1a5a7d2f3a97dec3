//! netpath: TCP data lands in packet buffers as file extents, and files go
//! back out by their chains (docs/DESIGN.md, docs/NETPATH.md; PASTE,
//! HotNets'16).
//!
//! # Receive
//! A connection's bytes are `recv()`ed straight into free packet-buffer
//! space of the image ([`pktfs_fs::Volume::rx_reserve`] +
//! [`pktfs_fs::RxBuf::recv_timestamped`]): they move from the kernel into
//! PM once, with no staging buffer. Request headers and chunk framing that
//! land in the buffer are skipped by the record's offset, as StackMap and
//! PASTE skip TCP/IP headers; the body bytes become pieces (CRC32C computed
//! and cache lines flushed right after the `recv`, while they are hot; the
//! stream byte position as the sequence number) and are linked into the
//! file by one commit per batch, *before* the client is told "stored".
//!
//! A received record holds the bytes of one receive (one `recv`/`recvmsg`
//! or io_uring completion): at most the room that receive was given, the
//! connection's reservation or the ring's buffer entry, never more than
//! 256 KiB (the longest slice a record names). Receives under 2 KiB are copied
//! together into one record ([`receive`]'s `coalesce`), and the
//! thread-per-connection HTTP transport takes a body in pieces of at least
//! 16 KiB, which may span receives. A record is not a TCP segment. Its time
//! is the kernel's receive time (SO_TIMESTAMPNS, set on every listener
//! before it listens) of the receive that brought its first byte, for TCP
//! the newest segment that receive took, and the record carries
//! `FLAG_KERNEL_TIME`; where the kernel gave no stamp it is the receiver's
//! clock and the flag is clear ([`pktfs_fs::RxTime`]). docs/NETPATH.md,
//! "What a received record is".
//!
//! # Transmit
//! A file goes out by walking its chain: one iovec per record handed to
//! `sendmsg`, read straight from the mapping (see [`transmit::chain`] for
//! why `sendmsg` and not `sendfile`, and how buffer space in flight is kept
//! from reuse). TCP cuts the stream into segments of its own: the wire
//! does not show record boundaries. [`transmit::to_peer`] (`pktfs send`)
//! checks every record's CRC32C before the first byte goes out, whatever
//! the verify mode.
//!
//! # Servers
//! [`Services::start`] runs an HTTP/1.1 server and an S3 endpoint ([`http`])
//! and a raw stream server ([`raw`]) over an `Arc<Volume>`, on the event
//! loops of [`loops`]
//! (io_uring, or epoll where io_uring is not usable) or a thread per
//! connection, optionally reporting every change
//! to a callback (the FUSE mount invalidates the kernel's caches with it).
//! [`transmit::to_peer::send_file`] streams a file to a plain TCP peer.
//!
//! # Layering
//! `server` (listeners, threads, shutdown) is on top; `http` and `raw`
//! serve one connection each with the context in `shared` (volume,
//! configuration, metrics) and never call back up. They serve on a thread
//! of their own (`http::blocking`, `raw`) or as a session of an event loop
//! (`loops`, `http::session`); both receive through `receive` (one body
//! walker, `receive::body`) and send through `transmit`. netpath reaches the
//! image only through the Volume's typed handles (`RxBuf`, `RxPiece`,
//! `TxHold`, `TmpFile`).

pub mod config;
pub mod control;
pub mod http;
pub mod loops;
mod metrics;
pub mod path;
pub mod raw;
pub mod receive;
pub mod server;
mod shared;
pub mod transmit;
mod util;

pub use config::{Change, Config, Extra, ExtraStat, IoMode, OnChange, Token, Unprotected};
pub use server::{Services, Stats};
