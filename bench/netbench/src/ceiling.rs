//! What the machine allows at many connections, whatever the server.
//!
//! The benchmark's client (wrk) runs on the machine it measures, and the
//! loopback's TCP work (on the 2-vCPU guest of 2026-12-02 a quarter of
//! all CPU time at 256 connections, as softirqs charged to whichever of
//! the two processes they interrupt) is done for both sides on the same
//! CPUs. So a server's own CPU time does not say how close a run came to
//! what the machine can do; how busy the whole machine was does.
//! A run that kept `busy` of all CPUs busy for `req/s` could at best, with
//! every CPU busy at the same cost per request, reach `req/s / busy`: the
//! server's **CPU ceiling** in that run. A server near 100% busy has no
//! idle CPU left to turn into requests, and only less CPU per request (its
//! own, the client's or the kernel's on its behalf) raises its rate.
//!
//! Printed as references (no verdict) beside issue 11's req/s targets: a
//! pktfs server's ceiling over nginx's measured rate is the most the
//! `>= 2.5x nginx` target could read in that run at that run's costs per
//! request.

use crate::report::{get, Results};

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
    let at = |what: &str| get(r, &format!("1 KiB PUT, {conns}: {what}"), server);
    let rps = at("req/s")?;
    let busy = at("machine busy")? / 100.0;
    if !(rps > 0.0 && busy > 0.0) {
        return None;
    }
    Some(Ceiling {
        rps: rps / busy,
        reached: busy,
    })
}

/// The reference lines: each server's ceiling at 16 and 256 connections,
/// and for each pktfs server its ceiling over nginx's measured req/s.
pub fn lines(r: &Results, pktfs: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for conns in ["16 conns", "256 conns"] {
        let nginx_rps = get(r, &format!("1 KiB PUT, {conns}: req/s"), "nginx");
        for server in ["network-only", "nginx"].iter().chain(pktfs) {
            let Some(c) = ceiling(r, conns, server) else {
                continue;
            };
            out.push(format!(
                "| CPU ceiling, 1 KiB PUT, {conns}: req/s / the machine's busy share | {server} | {:.1}k req/s (the machine {:.0}% busy) | reference |",
                c.rps / 1e3,
                c.reached * 100.0
            ));
            if let (true, Some(n)) = (pktfs.contains(server), nginx_rps.filter(|&n| n > 0.0)) {
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
        let l = lines(&r, &["pktfs"]);
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
