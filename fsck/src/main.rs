//! fsck.pktfs: check (and repair) a pktfs image.
//!
//! Exit codes as e2fsck: 0 clean, 1 errors corrected, 4 errors left
//! uncorrected, 8 operational error, 16 usage error, 32 cancelled
//! (Ctrl-C, SIGTERM).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{CommandFactory, Parser};

use pktfs_fs::media::{MapOptions, MediaError, Pm};
use pktfs_fsck::{exit, Mode, Options, Report};
use pktfs_support::gendocs;
use pktfs_support::CliError;

#[derive(Parser, Debug)]
#[command(
    name = "fsck.pktfs",
    version,
    about = "Check and repair a pktfs image",
    after_help = "Exit status (as e2fsck): 0 clean, 1 errors corrected, 4 errors left \
uncorrected, 8 operational error, 16 usage error, 32 cancelled."
)]
struct Args {
    /// Check only; open the image read-only and change nothing (works on a mounted image).
    #[arg(short = 'n', conflicts_with_all = ["yes", "preen"])]
    no: bool,
    /// Repair everything that can be repaired, without asking.
    #[arg(short = 'y', conflicts_with = "preen")]
    yes: bool,
    /// Preen: repair only what loses nothing, as at boot; exit 4 (run fsck
    /// manually) if something is left.
    #[arg(short = 'p', visible_short_alias = 'a')]
    preen: bool,
    /// With -y: unlink damaged data ranges, and leave ranges lost where a
    /// file's data chain broke unmarked (either reads back as a hole), instead
    /// of keeping them marked damaged (reads of them fail with EIO).
    #[arg(long)]
    drop_damaged: bool,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar, and only problems on stdout.
    #[arg(short, long)]
    quiet: bool,
    /// Most repair passes (each pass rescans the image).
    #[arg(long, default_value_t = 8)]
    max_passes: u32,
    /// Also check the tier: every remote record's object in
    /// s3://BUCKET/PREFIX exists, is a pktfs segment, and holds the
    /// record's bytes under its CRC32C; list objects nothing references.
    /// Credentials and endpoint as AWS tools take them (AWS_* variables,
    /// ~/.aws/config and credentials).
    #[arg(long, value_name = "URL")]
    remote: Option<String>,
    /// With --remote: fetch and check every remote record's bytes, not
    /// only what the segment indexes vouch for.
    #[arg(long, requires = "remote")]
    remote_deep: bool,
    /// The image: a file, a file on /dev/shm, or a DAX device.
    image: PathBuf,
}

/// Parse the command line; a usage error exits 16 as e2fsck's does (clap
/// would exit 2).
fn args() -> Args {
    match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    }
}

/// Ctrl-C or SIGTERM cancels with e2fsck's 32 (not the shell's 130). A
/// repair stopped here is as safe as one stopped by a crash: every change
/// fsck makes is committed through the journal. Signals are blocked before
/// any thread starts, so only this thread takes them.
fn cancel_on_signals() {
    use nix::sys::signal::{SigSet, Signal};
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGINT);
    sigs.add(Signal::SIGTERM);
    if sigs.thread_block().is_err() {
        return; // the default action (death by the signal) stays
    }
    let spawned = std::thread::Builder::new()
        .name("fsck-signals".into())
        .spawn(move || {
            if let Ok(sig) = sigs.wait() {
                eprintln!("fsck.pktfs: cancelled ({sig})");
                std::process::exit(exit::CANCELED);
            }
        });
    if spawned.is_err() {
        let _ = sigs.thread_unblock();
    }
}

fn main() -> std::process::ExitCode {
    pktfs_support::finish("fsck.pktfs", run(), |_| {})
}

