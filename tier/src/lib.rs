//! pktfs tiering: cold chains to an S3-compatible object store.
//!
//! - [`target`]: where an image tiers to (an `s3://` URL);
//! - [`s3`]: the store, a blocking facade over `aws-sdk-s3`;
//! - [`segment`]: the objects tier-out writes (payloads, index, footer);
//! - [`engine`]: the policy thread, tier-out, read-through, collection;
//! - [`snapshot`] and [`restore`]: the metadata snapshot, and an image
//!   rebuilt from it; [`bucket`] finds and fetches it;
//! - [`check`]: `fsck.pktfs --remote`;
//! - `garage` (feature `test-support`): real Garage processes for tests
//!   and benchmarks.
//!
//! docs/TIER.md has the design and the crash argument.

pub mod bucket;
pub mod check;
pub mod engine;
#[cfg(test)]
mod format_doc;
#[cfg(feature = "test-support")]
pub mod garage;
pub mod priority;
pub mod restore;
pub mod s3;
pub mod segment;
pub mod snapshot;
pub mod target;

pub use bucket::restore_from_bucket;
