//! Small-PUT load against servers running as processes of their own:
//! requests/s, latency percentiles and the server's CPU time per request
//! (from /proc, the client being another process), at a few connection
//! counts, and the 10,000-connection run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::child::{tree_cpu, tree_cpu_s};
use crate::client::{own_small_puts, paced_puts, wrk_small_puts, Load, WrkOpts};
use crate::results::Results;

/// A server under load: its address and the process whose CPU (with its
/// children's) is its cost.
#[derive(Clone, Debug)]
pub struct LoadServer {
    pub name: String,
    pub addr: SocketAddr,
    pub pid: u32,
}

#[derive(Clone, Debug)]
pub struct LoadOpts {
    /// Rounds of runs, every server once per round, medians across them.
    pub rounds: usize,
    pub secs_per_run: f64,
    pub wrk_threads: usize,
    /// None: wrk is missing, the built-in client runs instead.
    pub script: Option<PathBuf>,
}

/// The ext4 baseline runs last in a round: its write-back must not
/// overlap another server's run.
fn is_last(name: &str) -> bool {
    name.starts_with("ext4")
}

/// Whether `name` runs at `conns` connections: the polling baseline only
/// at one (a spinning thread per connection would starve the others, and
/// the client, on a small machine).
fn runs_at(name: &str, conns: usize) -> bool {
    conns == 1 || name != crate::baseline::POLLING
}

/// A run's server CPU seconds per request: all, and the user-space share;
/// and the machine's wake-up IPIs per request.
#[derive(Clone, Copy, Debug, Default)]
struct PerRequest {
    cpu_s: f64,
    user_s: f64,
    /// NaN where /proc/interrupts does not say.
    ipis: f64,
    /// The share of all CPUs the whole machine had busy (the server, the
    /// client, softirqs and anything else) in the middle of the run; NaN
    /// where /proc/stat does not say.
    machine_busy: f64,
}

/// Busy CPU seconds of the whole machine so far, all CPUs together, from
/// /proc/stat's first line: user, nice, system, irq, softirq and steal
/// (idle and iowait are not busy).
///
/// Why: the client shares the machine, and the processes' CPU times
/// cover their whole runs (connecting, starting, stopping), so neither
/// says how busy the machine was while requests flowed. That share bounds
/// the rate any server can reach on it (`crate::ceiling`).
fn machine_busy_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks = parse_machine_busy_ticks(&text)?;
    Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

fn parse_machine_busy_ticks(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already inside user and nice.
    if v.len() < 8 {
        return None;
    }
    Some(v[0] + v[1] + v[2] + v[5] + v[6] + v[7])
}

/// Inter-processor interrupts that wake or kick a CPU, all CPUs together:
/// rescheduling and function-call interrupts (a remote wake-up is one or
/// the other, depending on the kernel's wake path) from /proc/interrupts.
///
/// Why: on a VM whose idle vCPUs halt at once, a one-connection round
/// trip has two modes. An answer that reaches the client's vCPU before it
/// halted wakes it for free; one that comes later needs an IPI and exits
/// to the hypervisor on both sides, and the round trip (with a polling
/// server's CPU per request) grows markedly. IPIs per request say which
/// mode a run was in: about one per request in the slow mode.
fn wakeup_ipis() -> Option<u64> {
    parse_wakeup_ipis(&std::fs::read_to_string("/proc/interrupts").ok()?)
}

fn parse_wakeup_ipis(text: &str) -> Option<u64> {
    let mut found = false;
    let mut sum = 0u64;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if !matches!(words.next(), Some("RES:" | "CAL:")) {
            continue;
        }
        found = true;
        // Per-CPU counts come first; the description after them is words.
        sum += words.map_while(|w| w.parse::<u64>().ok()).sum::<u64>();
    }
    found.then_some(sum)
}

