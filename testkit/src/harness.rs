//! What the tests need from sharing one test binary (each test crate's
//! integration tests are the modules of one `main`, so one link instead of
//! one per file): the running test's full name, a test that measures the
//! process run alone in a child process, and a check that no test file is
//! left out of the binary.
//!
//! Every test crate's binary uses it; it needs only std.

use std::path::Path;

/// The running test's full name (`module::path::test`, as libtest lists
/// it and `--exact` matches it): libtest names each test's thread so.
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .expect("libtest names each test's thread")
        .to_string()
}

/// The full name of test `f` of the module whose `module_path!()` is
/// `module` (the crate's own name dropped, as libtest names tests).
pub fn name_in(module: &str, f: &str) -> String {
    match module.split_once("::") {
        Some((_, m)) => format!("{m}::{f}"),
        None => f.to_string(),
    }
}

/// Set, in the child process [`alone`] starts, to the name of the test it
/// runs.
const ALONE: &str = "PKTFS_TEST_ALONE";

/// Run `body` alone in a child process: this test binary, this one test
/// (`--exact`, by its full name), with the rest of the binary's tests left
/// out. For a test that measures the process (its threads, resident
/// memory, open descriptors) or changes something the whole process
/// shares (a panic hook, an abort on a hang): every other test of the
/// binary runs beside it on libtest's threads. The child's output is shown
/// with the verdict.
///
/// Check prerequisites (`require!`) before calling this: a SKIPPED line
/// written in the child would reach only the parent's captured output.
pub fn alone(body: impl FnOnce()) {
    let name = test_name();
    if std::env::var(ALONE).as_deref() == Ok(name.as_str()) {
        body();
        return;
    }
    // /proc/self/exe, not the path: a concurrent build may have replaced
    // the file since this process started.
    let out = std::process::Command::new("/proc/self/exe")
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, &name)
        .output()
        .expect("run the test in a child process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("--- {name} in a child process ---\n{text}");
    assert!(
        out.status.success(),
        "{name} failed in its child process:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "{name}: the child process ran no test:\n{text}"
    );
}

/// Every `.rs` file under `tests` (a crate's `tests/` directory) is a
/// module of the one test binary: a file directly in it is declared in
/// `main.rs`, a file in `NAME/` in `NAME.rs`. (With `autotests = false` a
/// file nobody declares would be neither built nor run.)
pub fn every_file_is_a_module(tests: &Path) {
    let mut missing = Vec::new();
    let mut dirs = vec![tests.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let parent = if dir == tests {
            tests.join("main.rs")
        } else {
            dir.with_extension("rs")
        };
        let declared = std::fs::read_to_string(&parent).unwrap_or_default();
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            let Some(stem) = p
                .extension()
                .filter(|x| *x == "rs")
                .and_then(|_| p.file_stem()?.to_str())
            else {
                continue;
            };
            if p == tests.join("main.rs") {
                continue;
            }
            let decl = format!("mod {stem};");
            if !declared.lines().any(|l| {
                let l = l.trim();
                l == decl || l.strip_suffix(&decl).is_some_and(|v| v.trim() == "pub")
            }) {
                missing.push(format!("{} (in {})", p.display(), parent.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files the test binary does not build (declare each as a module): {missing:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_is_named_without_its_crate() {
        assert_eq!(name_in("pktfs_tests::net_raw", "get"), "net_raw::get");
        assert_eq!(name_in("main", "t"), "t");
    }

    /// A file declared nowhere is found, in `tests/` and in a directory of
    /// submodules; `mod x;` and `pub mod x;` both declare it.
    #[test]
    fn an_undeclared_file_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::create_dir(t.join("net")).unwrap();
        std::fs::write(t.join("main.rs"), "mod a;\npub mod net;\n").unwrap();
        std::fs::write(t.join("a.rs"), "").unwrap();
        std::fs::write(t.join("net.rs"), "mod x;\n").unwrap();
        std::fs::write(t.join("net/x.rs"), "").unwrap();
        std::fs::write(t.join("notes.txt"), "").unwrap();
        every_file_is_a_module(t);

        std::fs::write(t.join("net/y.rs"), "").unwrap();
        std::fs::write(t.join("b.rs"), "").unwrap();
        let e = std::panic::catch_unwind(|| every_file_is_a_module(t)).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.contains("b.rs") && msg.contains("y.rs"), "{msg}");
        assert!(!msg.contains("a.rs") && !msg.contains("x.rs"), "{msg}");
    }
}
