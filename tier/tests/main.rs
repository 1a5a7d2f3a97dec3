//! pktfs-tier's integration tests, one test binary (`--test main`): each
//! file here is a module (`cargo test -p pktfs-tier --test main --
//! s3_garage::` runs one file's tests).

// `require!`, for every module.
#[macro_use]
extern crate pktfs_testkit;

use pktfs_testkit::{harness, prereq};

mod engine_garage;
mod restore_image;
mod s3_garage;
mod snapshot_restore;

#[test]
fn every_file_here_is_a_module_of_this_binary() {
    harness::every_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
