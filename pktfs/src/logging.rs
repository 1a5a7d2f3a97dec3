//! Logging: what the Volume and the servers report through `tracing`
//! (damaged data, a volume that stopped, refused images, failed accepts,
//! the error that ended a command).
//!
//! Where it goes: a file when one is named (`--log-file PATH`, or
//! `-o log_file=PATH` for mount); else stderr for a command in the
//! foreground; else, for a detached mount daemon (whose stderr is
//! /dev/null once it has reported ready), the systemd journal when there is
//! one, or else a file in a state directory ([`default_daemon_file`]). The
//! level is `--log-level` (or `-o log=LEVEL`), else `RUST_LOG`, else info
//! (fuser's own messages: errors only).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// What the command line asks for.
#[derive(Debug, Clone, Default)]
pub struct LogSpec {
    /// A level (`error`, `warn`, `info`, `debug`, `trace`) or a `RUST_LOG`
    /// directive list.
    pub level: Option<String>,
    pub file: Option<PathBuf>,
}

/// A clap value parser for `--log-level` / `-o log=`. A bare word that is
/// not a level is refused: `EnvFilter` would take it as a target name
/// (`warning`, `inf`: "log everything of target `warning`"), which turns
/// every other log off without a word.
pub fn parse_level(s: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let bare = !d.contains('=') && !d.contains("::") && !d.contains('[');
        let level = LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d))
            || matches!(d, "0" | "1" | "2" | "3" | "4" | "5");
        if bare && !level {
            let hint = match d.to_ascii_lowercase().as_str() {
                "warning" => " (did you mean warn?)",
                "err" => " (did you mean error?)",
                "inf" | "information" => " (did you mean info?)",
                "none" | "quiet" => " (did you mean off?)",
                _ => "",
            };
            return Err(format!(
                "{d:?} is not a log level{hint}: error, warn, info, debug, trace or off, \
                 or directives like info,pktfs::access=off"
            ));
        }
    }
    EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("not a log level (error, warn, info, debug, trace): {e}"))
}

/// Where the logs went, for a person: "stderr", "the systemd journal",
/// or a path.
static WHERE: OnceLock<String> = OnceLock::new();

/// Where the logs go (after [`init`]).
pub fn destination() -> &'static str {
    WHERE.get().map_or("stderr", String::as_str)
}

/// True when logs are not on this command's stderr (so an error must be
/// logged as well as printed).
pub fn away_from_stderr() -> bool {
    destination() != "stderr"
}

/// The journal's socket: the journal is there when it is.
const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// A daemon's log file when there is no journal and none was named:
/// /var/log/pktfs.log for root, `$XDG_STATE_HOME/pktfs/pktfs.log` (or
/// ~/.local/state/pktfs/pktfs.log) for others.
pub fn default_daemon_file() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/var/log/pktfs.log");
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    state.join("pktfs").join("pktfs.log")
}

fn open_file(p: &Path) -> Result<std::fs::File, String> {
    if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| format!("log file {}: {e}", d.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| format!("log file {}: {e}", p.display()))
}

/// Install the subscriber; call once, first thing after parsing. `daemon`:
/// this process is a detached mount daemon.
pub fn init(spec: &LogSpec, daemon: bool) -> Result<(), String> {
    install(spec, daemon)?;
    if away_from_stderr() {
        // A panic's message goes to stderr, which a daemon no longer has:
        // log it too.
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            tracing::error!("{info}");
            default(info);
        }));
    }
    Ok(())
}

fn install(spec: &LogSpec, daemon: bool) -> Result<(), String> {
    let filter = match &spec.level {
        Some(l) => EnvFilter::try_new(l).map_err(|e| format!("log level {l:?}: {e}"))?,
        // fuser's own warnings are left out by default: after an external
        // `umount` it warns that its own unmount failed (the kernel has
        // already done it), which reads as a problem in a daemon's log.
        None => {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,fuser=error"))
        }
    };
    let fmt = tracing_subscriber::fmt::layer().with_target(false);
    let file = match (&spec.file, daemon) {
        (Some(f), _) => Some(f.clone()),
        (None, true) if Path::new(JOURNAL_SOCKET).exists() => match tracing_journald::layer() {
            Ok(j) => {
                let _ = tracing_subscriber::registry()
                    .with(filter)
                    .with(j.with_syslog_identifier("pktfs".into()))
                    .try_init();
                let _ = WHERE.set("the systemd journal (journalctl -t pktfs)".into());
                return Ok(());
            }
            Err(_) => Some(default_daemon_file()),
        },
        (None, true) => Some(default_daemon_file()),
        (None, false) => None,
    };
    // A daemon must not fail to start because its default log place is
    // not writable (a user without a home directory): fall back to the
    // temporary directory. A file the user named is not second-guessed.
    let file = match (file, &spec.file) {
        (Some(p), None) if open_file(&std::path::absolute(&p).unwrap_or(p.clone())).is_err() => {
            Some(
                std::env::temp_dir().join(format!("pktfs-{}.log", nix::unistd::geteuid().as_raw())),
            )
        }
        (f, _) => f,
    };
    match file {
        Some(p) => {
            // Absolute: a daemon changes to / after this.
            let p = std::path::absolute(&p).unwrap_or(p);
            let f = open_file(&p)?;
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(fmt.with_ansi(false).with_writer(Mutex::new(f)))
                .try_init();
            let _ = WHERE.set(p.display().to_string());
        }
        None => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(fmt.with_ansi(ansi).with_writer(std::io::stderr))
                .try_init();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_level;

    #[test]
    fn levels_and_directives_pass_and_bare_words_do_not() {
        for ok in [
            "info",
            "WARN",
            "off",
            "3",
            "info,pktfs::access=off",
            "pktfs=debug",
            "warn,netpath[conn]=trace",
        ] {
            assert_eq!(parse_level(ok).as_deref(), Ok(ok), "{ok}");
        }
        for (bad, says) in [
            ("warning", "did you mean warn"),
            ("nope", "not a log level"),
            ("info,inf", "did you mean info"),
        ] {
            let e = parse_level(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
