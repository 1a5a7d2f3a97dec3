//! The pktfs package's integration tests (its binaries as a person runs
//! them), one test binary (`--test main`): each file here is a module, each
//! test named by its module (`net_cli::...`, `hostile::control::...`);
//! `cargo test -p pktfs --test main -- net_cli::` runs one file's tests.
//! One link instead of one per file.
//!
//! Every test of every file runs in this one process, on libtest's threads
//! beside each other: a test that measures the process or changes what the
//! whole process shares runs alone in a child process
//! ([`harness::alone`]), and no test sets the process's environment, umask
//! or working directory (a child's, through `Command`, is fine). The
//! thousands-of-connections tests take [`many_common::MANY_AT_ONCE`].

// `require!`, for every module.
#[macro_use]
extern crate pktfs_testkit;

// Helpers the test crates share, and this binary's own.
use pktfs_testkit::{fuse_common, harness, net_common, prereq, tmpfs};
mod cli_common;
mod many_common;

mod chain_pcap;
mod cli_conventions;
mod crash_kill;
mod direct_shim;
mod fsx;
mod fuse_cli;
mod fuse_posix_acl;
mod hostile;
mod http_10k;
mod integrity_cli;
mod keys_cli;
mod mount_cycle;
mod net_access_log;
mod net_cli;
mod net_no_uring;
mod offline_cli;
mod pjdfstest;
mod raw_10k;
mod readme_up;
mod recv_cli;
mod rxtime_cli;
mod s3_clients;
mod s3_conformance;
mod send_verify;
mod tier_cli;
mod up_space;

#[test]
fn every_file_here_is_a_module_of_this_binary() {
    harness::every_file_is_a_module(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    );
}
