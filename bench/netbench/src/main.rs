//! netbench: pktfs's network path against baselines, side by side, over
//! loopback on this machine (bench/net.sh runs it).
//!
//! ```text
//! cargo run --release -p pktfs-netbench --bin netbench -- [OPTIONS]
//! ```
//!
//! `netbench --help` lists the options (sections with `--only`, sizes,
//! repetitions, rounds, connection counts); they are defined in `cli.rs`.
//!
//! Servers (HTTP/1.1 with keep-alive, each on its own 127.0.0.1 port):
//! - `network-only`: reads the body into a reused 1 MiB buffer, drops it
//!   (a thread per connection);
//! - `network-only-polling` (small PUTs at one connection only): the same,
//!   its reads spinning on a non-blocking `recv` instead of sleeping. Not
//!   a target's reference: the floor of what busy polling costs a server
//!   that does no work (while it polls, CPU per request is the whole round
//!   trip), printed beside the targets;
//! - `copy+clwb`: reads into that buffer, then memcpy's it into a mapped
//!   /dev/shm file and persists it (`ExclusivePm::write` + `persist`: clwb each
//!   line + sfence), PASTE's copy baseline. Its 2 MiB window per connection
//!   wraps, so the lines it writes stay in cache;
//! - `recv+clwb, fresh lines` (large PUT only, a process of its own):
//!   receives each body straight into lines of a mapped /dev/shm file last
//!   written three transfers ago (`ExclusivePm::recv`, at most 256 KiB per
//!   receive, as a pktfs record holds) and writes them back: pktfs's one
//!   copy and clwb with nothing else, the floor of the design here;
//! - `ext4+fdatasync`: `write()`s the body to a file on the root file system
//!   (its type is printed) and `fdatasync()`s before answering;
//! - `sendfile-tmpfs` (GET): `sendfile()` of a plain file on /dev/shm;
//! - `nginx`: our own nginx (when installed, with the WebDAV module, e.g.
//!   Debian's nginx-light), `PUT` into a /dev/shm directory, a worker per
//!   core, no access log;
//! - `pktfs clwb uring` / `pktfs clwb epoll` / `pktfs clwb threads`: the
//!   netpath server on a /dev/shm image in clwb persist mode (clflushopt
//!   where the CPU has no clwb: the machine line says which), `Config.io`
//!   = Uring (skipped with a message where io_uring is unusable) / Epoll
//!   (the same loops on epoll) / Threads; `pktfs eadr`: eadr
//!   mode, `Config.io` = Auto; `pktfs clwb uring nopoll` (small and
//!   paced PUTs only): the io_uring server with busy polling off;
//!   `pktfs clflushopt` (where the CPU has clwb and clflushopt): the clwb
//!   mode writing lines back with clflushopt (`--persist clflushopt`),
//!   `Config.io` = Auto: what a CPU without clwb would cost, its target
//!   lines printed as references.
//!
//! Large PUT/GET run against servers in this process (CPU: client +
//! server). The small-PUT and many-connection loads run against servers
//! that are processes of their own (netbench children, nginx), driven by
//! `wrk` with a Lua script (a built-in closed-loop client when wrk is
//! missing; no c10k then), so that "server CPU per request" is the
//! server's CPU time during the run (its process CPU clock, in ns; the
//! /proc ticks where the clock cannot be read) divided by the
//! requests wrk counted (its user-space share, the server's own work
//! rather than the kernel's TCP, on a row of its own). The soft
//! RLIMIT_NOFILE is raised to the hard limit first, for the children and
//! wrk. The paced load (`--only paced`) sends one 1 KiB PUT every
//! `--paced-us` (200 µs: 5,000 req/s) on one connection with the built-in
//! client, against network-only and the loops with and without busy
//! polling: what polling costs when requests come further apart than its
//! window. All servers run in the same run; the end prints the table and
//! the network path's targets, met or missed.
//!
//! Child modes, also for profiling one server on its own (e.g.
//! `perf record -p` with the same client):
//!
//! ```text
//! netbench serve-baseline network-only|network-only-polling|copy+clwb|ext4+fdatasync --port 18081 [--dir D] [--conns N]
//! netbench serve-pktfs NAME --persist clwb --io uring|epoll|threads|auto [--max-connections N] [--loops N] [--busy-poll-us N] [--image-mib N] [--dir D]
//! ```
//!
//! (with `--until-eof` they stop when their stdin closes.)