/// One run of `conns` connections against `s`: what the client saw and
/// the server's CPU seconds per request.
fn run(s: &LoadServer, o: &LoadOpts, conns: usize, timeout_s: f64) -> (Load, PerRequest) {
    let i0 = wakeup_ipis();
    let c0 = tree_cpu(s.pid);
    let (l, machine_busy) = std::thread::scope(|sc| {
        let busy = sc.spawn(|| busy_share_mid_run(o.secs_per_run));
        let l = drive(s, o, conns, timeout_s);
        (l, busy.join().ok().flatten().unwrap_or(f64::NAN))
    });
    let c1 = tree_cpu(s.pid);
    let i1 = wakeup_ipis();
    let n = l.requests.max(1.0);
    let cpu = PerRequest {
        cpu_s: (c1.total_s() - c0.total_s()) / n,
        user_s: (c1.user_s - c0.user_s) / n,
        ipis: match (i0, i1) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / n,
            _ => f64::NAN,
        },
        machine_busy,
    };
    (l, cpu)
}

/// The machine's busy share of all its CPUs from 20% to 80% into a run of
/// `secs` (the client's start and end left out: connecting thousands of
/// sockets is not the steady state).
fn busy_share_mid_run(secs: f64) -> Option<f64> {
    let cpus = std::thread::available_parallelism().ok()?.get() as f64;
    std::thread::sleep(Duration::from_secs_f64(secs * 0.2));
    let (b0, t0) = (machine_busy_s()?, std::time::Instant::now());
    std::thread::sleep(Duration::from_secs_f64(secs * 0.6));
    let (b1, t1) = (machine_busy_s()?, std::time::Instant::now());
    let wall_s = (t1 - t0).as_secs_f64();
    (wall_s > 0.0).then(|| ((b1 - b0) / (wall_s * cpus)).clamp(0.0, 1.0))
}

/// The client's run of `conns` connections against `s`.
fn drive(s: &LoadServer, o: &LoadOpts, conns: usize, timeout_s: f64) -> Load {
    match &o.script {
        Some(script) => wrk_small_puts(
            s.addr,
            WrkOpts {
                conns,
                threads: o.wrk_threads,
                secs: o.secs_per_run,
                timeout_s,
            },
            script,
        ),
        None => {
            let (p50_us, rps) = own_small_puts(s.addr, conns, o.secs_per_run);
            Load {
                rps,
                p50_us,
                p99_us: f64::NAN,
                requests: rps * o.secs_per_run,
                ..Default::default()
            }
        }
    }
}

fn conns_label(conns: usize) -> String {
    format!("{conns} conn{}", if conns == 1 { "" } else { "s" })
}

