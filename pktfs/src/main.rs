//! `pktfs`: mount an image through FUSE, serve it over the network, send a
//! file out by its chain, show a file as its packets, or all at once (`up`).
//!
//! Each subcommand lives in its own module; this file only parses and
//! dispatches, and maps errors to a message and an exit code.

use pktfs::{
    chain_cmd, gendocs, keys_cmd, logging, mount_cmd, net_cmd, offline_cmd, scrub_cmd, stream_cmd,
    tier_cmd,
};

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use pktfs_support::CliError;

#[derive(Parser, Debug)]
#[command(
    name = "pktfs",
    version,
    about = "pktfs: a persistent-memory file system whose files are chains of packet metadata"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Log level: error, warn, info, debug, trace, or RUST_LOG-style
    /// directives [default: $RUST_LOG, else info]. For mount, the same as
    /// -o log=LEVEL.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = logging::parse_level)]
    log_level: Option<String>,
    /// Append logs to FILE instead of stderr (a detached mount daemon logs
    /// to the systemd journal, or /var/log/pktfs.log, unless given one).
    /// For mount, the same as -o log_file=FILE.
    #[arg(long, global = true, value_name = "FILE")]
    log_file: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Mount an image through FUSE.
    #[command(after_help = pktfs_support::size::SIZE_FORMS)]
    Mount(mount_cmd::MountArgs),
    /// Serve an image over HTTP (and raw TCP) without FUSE.
    Serve(net_cmd::ServeArgs),
    /// Stream a file out over TCP, every record's CRC32C checked first.
    ///
    /// The file is held and every record's checksum is checked against its
    /// bytes before the first byte is sent, whatever the image's verify
    /// mode; a damaged record is named and nothing is sent. The records go
    /// to sendmsg(2) as one iovec each, straight from the image; TCP cuts
    /// the stream into segments of its own, so the peer sees the file's
    /// bytes, not its record boundaries.
    Send(net_cmd::SendArgs),
    /// Show a file as its chain of packet-metadata records, or write them
    /// as a pcapng capture (--pcap) for Wireshark or tshark.
    Chain(chain_cmd::ChainArgs),
    /// Show an image's superblock, geometry and usage.
    Stat(chain_cmd::StatArgs),
    /// Quick start: create a default image if needed, mount it, serve it.
    #[command(after_help = pktfs_support::size::SIZE_FORMS)]
    Up(net_cmd::UpArgs),
    /// Receive one TCP stream into one file (one copy, durable, every
    /// record checksummed); exit 0 when the stream ended cleanly.
    #[command(after_help = pktfs_support::size::SIZE_FORMS)]
    Recv(stream_cmd::RecvArgs),
    /// Check every payload checksum of an image, mounted or not, and name
    /// damaged files and ranges (exit 0 clean, 4 damage, 8 error).
    #[command(after_help = pktfs_support::size::SIZE_FORMS)]
    Scrub(scrub_cmd::ScrubArgs),
    /// Tier an image's cold data to an S3-compatible store now, bring it
    /// back, or collect unreferenced objects (the image not mounted).
    Tier(tier_cmd::TierCmdArgs),
    /// Build a new image from a bucket an image tiered to: every file
    /// tiered before the newest snapshot, byte-identical.
    #[command(after_help = pktfs_support::size::SIZE_FORMS)]
    Restore(tier_cmd::RestoreArgs),
    /// Manage the S3 access keys an image keeps: add, list, rm.
    #[command(after_help = keys_cmd::KEYS_HELP)]
    Keys(keys_cmd::KeysArgs),
    /// Show the CPU features and checksum/copy speeds that set pktfs's pace
    /// (every benchmark prints this).
    Machine {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a directory of an image that is not mounted or served.
    Ls(offline_cmd::LsArgs),
    /// Write a file of an image that is not mounted or served to stdout.
    Cat(offline_cmd::CatArgs),
    /// Copy a file out of an image that is not mounted or served.
    Get(offline_cmd::GetArgs),
    /// Copy a local file into an image that is not mounted or served.
    Put(offline_cmd::PutArgs),
    /// Remove a file or empty directory from an image that is not mounted
    /// or served.
    Rm(offline_cmd::RmArgs),
    /// Write man pages (DIR/man8) and bash, zsh and fish completions
    /// (DIR/bash, DIR/zsh, DIR/fish); scripts/install.sh runs it.
    #[command(hide = true)]
    GenDocs {
        /// Where to write them.
        dir: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    let mut spec = logging::LogSpec {
        level: cli.log_level.take(),
        file: cli.log_file.take(),
    };
    let daemon = match &mut cli.cmd {
        Cmd::Mount(a) => {
            if let Err(e) = mount_cmd::take_log_options(a, &mut spec) {
                return finish(Err(CliError::Usage(e)));
            }
            a.daemon_child
        }
        _ => false,
    };
    if let Err(e) = logging::init(&spec, daemon) {
        return finish(Err(CliError::Failed(e)));
    }
    finish(run(cli.cmd))
}

/// The one place `pktfs` ends: the error printed once (and logged when
/// stderr goes nowhere: a daemon's is gone), its status returned.
fn finish(r: Result<(), CliError>) -> ExitCode {
    pktfs_support::finish("pktfs", r, |e| {
        if logging::away_from_stderr() {
            tracing::error!("{e}");
        }
    })
}

fn run(cmd: Cmd) -> Result<(), CliError> {
    match cmd {
        Cmd::Mount(a) => mount_cmd::run(a)?,
        Cmd::Serve(a) => net_cmd::serve(a)?,
        Cmd::Send(a) => net_cmd::send(a)?,
        Cmd::Chain(a) => chain_cmd::chain(a)?,
        Cmd::Stat(a) => chain_cmd::stat(a)?,
        Cmd::Up(a) => net_cmd::up(a)?,
        Cmd::Tier(a) => tier_cmd::run(a)?,
        Cmd::Restore(a) => tier_cmd::restore(a)?,
        Cmd::Keys(a) => keys_cmd::run(a)?,
        Cmd::Scrub(a) => return pktfs_support::status(scrub_cmd::run(a)),
        Cmd::Recv(a) => return pktfs_support::status(stream_cmd::recv(a)?),
        Cmd::Machine { json } => {
            let m = pktfs_fs::media::machine::Machine::measure();
            if json {
                println!("{}", m.to_json());
            } else {
                println!("machine: {m}");
            }
        }
        Cmd::Ls(a) => offline_cmd::ls(a)?,
        Cmd::Cat(a) => offline_cmd::cat(a)?,
        Cmd::Get(a) => offline_cmd::get(a)?,
        Cmd::Put(a) => offline_cmd::put(a)?,
        Cmd::Rm(a) => offline_cmd::rm(a)?,
        Cmd::GenDocs { dir } => gendocs::generate(Cli::command(), &dir)?,
    }
    Ok(())
}