/// fsck's work; its status is e2fsck's bits ([`exit`]).
fn run() -> Result<(), CliError> {
    if let Some(dir) = gendocs::requested() {
        return gendocs::generate(Args::command(), &dir).map_err(|message| CliError::FailedWith {
            status: exit::OPERATIONAL as u8,
            message,
        });
    }
    let a = args();
    cancel_on_signals();
    let mode = if a.yes {
        Mode::Yes
    } else if a.preen {
        Mode::Preen
    } else {
        // -n is also the default: never write unless asked to.
        let _ = a.no;
        Mode::Check
    };
    let opts = Options {
        mode,
        progress: !a.quiet && !a.json && std::io::stderr().is_terminal(),
        max_passes: a.max_passes,
        drop_damaged: a.drop_damaged,
    };
    let read_only = mode == Mode::Check;
    // -n takes the lock shared: a mount or server writing the image holds
    // it exclusively, and reading a live image behind its back could
    // report half-done changes as damage. `pktfs scrub` checks a live one.
    let map = MapOptions {
        read_only,
        no_populate: true,
        ..Default::default()
    };
    // Right after `umount`, the mount daemon may still be closing the
    // image: wait for it (a bounded time) rather than report it in use.
    let opened = pktfs_support::holder::wait_for_release(
        &a.image,
        || Pm::open(&a.image, &map),
        |e| matches!(e, pktfs_fs::media::MediaError::Locked { .. }),
        |note| eprintln!("fsck.pktfs: {note}"),
    );
    let mut report = match opened {
        Ok(mut pm) => pktfs_fsck::run(&mut pm, &opts),
        Err(e) => {
            let msg = match e {
                MediaError::Locked { .. } => format!(
                    "{} is in use by a mount or server; unmount it first, or check it \
                     live with `pktfs scrub {}`",
                    a.image.display(),
                    a.image.display()
                ),
                e => e.to_string(),
            };
            let mut r = Report::operational(mode, msg);
            r.image = Some(a.image.display().to_string());
            r
        }
    };
    report.image = Some(a.image.display().to_string());
    if report.checked_nothing() && !a.json {
        // Nothing was checked (the image could not be opened): the reason,
        // on stderr, is all there is to say.
        if let Some(e) = &report.operational_error {
            eprintln!("fsck.pktfs: {e}");
            return pktfs_support::status(report.exit_code);
        }
    }
    // A closed pipe (`| head`) is not a reason to panic: ignore write errors.
    let mut out = std::io::stdout().lock();
    if a.json {
        let _ = writeln!(out, "{}", report.to_json());
    } else if !a.quiet || report.exit_code != exit::CLEAN {
        let _ = write!(
            out,
            "fsck.pktfs {}\n{}",
            a.image.display(),
            report.to_text()
        );
    }
    let _ = out.flush();
    drop(out);
    let mut code = report.exit_code;
    if let Some(url) = &a.remote {
        if code & (exit::OPERATIONAL | exit::UNCORRECTED) == 0 {
            code |= check_remote(&a.image, url, a.remote_deep, a.json);
        } else {
            eprintln!("fsck.pktfs: the image has errors; the tier is not checked");
        }
    }
    pktfs_support::status(code)
}

/// `--remote`: the tier's objects against the image's remote records.
/// Returns the exit bits to add.
fn check_remote(image: &std::path::Path, url: &str, deep: bool, json: bool) -> i32 {
    let target: pktfs_tier::target::TierTarget = match url.parse() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("fsck.pktfs: --remote {url}: {e}");
            return exit::USAGE;
        }
    };
    let opts = pktfs_fs::OpenOptions {
        read_only: true,
        ..Default::default()
    };
    let vol = match pktfs_fs::Volume::open(image, &opts) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fsck.pktfs: {}: {e}", image.display());
            return exit::OPERATIONAL;
        }
    };
    let store = match pktfs_tier::s3::ObjectStore::connect(&target, &Default::default()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fsck.pktfs: {target}: {e}");
            return exit::OPERATIONAL;
        }
    };
    match pktfs_tier::check::check_remote(&vol, &store, &target, deep) {
        Ok(r) => {
            if json {
                println!("{}", serde_json::to_value(&r).unwrap_or_default());
            } else {
                print!("{}", r.to_text());
            }
            if r.is_clean() {
                0
            } else {
                exit::UNCORRECTED
            }
        }
        Err(e) => {
            eprintln!("fsck.pktfs: {target}: {e}");
            exit::OPERATIONAL
        }
    }
}
