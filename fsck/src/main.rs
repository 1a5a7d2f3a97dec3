//! fsck.pktfs: check (and repair) a pktfs image.
//!
//! Exit codes as e2fsck: 0 clean, 1 errors corrected, 4 errors left
//! uncorrected, 8 operational error.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::Parser;
use pktfs::media::{MapOptions, MediaError, Pm};
use pktfs_fsck::{exit, Mode, Options, Report};

#[derive(Parser, Debug)]
#[command(name = "fsck.pktfs", version, about = "Check and repair a pktfs image")]
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
    /// With -y: unlink damaged data ranges (they read back as holes) instead
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
    /// The image: a file, a file on /dev/shm, or a DAX device.
    image: PathBuf,
}

fn main() {
    let a = Args::parse();
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
    let mut report = match Pm::open(&a.image, &map) {
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
    std::process::exit(report.exit_code);
}
