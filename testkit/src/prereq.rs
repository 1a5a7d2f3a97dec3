//! What a test needs from the machine (a tool on PATH, a usable /dev/fuse,
//! root, a user), and the one rule for when it is missing: under CI (the
//! `CI` environment variable set, as `.ci/run` runs) the test FAILS, naming
//! what is missing and how to install it; elsewhere it is skipped, loudly.
//!
//! libtest has no run-time "ignored", so a local skip still counts as
//! passed in cargo's summary. A skip therefore goes through
//! [`crate::skipped::skip`]: a SKIPPED line on the real stderr at once,
//! past libtest's output capture, and a tally after libtest's summary that
//! names every test skipped and says it was not run.
//!
//! Every test crate's tests use it through `require!` (exported at this
//! crate's root), and it needs only std and rustix.

use std::path::{Path, PathBuf};

/// A prerequisite: `Err` says what is missing and how to get it.
pub type Check = Result<(), String>;

/// True under CI: `CI` set to anything but "", "0" or "false".
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// Where `cmd` is on PATH.
pub fn on_path(cmd: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(cmd))
        .find(|p| p.is_file())
}

/// A tool `cargo install` put in place: on PATH, or in ~/.cargo/bin
/// (which a shell running the tests may not have on PATH).
pub fn cargo_bin(cmd: &str) -> Option<PathBuf> {
    let home = std::env::var("HOME")
        .map(|h| PathBuf::from(h).join(".cargo/bin").join(cmd))
        .ok();
    on_path(cmd).or(home.filter(|p| p.is_file()))
}

/// How to install each tool the tests run (the packages `.ci/run` installs).
fn install_hint(cmd: &str) -> &'static str {
    match cmd {
        "curl" => "apt-get install -y curl",
        "nc" => "apt-get install -y netcat-openbsd",
        "fusermount3" => "apt-get install -y fuse3",
        "runuser" | "fallocate" => "apt-get install -y util-linux",
        "getfacl" | "setfacl" => "apt-get install -y acl",
        "getfattr" | "setfattr" => "apt-get install -y attr",
        "rsync" => "apt-get install -y rsync",
        "tar" => "apt-get install -y tar",
        "rclone" => "apt-get install -y rclone",
        "s3fs" => "apt-get install -y s3fs",
        _ => "install it (see .ci/run)",
    }
}

/// A condition the test found out itself; `missing` says what is missing
/// when it does not hold.
pub fn holds(ok: bool, missing: impl FnOnce() -> String) -> Check {
    if ok {
        Ok(())
    } else {
        Err(missing())
    }
}

/// `cmd` is on PATH.
pub fn tool(cmd: &str) -> Check {
    holds(on_path(cmd).is_some(), || {
        format!("`{cmd}` is not on PATH ({})", install_hint(cmd))
    })
}

/// A file a test runs (a binary installed elsewhere than PATH).
pub fn file(p: &Path, how: &str) -> Check {
    holds(p.is_file(), || {
        format!("{} is missing ({how})", p.display())
    })
}

/// The tests run as root (they mount, switch users).
pub fn root() -> Check {
    holds(rustix::process::geteuid().is_root(), || {
        "not running as root (run the tests as root, as .ci/run does)".into()
    })
}

/// A FUSE mount can be made by this process: /dev/fuse opens read-write,
/// and an ordinary user has fusermount3.
pub fn fuse() -> Check {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        return Err(format!(
            "/dev/fuse is not usable ({e}; `modprobe fuse`, apt-get install -y fuse3, \
             and in a container pass the device through, e.g. --device /dev/fuse)"
        ));
    }
    if !rustix::process::geteuid().is_root() {
        tool("fusermount3")?;
    }
    Ok(())
}

/// The local user `name` exists.
pub fn user(name: &str) -> Check {
    holds(user_id(name).is_some(), || {
        format!("no user `{name}` (useradd -M {name})")
    })
}

/// The uid of the local user `name`, from /etc/passwd.
pub fn user_id(name: &str) -> Option<u32> {
    std::fs::read_to_string("/etc/passwd").ok().and_then(|s| {
        s.lines()
            .find(|l| l.split(':').next() == Some(name))
            .and_then(|l| l.split(':').nth(2)?.parse().ok())
    })
}

