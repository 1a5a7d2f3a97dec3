//! The tests skipped for a missing prerequisite, counted where libtest's
//! own summary cannot count them.
//!
//! libtest decides "ignored" when it lists the tests, before any runs; a
//! test that finds out at run time that its tool is missing can only
//! return, and libtest then counts it as passed. So every skip goes through
//! [`skip`]: it prints the SKIPPED line at once (past the output capture)
//! and keeps it, and when the test binary exits, after libtest's
//! `test result:` line, a tally names each skipped test and says it was not
//! run. A local `cargo test` with a tool missing thus ends with
//!
//! ```text
//! test result: ok. 212 passed; 0 failed; 1 ignored; ...
//!
//! *** 3 of the tests counted as passed above were SKIPPED, not run (...)
//! ***   mount::fuse_cases::rename_over: /dev/fuse is not usable (...)
//! ```
//!
//! Under CI ([`crate::prereq::in_ci`]) nothing is skipped: the callers fail
//! the test instead, so the tally never prints there.
//!
//! The tally runs from `atexit`: std has no exit hook, and libtest ends
//! the process itself after its summary (returning from `main`, or
//! `process::exit` when a test failed), either of which runs the C
//! library's exit handlers.
#![allow(unsafe_code)]

use std::io::Write;
use std::sync::{Mutex, Once};

/// Each skip's test and reason, in the order they happened. A test binary
/// has at most a few hundred tests, each skipping at most once per part.
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static REGISTER: Once = Once::new();

/// Skip `test` for `why`: print the SKIPPED line now and name the test
/// again in the tally at exit.
pub fn skip(test: &str, why: &str) {
    // std::io::stderr() directly, not eprintln!: libtest captures the
    // macros' output of a passing test, and this line must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: {why} (with CI=true this is a failure)"
    );
    SKIPPED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push((test.to_string(), why.to_string()));
    REGISTER.call_once(|| {
        // SAFETY: `atexit` takes a function pointer with the C ABI and no
        // arguments, which `tally` is; it keeps the pointer until the
        // process exits, and `tally` is a plain fn that lives that long.
        // `tally` never unwinds (an unwinding panic out of an extern "C"
        // fn aborts, and it does nothing that panics: try_lock, and
        // writes whose errors are ignored).
        let registered = unsafe { libc::atexit(tally) } == 0;
        if !registered {
            let _ = writeln!(
                std::io::stderr(),
                "*** (the tally of skipped tests could not be registered; \
                 look for the SKIPPED lines above)"
            );
        }
    });
}

/// The lines the tally prints for `skipped`, none when nothing was.
fn tally_lines(skipped: &[(String, String)]) -> Vec<String> {
    if skipped.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "*** {} of the tests counted as passed above {} SKIPPED, not run \
         (a prerequisite is missing; libtest has no run-time ignore; with \
         CI=true each is a failure):",
        skipped.len(),
        if skipped.len() == 1 { "was" } else { "were" }
    )];
    lines.extend(
        skipped
            .iter()
            .map(|(test, why)| format!("***   {test}: {why}")),
    );
    lines
}

extern "C" fn tally() {
    // try_lock: a test thread still running when the process exits (one
    // libtest gave up on) may hold the lock, and waiting here would hang
    // the exit.
    let Ok(skipped) = SKIPPED.try_lock() else {
        let _ = writeln!(
            std::io::stderr(),
            "\n*** some tests were SKIPPED, not run: see the SKIPPED lines above"
        );
        return;
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err);
    for line in tally_lines(&skipped) {
        let _ = writeln!(err, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_names_every_skipped_test_and_its_reason() {
        assert!(tally_lines(&[]).is_empty());
        let one = tally_lines(&[("a::b".into(), "no `nc`".into())]);
        assert_eq!(one.len(), 2);
        assert!(
            one[0].starts_with("*** 1 of the tests counted as passed above was SKIPPED, not run")
        );
        assert_eq!(one[1], "***   a::b: no `nc`");
        let two = tally_lines(&[("a".into(), "x".into()), ("b".into(), "y".into())]);
        assert!(two[0].starts_with("*** 2 of the tests counted as passed above were SKIPPED"));
        assert_eq!(&two[1..], ["***   a: x", "***   b: y"]);
    }
}