mod baseline;
mod ceiling;
mod cli;
mod client;
mod direct_readers;
mod interleave;
mod load;
mod nginx;
mod ns_scaling;
mod order;
mod pktfs_server;
mod report;
mod results;
mod transfer;
mod volume_costs;

use std::path::Path;

use pktfs_fs::media::{FlushInsn, PersistChoice};
// The library's, which s3bench uses too; its modules here say
// `crate::child`.
use pktfs_netbench::child;

use child::ChildServer;
use cli::Section;
use load::{LoadOpts, LoadServer};
use pktfs_server::PktfsSpec;

/// The io_uring server with busy polling off (a small-PUT row only).
const NOPOLL: &str = "pktfs clwb uring nopoll";
/// The loops on their epoll backend (the fallback where io_uring is not
/// usable).
const EPOLL: &str = "pktfs clwb epoll";
/// The clwb mode with clflushopt's write-backs, on the loops (threads
/// where io_uring is unusable).
const CLFLUSHOPT: &str = "pktfs clflushopt";

/// Stop the run with a message a person can act on (no backtrace),
/// removing its directories.
pub(crate) fn fail(msg: &str) -> ! {
    child::remove_own_dirs();
    eprintln!("netbench: {msg}");
    std::process::exit(1)
}

fn fs_type(p: &Path) -> String {
    let out = std::process::Command::new("df").arg("-T").arg(p).output();
    out.ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.lines()
                .nth(1)
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "?".into())
}

/// Whether the HTTP part of a server's io summary says io_uring.
fn http_on_uring(io: &str) -> bool {
    io.split(", ")
        .find(|p| p.starts_with("http"))
        .is_some_and(|p| p.contains("uring"))
}

fn main() {
    let cli = <cli::Cli as clap::Parser>::parse();
    match cli.child {
        Some(cli::ChildMode::ServeBaseline(a)) => return baseline::serve_baseline(&a),
        Some(cli::ChildMode::ServePktfs(a)) => return pktfs_server::serve_pktfs(&a),
        Some(cli::ChildMode::ReadDirect(a)) => return direct_readers::read_direct(&a),
        None => {}
    }
    let args = cli.run;
    // Images of runs that were killed (each a GiB of /dev/shm, that is of
    // memory) would otherwise squeeze this run's and skew it.
    child::sweep_stale_and_report();
    // The machine sets the pace (clwb or not, CRC32C speed): say which.
    let machine = pktfs_fs::media::machine::Machine::measure();
    println!("netbench on {machine}");
    let want = |s: Section| args.wants(s);
    let [shm, ext4_base] = child::own_dirs();
    for d in [&shm, &ext4_base] {
        if let Err(e) = std::fs::create_dir_all(d) {
            fail(&format!("cannot make {}: {e}", d.display()));
        }
    }
    remove_own_dirs_on_signal();
    let nofile = child::raise_nofile();
    let mut notes: Vec<String> = Vec::new();
    let many = print_plan(&args, &shm, &ext4_base, nofile, &mut notes);
    let specs = pktfs_specs(&machine, &mut notes);
    let nginx = if want(Section::Put) || want(Section::Small) || want(Section::C10k) {
        start_nginx(&args, &shm, many, nofile, &mut notes)
    } else {
        None
    };
    let mut results: results::Results = Vec::new();

    if want(Section::Put) || want(Section::Get) {
        transfer::run(
            &transfer::Opts {
                shm: &shm,
                ext4_dir: &ext4_base,
                size: args.size_mib << 20,
                reps: args.reps as usize,
                pktfs: &specs,
                nginx: nginx.as_ref().map(|n| (n.addr, n.pid())),
                put: want(Section::Put),
                get: want(Section::Get),
            },
            &mut results,
        );
    }
    if want(Section::Small) || want(Section::C10k) || want(Section::Paced) {
        let dirs = (shm.as_path(), ext4_base.as_path());
        let loads = Loads {
            args: &args,
            specs: &specs,
            dirs,
            many,
        };
        loads.run(nginx.as_ref(), &mut notes, &mut results);
    }
    if want(Section::Volume) {
        volume_costs::volume_costs(&shm, &mut results);
        ns_scaling::ns_scaling(&shm, &mut results);
    }
    drop(nginx);

    report::print_table(&results);
    let pktfs_names: Vec<&str> = specs
        .iter()
        .filter(|s| s.persist == PersistChoice::Clwb)
        .map(|s| s.name.as_str())
        .collect();
    let emulated: Vec<&str> = specs
        .iter()
        .filter(|s| s.persist == PersistChoice::Clflushopt)
        .map(|s| s.name.as_str())
        .collect();
    report::print_summary(
        &results,
        &machine.to_string(),
        &pktfs_names,
        &emulated,
        many,
        &notes,
    );
    let _ = std::fs::remove_dir_all(&shm);
    let _ = std::fs::remove_dir_all(&ext4_base);
}

