//! Transmitting: a file goes out by its chain, one iovec per record to
//! `sendmsg` (TCP then cuts the stream into segments of its own; no record
//! boundary shows on the wire).
//! - [`chain`]: held file ranges to iovecs and `sendmsg`;
//! - [`to_peer`]: a file to a plain TCP peer (`pktfs send`);
//! - `fetch`: tiered bytes fetched off the event loops for GETs.

pub mod chain;
pub(crate) mod fetch;
pub mod to_peer;
