//! fsck.pktfs's integration tests, one test binary (`--test main`): each
//! file here is a module.

use pktfs_testkit::harness;

mod cli;

#[test]
fn every_file_here_is_a_module_of_this_binary() {
    harness::every_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