/// Apply the rule to `checks`: true if all are met. Otherwise, under CI,
/// panic (the test fails) with every missing prerequisite; elsewhere skip
/// it ([`crate::skipped::skip`]: a SKIPPED line now, a tally at exit) and
/// return false.
#[track_caller]
pub fn met(checks: &[Check]) -> bool {
    part_met("", checks)
}

/// [`met`] for one part of a test (`part` names it in the message): the
/// caller leaves that part out when this returns false.
#[track_caller]
pub fn part_met(part: &str, checks: &[Check]) -> bool {
    let missing: Vec<&str> = checks
        .iter()
        .filter_map(|c| c.as_ref().err().map(String::as_str))
        .collect();
    if missing.is_empty() {
        return true;
    }
    let mut test = std::thread::current()
        .name()
        .unwrap_or("<unnamed test>")
        .to_string();
    if !part.is_empty() {
        test = format!("{test} (the part: {part})");
    }
    fail_or_skip(&test, &missing.join("; "));
    false
}

/// The rule for a test that cannot run for `why`: under CI it fails (a
/// panic naming what is missing); elsewhere it is skipped
/// ([`crate::skipped::skip`]) and the caller returns.
#[track_caller]
pub fn fail_or_skip(test: &str, why: &str) {
    if in_ci() {
        panic!("{test}: a prerequisite is missing under CI (a failure, not a skip): {why}");
    }
    crate::skipped::skip(test, why);
}

/// Return from the calling test unless every prerequisite is met
/// ([`met`]: under CI a missing one fails the test instead).
#[macro_export]
macro_rules! require {
    ($($check:expr),+ $(,)?) => {
        if !$crate::prereq::met(&[$($check),+]) {
            return;
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn met_prerequisites_run_the_test() {
        assert!(met(&[Ok(()), holds(true, || unreachable!())]));
    }

    /// Not a test on its own: the child process the next test runs, with
    /// a prerequisite missing as a test with a missing tool has.
    #[test]
    #[ignore = "the child process of a_missing_prerequisite_is_tallied_or_fails_under_ci"]
    fn skipping_child() {
        let missing = || Err("no `frobnicate` (the tally's own test)".to_string());
        assert!(!part_met("the check", &[Ok(()), missing()]));
    }

    /// This very binary, run with only the child selected: with CI unset,
    /// libtest counts the child as passed and, after its summary, the
    /// tally names it as skipped and not run; with CI=true the child fails,
    /// saying what is missing, and nothing is tallied.
    #[test]
    fn a_missing_prerequisite_is_tallied_or_fails_under_ci() {
        let child = |ci: Option<&str>| {
            let exe = std::env::current_exe().expect("the test binary's path");
            // One stream, so the order of libtest's summary (stdout) and
            // the tally (stderr) shows.
            let mut cmd = Command::new("sh");
            cmd.args(["-c", "exec \"$0\" \"$@\" 2>&1"]).arg(exe).args([
                "--ignored",
                "--exact",
                "prereq::tests::skipping_child",
            ]);
            match ci {
                Some(v) => cmd.env("CI", v),
                None => cmd.env_remove("CI"),
            };
            let out = cmd.output().expect("run the test binary again");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        let name = "prereq::tests::skipping_child (the part: the check)";
        let why = "no `frobnicate` (the tally's own test)";

        let (ok, text) = child(None);
        assert!(ok, "{text}");
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
        };
        let line = at(&format!(
            "*** SKIPPED {name}: {why} (with CI=true this is a failure)"
        ));
        let summary = at("test result: ok. 1 passed; 0 failed");
        let tally = at("*** 1 of the tests counted as passed above was SKIPPED, not run");
        let named = at(&format!("***   {name}: {why}"));
        assert!(line < summary && summary < tally && tally < named, "{text}");

        let (ok, text) = child(Some("true"));
        assert!(!ok, "{text}");
        assert!(
            text.contains(&format!(
                "{name}: a prerequisite is missing under CI (a failure, not a skip): {why}"
            )),
            "{text}"
        );
        assert!(!text.contains("SKIPPED"), "{text}");
    }

    #[test]
    fn require_returns_before_the_rest_of_the_test() {
        fn body(ran: &mut bool) {
            crate::require!(Ok(()));
            *ran = true;
        }
        let mut ran = false;
        body(&mut ran);
        assert!(ran);
    }
}
