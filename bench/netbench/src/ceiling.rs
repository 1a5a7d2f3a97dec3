//! What the machine allows at many connections, whatever the server.
//!
//! The benchmark's client (wrk) runs on the machine it measures, and the
//! loopback's TCP work (at many connections a large share of all CPU
//! time, as softirqs charged to whichever of the two processes they
//! interrupt) is done for both sides on the same
//! CPUs. So a server's own CPU time does not say how close a run came to
//! what the machine can do; how busy the whole machine was does.
//! A run that kept `busy` of all CPUs busy for `req/s` could at best, with
//! every CPU busy at the same cost per request, reach `req/s / busy`: the
//! server's **CPU ceiling** in that run. A server near 100% busy has no
//! idle CPU left to turn into requests, and only less CPU per request (its
//! own, the client's or the kernel's on its behalf) raises its rate.
//!
//! Printed as references (no verdict) beside the req/s targets: a
//! pktfs server's ceiling over nginx's measured rate is the most the
//! `>= 2.5x nginx` target could read in that run at that run's costs per
//! request.

use crate::results::{get, Results};

/// A server's CPU ceiling in one run, and how much of it was reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceiling {
    /// req/s / busy share.
    pub rps: f64,
    /// The machine's busy share of all CPUs (0-1): measured req/s over
    /// `rps`.
    pub reached: f64,
}

/// `server`'s ceiling at `conns` ("16 conns", "256 conns") from this run's
/// medians: its req/s and the machine's busy share. None if either is
/// missing (the server not run, no /proc/stat) or the machine was idle.
pub fn ceiling(r: &Results, conns: &str, server: &str) -> Option<Ceiling> {
    let rps = small_put(r, conns, server, "req/s")?;
    let busy = small_put(r, conns, server, "machine busy")? / 100.0;
    if !(rps > 0.0 && busy > 0.0) {
        return None;
    }
    Some(Ceiling {
        rps: rps / busy,
        reached: busy,
    })
}

/// Where the machine's CPU time per request went in one run, microseconds:
/// the server's own (its process, with the kernel's work done in it), the
/// client's (wrk's process), and the machine's in all (`cpus` times the
/// busy share, over req/s). What is left is work charged to neither
/// (softirq threads, the benchmark's own sampling), and the noise of
/// medians taken of different rounds and of a busy share sampled in the
/// middle of each run where the CPU times cover all of it: it can read
/// below zero.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub machine_us: f64,
    pub server_us: f64,
    pub client_us: f64,
}

/// `what` of the 1 KiB PUT run at `conns` against `server`.
fn small_put(r: &Results, conns: &str, server: &str, what: &str) -> Option<f64> {
    get(r, &format!("1 KiB PUT, {conns}: {what}"), server)
}

/// `server`'s [`Split`] at `conns`; None where a figure is missing. The
/// machine's CPU per request is `cpus` over the [`ceiling`]'s rate.
pub fn split(r: &Results, conns: &str, server: &str, cpus: usize) -> Option<Split> {
    let c = ceiling(r, conns, server)?;
    let rps = c.rps * c.reached;
    let machine_us = cpus as f64 / c.rps * 1e6;
    let client_us = small_put(r, conns, server, "client (wrk) CPU")? / 100.0 / rps * 1e6;
    let server_us = small_put(r, conns, server, "server CPU per request")?;
    Some(Split {
        machine_us,
        server_us,
        client_us,
    })
    .filter(|s| s.machine_us.is_finite() && s.server_us.is_finite() && s.client_us.is_finite())
}