/// Ctrl-C or `kill`: this run's directories go with it (the children
/// remove their own when their stdin closes or the signal reaches them;
/// nginx dies with its parent).
fn remove_own_dirs_on_signal() {
    match pktfs_support::signal::shutdown_signal() {
        Ok(sig) => {
            std::thread::spawn(move || {
                if sig.recv().is_ok() {
                    child::remove_own_dirs();
                    eprintln!("netbench: stopped by a signal; removed its directories");
                    std::process::exit(130);
                }
            });
        }
        Err(e) => println!("{e}: a run stopped by a signal leaves its directories"),
    }
}

/// Print what the run will do and where; returns the many-connection
/// run's connections, lowered (with a note) to what RLIMIT_NOFILE holds.
fn print_plan(
    args: &cli::RunOpts,
    shm: &Path,
    ext4_base: &Path,
    nofile: u64,
    notes: &mut Vec<String>,
) -> usize {
    let rounds = args.rounds as usize;
    let many = args.many_conns as usize;
    let conns_list: Vec<usize> = args.conns.iter().map(|&c| c as usize).collect();
    println!(
        "# netbench: {} MiB transfers, {} reps (median); 1 KiB PUTs at {conns_list:?} connections, \
         {rounds} rounds of {:.0} s per server; {many} connections: {} rounds of {} s",
        args.size_mib,
        args.reps,
        (args.secs / rounds as f64).max(1.0),
        args.many_rounds,
        args.many_secs
    );
    println!(
        "machine: {} CPUs; /dev/shm is {}, ext4 baseline dir {} is {}; RLIMIT_NOFILE {nofile}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        fs_type(shm),
        ext4_base.display(),
        fs_type(ext4_base)
    );
    if many + 64 > nofile as usize {
        let fit = (nofile as usize).saturating_sub(64);
        let msg = format!(
            "RLIMIT_NOFILE {nofile} cannot hold {many} connections per process; the many-connection run uses {fit}"
        );
        println!("{msg}");
        notes.push(msg);
        return fit;
    }
    many
}

/// The pktfs servers: clwb (the targets' mode) on the io_uring loops, on
/// epoll and on threads, eadr, and clflushopt where the CPU has clwb too.
fn pktfs_specs(
    machine: &pktfs_fs::media::machine::Machine,
    notes: &mut Vec<String>,
) -> Vec<PktfsSpec> {
    let mut specs: Vec<PktfsSpec> = Vec::new();
    match pktfs_server::uring_usable() {
        Ok(()) => specs.push(PktfsSpec::new(
            "pktfs clwb uring",
            PersistChoice::Clwb,
            pktfs_netpath::IoMode::Uring,
        )),
        Err(why) => {
            let msg = format!("pktfs clwb uring: io_uring is unavailable ({why}); skipped");
            println!("{msg}");
            notes.push(msg);
        }
    }
    // The same loops on epoll: what serves where io_uring is not usable.
    specs.push(PktfsSpec::new(
        EPOLL,
        PersistChoice::Clwb,
        pktfs_netpath::IoMode::Epoll,
    ));
    specs.push(PktfsSpec::new(
        "pktfs clwb threads",
        PersistChoice::Clwb,
        pktfs_netpath::IoMode::Threads,
    ));
    specs.push(PktfsSpec::new(
        "pktfs eadr",
        PersistChoice::Eadr,
        pktfs_netpath::IoMode::Auto,
    ));
    // What a CPU without clwb would cost: the clwb mode writing lines back
    // with clflushopt, which also evicts them (the next touch of a line
    // the commit just wrote misses). Only where the CPU has clwb too; on
    // one without it, "pktfs clwb" already is this.
    if FlushInsn::Clwb.available() && FlushInsn::Clflushopt.available() {
        specs.push(PktfsSpec::new(
            CLFLUSHOPT,
            PersistChoice::Clflushopt,
            pktfs_netpath::IoMode::Auto,
        ));
    } else {
        let msg = format!(
            "{CLFLUSHOPT}: not run (this CPU has no clwb, so the pktfs clwb servers already write back with {})",
            machine.flush_insn.name()
        );
        println!("{msg}");
        notes.push(msg);
    }
    specs
}