/// 1 KiB PUTs at each of `conns_list`, `o.rounds` rounds, each round
/// starting with a different server so that none always runs right after
/// the same other one; medians across rounds.
pub fn small_puts(
    servers: &[LoadServer],
    conns_list: &[usize],
    o: &LoadOpts,
    results: &mut Results,
) {
    let tool = if o.script.is_some() {
        "wrk"
    } else {
        "built-in client"
    };
    for &conns in conns_list {
        let here = |k: &usize| runs_at(&servers[*k].name, conns);
        let rotating: Vec<usize> = (0..servers.len())
            .filter(|&k| !is_last(&servers[k].name))
            .filter(here)
            .collect();
        let last: Vec<usize> = (0..servers.len())
            .filter(|&k| is_last(&servers[k].name))
            .filter(here)
            .collect();
        println!(
            "small PUTs, {}: {} rounds x {} servers x {} s ({tool})",
            conns_label(conns),
            o.rounds,
            rotating.len() + last.len(),
            o.secs_per_run
        );
        let mut runs: Vec<Vec<(Load, PerRequest)>> = vec![Vec::new(); servers.len()];
        for round in 0..o.rounds {
            let n = rotating.len();
            let order = crate::order::order(n, n, round)
                .map(|i| rotating[i])
                .chain(last.iter().copied());
            for k in order {
                std::thread::sleep(Duration::from_millis(300)); // let the previous run's work settle
                runs[k].push(run(&servers[k], o, conns, 2.0));
            }
        }
        let c = conns_label(conns);
        for (k, s) in servers.iter().enumerate() {
            let r = &runs[k];
            if r.is_empty() {
                continue;
            }
            let med = |f: &dyn Fn(&(Load, PerRequest)) -> f64| median(r.iter().map(f).collect());
            let mut row = |what: &str, v: f64, unit: &str| {
                results.push((
                    format!("1 KiB PUT, {c}: {what}"),
                    s.name.clone(),
                    v,
                    unit.into(),
                ))
            };
            row(&format!("req/s ({tool})"), med(&|x| x.0.rps), "req/s");
            row("p50, median of rounds", med(&|x| x.0.p50_us), "us");
            if conns == 1 {
                // On a small VM the one-connection round trip is bimodal
                // (see `wakeup_ipis`): the best round shows the fast mode,
                // the IPIs per request which mode the rounds were in.
                let best = r.iter().map(|x| x.0.p50_us).fold(f64::INFINITY, f64::min);
                row("p50, best round", best, "us");
                let ipis = med(&|x| x.1.ipis);
                if ipis.is_finite() {
                    row("wake-up IPIs per request (all CPUs)", ipis, "per request");
                }
            }
            if o.script.is_some() {
                row("p99", med(&|x| x.0.p99_us), "us");
            }
            row("server CPU per request", med(&|x| x.1.cpu_s * 1e6), "us");
            row(
                "server user-space CPU per request",
                med(&|x| x.1.user_s * 1e6),
                "us",
            );
            let busy = med(&|x| x.1.machine_busy * 100.0);
            if busy.is_finite() {
                row("machine busy, % of all CPUs", busy, "%");
            }
            // wrk's own CPU over its run: with one wrk thread, near 100%
            // says the client, not the server, set the pace.
            if r.iter().all(|x| x.0.client_cpu_s.is_some()) {
                let secs = o.secs_per_run.round().max(1.0);
                row(
                    "client (wrk) CPU, % of one CPU",
                    med(&|x| x.0.client_cpu_s.unwrap_or(f64::NAN) / secs * 100.0),
                    "%",
                );
            }
            let errors: u64 = r.iter().map(|x| x.0.non2xx + x.0.socket_errors).sum();
            if errors > 0 {
                row(
                    "non-2xx + socket errors, all rounds",
                    errors as f64,
                    "count",
                );
            }
        }
    }
}

/// Many connections at once (`conns`, 10,000 by default): requests/s, p99
/// and whether every request was answered 2xx, per server. wrk's timeout
/// is long (`timeout_s`): a slow answer is reported in p99, not as an
/// error, and an answer that never comes is a timeout error.
pub fn many_conns(
    servers: &[LoadServer],
    conns: usize,
    o: &LoadOpts,
    timeout_s: f64,
    results: &mut Results,
) {
    println!(
        "{}: {} rounds x {} servers x {} s (wrk, --timeout {timeout_s} s)",
        conns_label(conns),
        o.rounds,
        servers.len(),
        o.secs_per_run
    );
    let mut runs: Vec<Vec<(Load, PerRequest)>> = vec![Vec::new(); servers.len()];
    for round in 0..o.rounds {
        let n = servers.len();
        for k in crate::order::order(n, n, round) {
            // Longer pause: the previous run's 10,000 connections close
            // and their server-side state goes away.
            std::thread::sleep(Duration::from_secs(1));
            runs[k].push(run(&servers[k], o, conns, timeout_s));
        }
    }
    let c = conns_label(conns);
    for (k, s) in servers.iter().enumerate() {
        let r = &runs[k];
        let med = |f: &dyn Fn(&(Load, PerRequest)) -> f64| median(r.iter().map(f).collect());
        let requests: f64 = r.iter().map(|x| x.0.requests).sum();
        let errors: u64 = r.iter().map(|x| x.0.non2xx + x.0.socket_errors).sum();
        let mut row = |what: &str, v: f64, unit: &str| {
            results.push((
                format!("1 KiB PUT, {c}: {what}"),
                s.name.clone(),
                v,
                unit.into(),
            ))
        };
        row("req/s", med(&|x| x.0.rps), "req/s");
        row("p99", med(&|x| x.0.p99_us), "us");
        row("server CPU per request", med(&|x| x.1.cpu_s * 1e6), "us");
        row("requests, all rounds", requests, "count");
        row(
            "non-2xx + socket errors, all rounds",
            errors as f64,
            "count",
        );
    }
}

