//! netbench's command line (clap): the benchmark's options, and the two
//! child modes netbench starts its servers with (also run by hand, to
//! profile one server with `perf record -p` under the same client).
//!
//! A misspelt option, a section that does not exist or a count of zero
//! is refused with a message before anything starts: a benchmark that
//! quietly ignored `--round 3` would run for minutes and report figures
//! the user did not ask for.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use pktfs_fs::media::PersistChoice;

#[derive(Parser, Debug)]
#[command(
    name = "netbench",
    about = "pktfs's network path against baselines (network-only, copy+clwb, ext4+fdatasync, \
             sendfile, nginx) over loopback on this machine; prints the network path's targets, met or missed",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub child: Option<ChildMode>,
    #[command(flatten)]
    pub run: RunOpts,
}

/// The sections of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Section {
    /// Large PUT (--size-mib).
    Put,
    /// Large GET.
    Get,
    /// 1 KiB PUTs at --conns connections.
    Small,
    /// 1 KiB PUTs at --many-conns connections.
    C10k,
    /// 1 KiB PUTs on one connection, one every --paced-us (busy polling's
    /// cost when requests come further apart than its window).
    Paced,
    /// The Volume calls of one 1 KiB PUT, the CRC32C speed, and
    /// namespace changes from several threads.
    Volume,
}

#[derive(Args, Debug)]
pub struct RunOpts {
    /// Sections to run, comma-separated (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Section>,
    /// Large transfer size, MiB.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub size_mib: u64,
    /// Large transfers: repetitions (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: u64,
    /// Small PUTs: seconds of load per server per connection count, split
    /// into --rounds runs of at least 1 s each.
    #[arg(long, default_value_t = 6.0, value_parser = positive_secs)]
    pub secs: f64,
    /// Small PUTs: rounds (medians across them).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..))]
    pub rounds: u64,
    /// Small PUTs: connection counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1u64, 16, 256],
          value_parser = clap::value_parser!(u64).range(1..))]
    pub conns: Vec<u64>,
    /// wrk threads (1 keeps wrk's own thread off the server's cores as far
    /// as it can on a small machine).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub wrk_threads: u64,
    /// Paced run: microseconds from one request's start to the next's.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub paced_us: u64,
    /// Many-connection run: connections (lowered to what RLIMIT_NOFILE
    /// allows, with a note).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub many_conns: u64,
    /// Many-connection run: seconds per round.
    #[arg(long, default_value_t = 6.0, value_parser = positive_secs)]
    pub many_secs: f64,
    /// Many-connection run: rounds.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub many_rounds: u64,
    /// Small and many-connection runs: each pktfs child's image, MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    pub image_mib: u64,
    /// The nginx binary (default: from $PATH, then /usr/sbin).
    #[arg(long)]
    pub nginx: Option<PathBuf>,
}

impl RunOpts {
    /// Whether `s` is to run (every section when --only is not given).
    pub fn wants(&self, s: Section) -> bool {
        self.only.is_empty() || self.only.contains(&s)
    }
}

/// The baselines a child can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineKind {
    #[value(name = "network-only")]
    NetworkOnly,
    /// network-only whose reads spin on a non-blocking receive instead of
    /// sleeping: what polling costs a server that does no work.
    #[value(name = "network-only-polling")]
    NetworkOnlyPolling,
    #[value(name = "copy+clwb")]
    CopyClwb,
    /// Receives each body straight into a mapped file's lines, wrapping
    /// over --fresh-mib, and writes them back (clwb + sfence).
    #[value(name = "recv+clwb, fresh lines")]
    RecvClwbFresh,
    #[value(name = "ext4+fdatasync")]
    Ext4Fdatasync,
}

#[derive(Subcommand, Debug)]
pub enum ChildMode {
    /// Serve one baseline (until killed; with --until-eof, until stdin
    /// closes, as netbench's child). The first line on stdout names the
    /// address.
    ServeBaseline(BaselineArgs),
    /// Serve one pktfs netpath server on a fresh image (until stdin
    /// closes). The first line on stdout names the address.
    ServePktfs(PktfsArgs),
    /// Read a served image's `/k` files straight from the mapping until
    /// stdin closes (a direct reader attached during a run:
    /// NETBENCH_DIRECT_READERS).
    ReadDirect(crate::direct_readers::ReadDirectArgs),
}

