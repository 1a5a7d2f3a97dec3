//! The helpers the integration tests of every crate share. Each test crate
//! takes this as a dev-dependency and names the modules it uses at the
//! root of its one test binary (`use pktfs_testkit::{harness, prereq};`),
//! so its test files reach them as `crate::harness`, `super::prereq`;
//! `#[macro_use] extern crate pktfs_testkit;` brings [`require!`].
//!
//! `fuse_common` and `net_common` need the workspace's own crates, so they
//! are features (`fuse`, `net`): without them this crate depends on none,
//! and a workspace crate's tests can use it without a second copy of that
//! crate (Cargo.toml says why).

pub mod harness;
pub mod prereq;
pub mod skipped;
pub mod tmpfs;

#[cfg(feature = "fuse")]
pub mod fuse_common;
#[cfg(feature = "net")]
pub mod net_common;
#[cfg(feature = "s3")]
pub mod s3_common;
