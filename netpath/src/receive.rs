//! Receiving: a connection's bytes land in packet-buffer space of the
//! image and become records of a file.
//! - [`stream`]: a connection's input on a blocking socket, received
//!   straight into a reservation (or DRAM when the image has none);
//! - `body`: the one body walker (Content-Length, chunked, aws-chunked,
//!   raw streams) and the pieces a body's data becomes;
//! - `chunked`: the chunked coding's lines;
//! - `coalesce`: small pieces copied together into one record;
//! - `persist`: the threaded transport's persister thread for large bodies;
//! - [`stamped`]: listening and connecting sockets with the kernel's
//!   receive timestamps on from the first byte;
//! - [`to_file`]: the receive-to-file helper (`pktfs recv`): one TCP stream
//!   into one file.

pub(crate) mod body;
pub(crate) mod chunked;
pub(crate) mod coalesce;
pub(crate) mod persist;
pub mod stamped;
pub mod stream;
pub mod to_file;