/// Our own nginx, when installed (a note when not).
fn start_nginx(
    args: &cli::RunOpts,
    shm: &Path,
    many: usize,
    nofile: u64,
    notes: &mut Vec<String>,
) -> Option<nginx::Nginx> {
    match nginx::start(args.nginx.as_deref(), shm, many.max(1024), nofile) {
        Ok(n) => {
            println!(
                "nginx: {}, {} workers x {} connections, on {}",
                n.version, n.workers, n.worker_connections, n.addr
            );
            Some(n)
        }
        Err(why) => {
            let msg = format!("nginx: {why}; skipped");
            println!("{msg}");
            notes.push(msg);
            None
        }
    }
}

/// The loads against servers that are processes of their own: 1 KiB PUTs
/// at each connection count, paced, and at many connections.
struct Loads<'a> {
    args: &'a cli::RunOpts,
    specs: &'a [PktfsSpec],
    /// /dev/shm's directory and the ext4 baseline's.
    dirs: (&'a Path, &'a Path),
    many: usize,
}

/// The paced run: the loops with and without polling, against
/// network-only.
const PACED_NAMES: [&str; 3] = ["pktfs clwb uring", NOPOLL, "network-only"];

impl Loads<'_> {
    fn run(
        &self,
        nginx: Option<&nginx::Nginx>,
        notes: &mut Vec<String>,
        results: &mut results::Results,
    ) {
        let args = self.args;
        let want = |s: Section| args.wants(s);
        let have_wrk = client::have_wrk();
        let script = self.dirs.0.join("put.lua");
        client::write_put_script(&script);
        let children = self.spawn_children();
        for c in &children {
            if c.name.contains("uring") && !http_on_uring(&c.io) {
                notes.push(format!(
                    "{}: Config.io = Uring, but this build serves HTTP with threads ({}): \
                     its rows measure threads until HTTP moves onto the loops",
                    c.name, c.io
                ));
            }
        }
        let servers = load_servers(&children, nginx);
        let rounds = args.rounds as usize;
        let o = LoadOpts {
            rounds,
            secs_per_run: (args.secs / rounds as f64).max(1.0),
            wrk_threads: args.wrk_threads as usize,
            script: have_wrk.then(|| script.clone()),
        };
        if !have_wrk {
            let msg =
                "wrk: not installed (apt-get install wrk); small PUTs use the built-in client, \
                       no p99, no many-connection run"
                    .to_string();
            println!("{msg}");
            notes.push(msg);
        }
        if want(Section::Small) {
            load::small_puts(&servers, &self.conns_list(), &o, results);
        }
        if want(Section::Paced) {
            let paced_servers: Vec<LoadServer> = servers
                .iter()
                .filter(|s| PACED_NAMES.contains(&s.name.as_str()))
                .cloned()
                .collect();
            load::paced(
                &paced_servers,
                std::time::Duration::from_micros(args.paced_us),
                &o,
                results,
            );
        }
        if want(Section::C10k) && have_wrk {
            let many_names = self.many_names();
            let many_servers: Vec<LoadServer> = servers
                .iter()
                .filter(|s| many_names.contains(&s.name.as_str()))
                .cloned()
                .collect();
            let mo = LoadOpts {
                rounds: args.many_rounds as usize,
                secs_per_run: args.many_secs,
                ..o.clone()
            };
            load::many_conns(&many_servers, self.many, &mo, 10.0, results);
        }
        drop(children);
    }

    fn conns_list(&self) -> Vec<usize> {
        self.args.conns.iter().map(|&c| c as usize).collect()
    }

    /// pktfs on the loops (the mode meant for many connections; on
    /// threads where io_uring is unusable), the network-only baseline
    /// and nginx take the many-connection run.
    fn many_names(&self) -> [&'static str; 4] {
        [
            if self.specs.iter().any(|s| s.name == "pktfs clwb uring") {
                "pktfs clwb uring"
            } else {
                "pktfs clwb threads"
            },
            EPOLL,
            "network-only",
            "nginx",
        ]
    }

    /// Children: baselines and pktfs servers, each a process of its own;
    /// without the small-PUT rows only those the other loads run.
    fn spawn_children(&self) -> Vec<ChildServer> {
        let args = self.args;
        let want = |s: Section| args.wants(s);
        let (shm, ext4_base) = self.dirs;
        let max_small = self.conns_list().into_iter().max().unwrap_or(16);
        let max_conns = max_small.max(self.many);
        let many_names = self.many_names();
        let needed = |name: &str| {
            want(Section::Small)
                || (want(Section::C10k) && many_names.contains(&name))
                || (want(Section::Paced) && PACED_NAMES.contains(&name))
        };
        let mut children: Vec<ChildServer> = Vec::new();
        let mut spawn = |name: &str, a: Vec<String>| match ChildServer::spawn(name, &a) {
            Ok(c) => {
                println!("{name}: pid {}, on {}, io {}", c.pid(), c.addr, c.io);
                children.push(c);
            }
            Err(e) => println!("{e}; skipped"),
        };
        for kind in baseline::SERVABLE.iter().filter(|k| needed(k)) {
            let dir = if kind.starts_with("ext4") {
                ext4_base.join("child")
            } else {
                shm.join(kind)
            };
            let a = [
                "serve-baseline",
                kind,
                "--port",
                "0",
                // copy+clwb's file: a 2 MiB window per connection (it
                // is not in the many-connection run).
                "--conns",
                &(max_small + 8).to_string(),
                "--dir",
                &dir.display().to_string(),
                "--until-eof",
            ];
            spawn(kind, a.iter().map(|s| s.to_string()).collect());
        }
        let image_bytes = args.image_mib << 20;
        for s in self.specs.iter().filter(|s| needed(&s.name)) {
            let mut s = s.clone();
            s.max_connections = max_conns + 64;
            let dir = shm.join(s.name.replace(' ', "-"));
            spawn(&s.name, pktfs_server::child_args(&s, &dir, image_bytes));
        }
        // The same loops without busy polling, beside them in the small-PUT
        // rows: what polling buys in latency and costs in CPU.
        if want(Section::Small) || want(Section::Paced) {
            if let Some(s) = self.specs.iter().find(|s| s.name == "pktfs clwb uring") {
                let mut s = s.clone();
                s.name = NOPOLL.into();
                s.max_connections = max_conns + 64;
                s.busy_poll_us = Some(0);
                let dir = shm.join(s.name.replace(' ', "-"));
                spawn(&s.name, pktfs_server::child_args(&s, &dir, image_bytes));
            }
        }
        children
    }
}

/// What the loads run against: the children, and nginx before ext4
/// (which stays last).
fn load_servers(children: &[ChildServer], nginx: Option<&nginx::Nginx>) -> Vec<LoadServer> {
    let ls = |c: &ChildServer| LoadServer {
        name: c.name.clone(),
        addr: c.addr,
        pid: c.pid(),
    };
    let mut servers: Vec<LoadServer> = children.iter().map(ls).collect();
    if let Some(n) = nginx {
        let at = servers
            .iter()
            .position(|s| s.name.starts_with("ext4"))
            .unwrap_or(servers.len());
        servers.insert(
            at,
            LoadServer {
                name: "nginx".into(),
                addr: n.addr,
                pid: n.pid(),
            },
        );
    }
    servers
}
