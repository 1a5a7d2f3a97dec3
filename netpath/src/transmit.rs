//! Transmitting: a file goes out by its chain, one record per segment.
//! - [`chain`]: held file ranges to iovecs and `sendmsg`;
//! - [`to_peer`]: a file to a plain TCP peer (`pktfs send`);
//! - `fetch`: tiered bytes fetched off the event loops for GETs.

pub mod chain;
pub(crate) mod fetch;
pub mod to_peer;
