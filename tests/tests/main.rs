//! pktfs-tests' integration tests, one test binary (`--test main`): each
//! file here is a module, each test named by its module (`net_raw::...`,
//! `hostile::floods::...`); `cargo test -p pktfs-tests --test main --
//! net_raw::` runs one file's tests. One link instead of one per file.
//!
//! Every test of every file runs in this one process, on libtest's threads
//! beside each other: a test that measures the process (its threads,
//! resident memory, open descriptors) or changes what the whole process
//! shares (a panic hook, an abort) runs alone in a child process
//! ([`harness::alone`]), and no test sets the process's environment,
//! umask or working directory (a child's, through `Command`, is fine).

// `require!`, for every module (and as `crate::require!`, for macros).
#[macro_use]
extern crate pktfs_testkit;

// Helpers the test crates share, and this binary's own.
use pktfs_testkit::{fuse_common, harness, net_common, prereq, require};
mod http_model;
mod http_wire;

mod core_open;
mod core_threads;
mod crash_acl;
mod crash_keys;
mod crash_ops;
mod crash_s3;
mod crash_seq;
mod crash_tier;
mod dir_times;
mod direct_holder;
mod direct_stress;
mod docs_claims;
mod fsck_crash;
mod fsck_detect;
mod fsck_fuzz;
mod fsck_lost;
mod fuse_basic;
mod fuse_integrity;
mod fuse_lifecycle;
mod fuse_resources;
mod hostile;
mod integrity;
mod model_prop;
mod net_abuse;
mod net_cas;
mod net_curl;
mod net_fuzz;
mod net_http;
mod net_http_surface;
mod net_metrics;
mod net_mount;
mod net_raw;
mod net_rxtime;
mod net_rxtime_loops;
mod net_s3;
mod net_tx;
mod net_uring;
mod net_volume_race;
mod net_wrk;
mod regression_volume;
mod sparse_open;
mod struct_fuzz;

/// The workspace root.
fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_file_here_is_a_module_of_this_binary() {
    harness::every_file_is_a_module(&root().join("tests/tests"));
}

/// `.ci/run` selects modules of the workspace's test binaries by filter
/// (`cargo test --workspace --test main -- net_raw:: ...`): a filter that
/// names no module would select no test, and pass. Each must name a module
/// of exactly one crate's `main` (one that two crates declared would run
/// twice, the second time unasked).
#[test]
fn ci_filters_name_modules_that_exist() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    // Every crate's one integration-test binary, CRATE/tests/main.rs
    // (this crate's too: its folder is tests/).
    let mut mains = Vec::new();
    for e in std::fs::read_dir(root()).unwrap() {
        let main = e.unwrap().path().join("tests/main.rs");
        if main.is_file() {
            mains.push(main);
        }
    }
    let declared: Vec<(std::path::PathBuf, String)> = mains
        .into_iter()
        .map(|m| {
            let text = std::fs::read_to_string(&m).unwrap();
            (m, text)
        })
        .collect();
    let mut checked = 0;
    // Commands as the shell reads them: comments out, `\` lines joined.
    let script: String = ci
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| match l.strip_suffix('\\') {
            Some(cont) => cont.to_string(),
            None => format!("{l}\n"),
        })
        .collect();
    for line in script.lines().filter(|l| l.contains("cargo test ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(dash) = words.iter().position(|w| *w == "--") else {
            continue;
        };
        assert!(
            words.contains(&"--workspace") && !words.contains(&"-p"),
            "a filtered pass builds with the workspace's features (--workspace, \
             not -p, which resolves them again and rebuilds): {line}"
        );
        let tests: Vec<&str> = words
            .windows(2)
            .filter(|w| w[0] == "--test")
            .map(|w| w[1])
            .collect();
        assert_eq!(tests, ["main"], "the one test binary is `main`: {line}");
        for f in &words[dash + 1..] {
            let m = f
                .strip_suffix("::")
                .unwrap_or_else(|| panic!("{f}: a filter names a module (`NAME::`): {line}"));
            let owners: Vec<_> = declared
                .iter()
                .filter(|(_, text)| text.lines().any(|l| l.trim() == format!("mod {m};")))
                .map(|(p, _)| p.display().to_string())
                .collect();
            assert_eq!(
                owners.len(),
                1,
                "{f} in .ci/run must name a module of exactly one crate's tests/main.rs \
                 (it names {owners:?}): {line}"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, ".ci/run selects no module by filter");
}