/// Paced 1 KiB PUTs: one connection, a request every `gap`, `o.rounds`
/// rounds of `o.secs_per_run` per server (the order changing every round:
/// `crate::order`), with the built-in client. Where the busy polling of
/// the io_uring loops shows what it costs when the gaps are longer than
/// its window: p50, server CPU per request and the rate reached.
pub fn paced(servers: &[LoadServer], gap: Duration, o: &LoadOpts, results: &mut Results) {
    let label = format!("1 KiB PUT every {} us, 1 conn", gap.as_micros());
    println!(
        "{label}: {} rounds x {} servers x {} s (built-in client)",
        o.rounds,
        servers.len(),
        o.secs_per_run
    );
    let mut runs: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); servers.len()];
    for round in 0..o.rounds {
        let n = servers.len();
        for k in crate::order::order(n, n, round) {
            std::thread::sleep(Duration::from_millis(300));
            let s = &servers[k];
            let c0 = tree_cpu_s(s.pid);
            let (p50_us, requests) = paced_puts(s.addr, gap, o.secs_per_run);
            let cpu_us = (tree_cpu_s(s.pid) - c0) / requests.max(1.0) * 1e6;
            runs[k].push((p50_us, cpu_us, requests / o.secs_per_run));
        }
    }
    for (k, s) in servers.iter().enumerate() {
        let r = &runs[k];
        let med = |f: &dyn Fn(&(f64, f64, f64)) -> f64| median(r.iter().map(f).collect());
        for (what, v, unit) in [
            ("p50", med(&|x| x.0), "us"),
            ("server CPU per request", med(&|x| x.1), "us"),
            ("req/s", med(&|x| x.2), "req/s"),
        ] {
            results.push((format!("{label}: {what}"), s.name.clone(), v, unit.into()));
        }
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn wakeup_ipis_sum_rescheduling_and_function_call_interrupts() {
        let text = "           CPU0       CPU1\n\
             LOC:   13025349   13043168   Local timer interrupts\n\
             RES:        460         33   Rescheduling interrupts\n\
             CAL:       3580       3529   Function call interrupts\n\
             TLB:    5457450    4753334   TLB shootdowns\n";
        assert_eq!(super::parse_wakeup_ipis(text), Some(460 + 33 + 3580 + 3529));
        assert_eq!(super::parse_wakeup_ipis("LOC: 1 2 Local timer\n"), None);
        assert_eq!(super::parse_wakeup_ipis(""), None);
    }

    #[test]
    fn machine_busy_ticks_leave_out_idle_and_iowait() {
        let text = "cpu  3770196 181 954403 2754567 373492 0 155619 60309 0 0\n\
                    cpu0 1735119 90 456893 1551328 186322 0 73916 29624 0 0\n";
        assert_eq!(
            super::parse_machine_busy_ticks(text),
            Some(3770196 + 181 + 954403 + 155619 + 60309)
        );
        assert_eq!(super::parse_machine_busy_ticks("cpu  1 2 3\n"), None);
        assert_eq!(
            super::parse_machine_busy_ticks("cpu0 1 2 3 4 5 6 7 8\n"),
            None
        );
        assert_eq!(
            super::parse_machine_busy_ticks("cpu  1 2 x 4 5 6 7 8\n"),
            None
        );
    }

    #[test]
    fn the_polling_baseline_runs_at_one_connection_only() {
        let poll = crate::baseline::POLLING;
        assert!(super::runs_at(poll, 1));
        assert!(!super::runs_at(poll, 16));
        assert!(super::runs_at("network-only", 256));
    }
}
