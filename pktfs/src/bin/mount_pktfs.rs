//! `mount.pktfs`: the mount(8) helper, so `mount -t pktfs IMAGE DIR` and an
//! /etc/fstab line (`/dev/shm/pm.img /mnt/pm pktfs defaults 0 0`) work.
//!
//! mount(8) calls `mount.pktfs SPEC DIR [-sfnv] [-N NS] [-o OPTIONS]`; here
//! `-f` means "fake" (do nothing) as mount(8) defines it, `-s` drops options
//! pktfs does not know instead of failing, `-n` and `-v` are accepted.
//! Installed as a link named mount.pktfs (cargo does not allow dots in
//! binary names; see scripts/install.sh).

use pktfs::{logging, mount_cmd, mount_options};

use std::path::PathBuf;
use std::process::ExitCode;

use pktfs_support::CliError;

/// mount(8)'s status for an incorrect invocation.
const USAGE: u8 = 1;
/// mount(8)'s status for a mount failure.
const MOUNT_FAILURE: u8 = 32;

fn usage() -> CliError {
    eprintln!("usage: mount.pktfs IMAGE DIR [-sfnv] [-o OPTIONS]");
    CliError::Status(USAGE)
}

fn main() -> ExitCode {
    pktfs_support::finish("mount.pktfs", run(), |e| {
        if logging::away_from_stderr() {
            tracing::error!("{e}");
        }
    })
}

fn run() -> Result<(), CliError> {
    let mut pos: Vec<String> = Vec::new();
    let mut options: Vec<String> = Vec::new();
    let (mut fake, mut sloppy, mut daemon_child, mut foreground) = (false, false, false, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" => options.push(args.next().ok_or_else(usage)?),
            "-t" => {
                let _ = args.next(); // the type: pktfs
            }
            "-N" => {
                return Err(CliError::Failed(
                    "-N (mount namespaces) is not supported".into(),
                ))
            }
            "--daemon-child" => daemon_child = true,
            "--foreground" => foreground = true,
            "-h" | "--help" => return Err(usage()),
            s if s.starts_with("-o") && s.len() > 2 => options.push(s[2..].to_string()),
            s if s.starts_with('-') && s.len() > 1 && !s.starts_with("--") => {
                for c in s[1..].chars() {
                    match c {
                        'f' => fake = true,
                        's' => sloppy = true,
                        'n' | 'v' => {}
                        _ => return Err(usage()),
                    }
                }
            }
            _ => pos.push(a),
        }
    }
    if pos.len() != 2 {
        return Err(usage());
    }
    if sloppy {
        // Keep only what pktfs knows.
        let mut kept = Vec::new();
        for o in options.iter().flat_map(|l| l.split(',')) {
            if mount_cmd::is_log_option(o) || mount_options::parse(o).is_ok() {
                kept.push(o.to_string());
            }
        }
        options = vec![kept.join(",")];
    }
    let mut margs = mount_cmd::MountArgs {
        image: PathBuf::from(&pos[0]),
        mountpoint: PathBuf::from(&pos[1]),
        foreground,
        options,
        daemon_child,
        helper: true,
        net: Default::default(),
        durability: Default::default(),
        log: Default::default(),
        tier: Default::default(),
    };
    let mut spec = logging::LogSpec::default();
    mount_cmd::take_log_options(&mut margs, &mut spec)?;
    logging::init(&spec, daemon_child)?;
    if fake {
        // mount -f: check the arguments, mount nothing.
        margs.options.retain(|o| !o.is_empty());
        mount_options::parse(&margs.options.join(","))?;
        return Ok(());
    }
    mount_cmd::run(margs).map_err(|message| CliError::FailedWith {
        status: MOUNT_FAILURE,
        message,
    })
}