/// The reference lines: each server's ceiling at 16 and 256 connections
/// and where its machine's CPU per request went; for each pktfs server its
/// ceiling over nginx's measured req/s, and nginx's own CPU per request
/// over its own. The last says how far apart the servers are; the req/s
/// ratio is smaller, because the client's CPU per request (on the same
/// CPUs) adds to both.
pub fn lines(r: &Results, pktfs: &[&str], cpus: usize) -> Vec<String> {
    let mut out = Vec::new();
    for conns in ["16 conns", "256 conns"] {
        let nginx_rps = get(r, &format!("1 KiB PUT, {conns}: req/s"), "nginx");
        let nginx_split = split(r, conns, "nginx", cpus);
        for server in ["network-only", "nginx"].iter().chain(pktfs) {
            let Some(c) = ceiling(r, conns, server) else {
                continue;
            };
            out.push(format!(
                "| CPU ceiling, 1 KiB PUT, {conns}: req/s / the machine's busy share | {server} | {:.1}k req/s (the machine {:.0}% busy) | reference |",
                c.rps / 1e3,
                c.reached * 100.0
            ));
            let sp = split(r, conns, server, cpus);
            if let Some(sp) = sp {
                out.push(format!(
                    "| the machine's CPU per 1 KiB PUT, {conns}: server + client (wrk) + the rest | {server} | {:.1} = {:.1} + {:.1} + {:.1} us | reference |",
                    sp.machine_us,
                    sp.server_us,
                    sp.client_us,
                    sp.machine_us - sp.server_us - sp.client_us
                ));
            }
            if !pktfs.contains(server) {
                continue;
            }
            if let (Some(n), Some(sp)) = (nginx_split, sp.filter(|sp| sp.server_us > 0.0)) {
                out.push(format!(
                    "| servers' own CPU per 1 KiB PUT, {conns}: nginx / this server | {server} | {:.2}x ({:.1} vs {:.1} us) | reference |",
                    n.server_us / sp.server_us,
                    n.server_us,
                    sp.server_us
                ));
            }
            if let Some(n) = nginx_rps.filter(|&n| n > 0.0) {
                out.push(format!(
                    "| most the nginx ratio could read, {conns}: CPU ceiling / nginx req/s | {server} | {:.2}x ({:.1}k vs {:.1}k req/s) | reference |",
                    c.rps / n,
                    c.rps / 1e3,
                    n / 1e3
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(server: &str, rps: f64, busy_pct: f64) -> Results {
        let c = "1 KiB PUT, 256 conns";
        vec![
            (
                format!("{c}: req/s (wrk)"),
                server.into(),
                rps,
                "req/s".into(),
            ),
            (
                format!("{c}: machine busy, % of all CPUs"),
                server.into(),
                busy_pct,
                "%".into(),
            ),
        ]
    }

    /// [`rows`] with the server's and wrk's CPU.
    fn rows_cpu(server: &str, rps: f64, busy_pct: f64, server_us: f64, wrk_pct: f64) -> Results {
        let c = "1 KiB PUT, 256 conns";
        let mut r = rows(server, rps, busy_pct);
        r.push((
            format!("{c}: server CPU per request"),
            server.into(),
            server_us,
            "us".into(),
        ));
        r.push((
            format!("{c}: client (wrk) CPU, % of one CPU"),
            server.into(),
            wrk_pct,
            "%".into(),
        ));
        r
    }

    #[test]
    fn the_machine_cpu_splits_into_server_client_and_the_rest() {
        // 72k req/s, two CPUs 96% busy: 26.7 us of machine per request;
        // wrk 88% of a CPU: 12.2 us; the server 13.4 us; 1.0 us left.
        let r = rows_cpu("pktfs", 72_000.0, 96.0, 13.4, 88.0);
        let sp = split(&r, "256 conns", "pktfs", 2).expect("a split");
        assert!((sp.machine_us - 26.667).abs() < 0.01, "{sp:?}");
        assert!((sp.client_us - 12.222).abs() < 0.01, "{sp:?}");
        assert!((sp.server_us - 13.4).abs() < 1e-9, "{sp:?}");
        // Without the client's CPU there is no split.
        assert_eq!(
            split(&rows("pktfs", 72_000.0, 96.0), "256 conns", "pktfs", 2),
            None
        );
        assert_eq!(split(&r, "16 conns", "pktfs", 2), None);
    }

    #[test]
    fn the_servers_own_cpu_is_compared_with_nginx() {
        let mut r = rows_cpu("pktfs", 72_000.0, 96.0, 13.4, 88.0);
        r.extend(rows_cpu("nginx", 29_000.0, 93.0, 45.2, 46.0));
        let l = lines(&r, &["pktfs"], 2);
        let split_line = l
            .iter()
            .find(|x| x.contains("server + client (wrk) + the rest | pktfs |"))
            .expect("pktfs's split");
        assert!(
            split_line.contains("| 26.7 = 13.4 + 12.2 + 1.0 us |"),
            "{split_line}"
        );
        let own = l
            .iter()
            .find(|x| x.contains("nginx / this server | pktfs |"))
            .expect("the servers' own ratio");
        // 45.2 / 13.4.
        assert!(own.contains("| 3.37x (45.2 vs 13.4 us) |"), "{own}");
        // nginx is not compared with itself.
        assert!(!l
            .iter()
            .any(|x| x.contains("nginx / this server | nginx |")));
    }

    #[test]
    fn the_ceiling_is_the_rate_over_the_busy_share() {
        // 60k req/s with the machine 90% busy: 66.7k req/s at 100%.
        let r = rows("pktfs", 60_000.0, 90.0);
        let c = ceiling(&r, "256 conns", "pktfs").expect("a ceiling");
        assert!((c.rps - 66_666.7).abs() < 1.0, "{c:?}");
        assert!((c.reached - 0.9).abs() < 1e-9, "{c:?}");
        assert_eq!(ceiling(&r, "16 conns", "pktfs"), None);
        assert_eq!(ceiling(&r, "256 conns", "nginx"), None);
        assert_eq!(
            ceiling(&rows("pktfs", 60_000.0, 0.0), "256 conns", "pktfs"),
            None
        );
        assert_eq!(
            ceiling(&rows("pktfs", 60_000.0, f64::NAN), "256 conns", "pktfs"),
            None
        );
    }

    #[test]
    fn a_pktfs_server_is_compared_with_nginx_measured_rate() {
        let mut r = rows("pktfs", 60_000.0, 90.0);
        r.extend(rows("nginx", 26_000.0, 98.0));
        let l = lines(&r, &["pktfs"], 2);
        assert_eq!(l.len(), 3, "{l:#?}");
        assert!(
            l[0].contains("| nginx | 26.5k req/s (the machine 98% busy) |"),
            "{}",
            l[0]
        );
        assert!(
            l[1].contains("| pktfs | 66.7k req/s (the machine 90% busy) |"),
            "{}",
            l[1]
        );
        // 66.7k / 26k.
        assert!(
            l[2].contains("| pktfs | 2.56x (66.7k vs 26.0k req/s) |"),
            "{}",
            l[2]
        );
    }
}
