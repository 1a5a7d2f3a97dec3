//! Receiving: a connection's bytes land in packet-buffer space of the
//! image and become records of a file.
//! - [`stream`]: a connection's input, received straight into a
//!   reservation (or DRAM when the image has none), consumed by a protocol;
//! - [`coalesce`]: small pieces copied together into one record;
//! - [`stamped`]: listening and connecting sockets with the kernel's
//!   receive timestamps on from the first byte;
//! - [`to_file`]: the receive-to-file helper (`pktfs recv`): one TCP stream
//!   into one file.

pub(crate) mod coalesce;
pub mod stamped;
pub mod stream;
pub mod to_file;