#[derive(Args, Debug)]
pub struct BaselineArgs {
    #[arg(value_enum)]
    pub kind: BaselineKind,
    /// TCP port on 127.0.0.1 (0: a free one).
    #[arg(long, default_value_t = 18081)]
    pub port: u16,
    /// Connections copy+clwb's file is sized for (2 MiB each).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub conns: u64,
    /// The size of recv+clwb's file, MiB (its lines are rewritten once per
    /// this many MiB received).
    #[arg(long, default_value_t = 768, value_parser = clap::value_parser!(u64).range(1..))]
    pub fresh_mib: u64,
    /// Where the baseline keeps its files (default: /dev/shm/pktfs-netbench-PID).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Stop when stdin closes (a child never outlives its benchmark).
    #[arg(long)]
    pub until_eof: bool,
}

#[derive(Args, Debug)]
pub struct PktfsArgs {
    /// The server's name in the tables.
    pub name: String,
    /// Persist mode: auto, clwb, clflushopt, clflush, eadr or msync.
    #[arg(long, default_value = "clwb", value_parser = parse_persist)]
    pub persist: PersistChoice,
    /// How connections are served: auto, uring, epoll or threads.
    #[arg(long, default_value = "auto", value_parser = parse_io)]
    pub io: pktfs_netpath::IoMode,
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// io_uring event loops (0: the server's default).
    #[arg(long, default_value_t = 0)]
    pub loops: u64,
    /// The loops' busy polling, microseconds (default: the server's).
    #[arg(long)]
    pub busy_poll_us: Option<u64>,
    /// The image, MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    pub image_mib: u64,
    /// io_uring loops: entries of each loop's ring of free packet buffers
    /// (default: the server's).
    #[arg(long)]
    pub ring_entries: Option<u16>,
    /// io_uring loops: KiB of buffer space per ring entry (default: the
    /// server's).
    #[arg(long)]
    pub ring_entry_kib: Option<u32>,
    /// Threads transport: keep large bodies on the connection's thread
    /// instead of handing them to a persister thread.
    #[arg(long)]
    pub no_persister: bool,
    /// Where the image goes (default: /dev/shm/pktfs-netbench-PID).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Accepted for symmetry with serve-baseline: a pktfs child always
    /// stops when stdin closes.
    #[arg(long)]
    pub until_eof: bool,
}

fn positive_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        Ok(_) => Err(format!("{s}: seconds must be above 0 and at most a day")),
        Err(e) => Err(format!("{s}: {e}")),
    }
}

fn parse_persist(s: &str) -> Result<PersistChoice, String> {
    s.parse()
}

fn parse_io(s: &str) -> Result<pktfs_netpath::IoMode, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_input_is_refused() {
        for bad in [
            &["netbench", "--round", "3"][..],
            &["netbench", "--rounds", "0"],
            &["netbench", "--only", "smal"],
            &["netbench", "--conns", "1,x"],
            &["netbench", "--secs", "-1"],
            &["netbench", "--secs", "NaN"],
            &["netbench", "serve-baseline", "nginx"],
            &["netbench", "serve-pktfs", "p", "--io", "kqueue"],
            &["netbench", "--rounds", "2", "serve-pktfs", "p"],
            &["netbench", "--only", "paced", "--paced-us", "0"],
        ] {
            assert!(Cli::try_parse_from(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn defaults_and_lists() {
        let c = Cli::try_parse_from(["netbench", "--only", "small,c10k", "--conns", "1,16"])
            .expect("parses");
        assert!(c.child.is_none());
        assert_eq!(c.run.conns, [1, 16]);
        assert!(c.run.wants(Section::Small) && c.run.wants(Section::C10k));
        assert!(!c.run.wants(Section::Put));
        assert_eq!((c.run.rounds, c.run.reps, c.run.size_mib), (8, 5, 256));
        let all = Cli::try_parse_from(["netbench"]).expect("parses");
        assert!(all.run.wants(Section::Volume) && all.run.wants(Section::Paced));
        assert_eq!(all.run.paced_us, 200);
        let ch = Cli::try_parse_from([
            "netbench",
            "serve-pktfs",
            "pktfs clwb uring",
            "--io",
            "uring",
            "--until-eof",
        ])
        .expect("parses");
        match ch.child {
            Some(ChildMode::ServePktfs(p)) => {
                assert_eq!(p.name, "pktfs clwb uring");
                assert_eq!(p.io, pktfs_netpath::IoMode::Uring);
                assert_eq!(p.persist, PersistChoice::Clwb);
            }
            other => panic!("wrong mode: {other:?}"),
        }
    }
}
