//! The results table, and the summary of the network path's targets
//! (docs/BENCHMARKS.md): each target's measured ratio and whether it was
//! met, computed from this run's rows.

use crate::results::{get, get_unit, Results};

/// The row of a server's CPU per request at one connection (a target,
/// the polling floor, and the note on dear wake-ups read it).
const CPU_1CONN: &str = "1 KiB PUT, 1 conn: server CPU per request";

fn fmt_value(v: f64, unit: &str) -> String {
    match unit {
        "GB/s" => format!("{v:.2} {unit}"),
        "ns/B" => format!("{v:.3} {unit}"),
        "us" => format!("{v:.2} {unit}"),
        "count" => format!("{v:.0}"),
        // A rate per request, not a total: fractions matter.
        "per request" => format!("{v:.2}"),
        _ => format!("{v:.1} {unit}"),
    }
}

/// All rows, with ratios to the row group's reference (network-only;
/// sendfile-tmpfs for GET) and to nginx where it ran.
pub fn print_table(results: &Results) {
    println!();
    println!("| measurement | server | median | vs reference | vs nginx |");
    println!("|---|---|---|---|---|");
    for (what, server, v, unit) in results {
        let refname = if what.starts_with("GET") {
            "sendfile-tmpfs"
        } else {
            "network-only"
        };
        let ratio = |to: &str| match results.iter().find(|(w, s, _, _)| w == what && s == to) {
            Some(r)
                // A share of a CPU is read as it is, not against another's.
                if !matches!(unit.as_str(), "count" | "per request" | "%")
                    && r.2 != 0.0
                    && !r.2.is_nan() =>
            {
                format!("{:.2}x", v / r.2)
            }
            _ => String::new(),
        };
        println!(
            "| {what} | {server} | {} | {} | {} |",
            fmt_value(*v, unit),
            ratio(refname),
            ratio("nginx")
        );
    }
}

/// A target: `server`'s value of `what` divided by `base`'s, compared
/// with `bound`.
struct Ratio<'a> {
    what: &'a str,
    label: String,
    base: &'a str,
    at_least: bool,
    bound: f64,
}

/// `server`'s value of `what` over `base`'s: the ratio and the
/// measurement as printed ("1.12x (a vs b)"); `Err` says why there is none.
fn measured(r: &Results, what: &str, server: &str, base: &str) -> Result<(f64, String), String> {
    match (get_unit(r, what, server), get(r, what, base)) {
        (Some((a, unit)), Some(b)) if b > 0.0 => {
            let x = a / b;
            Ok((
                x,
                format!("{x:.2}x ({} vs {})", fmt_value(a, unit), fmt_value(b, unit)),
            ))
        }
        (None, _) => Err("not measured".to_string()),
        _ => Err(format!("not measured ({base} did not run)")),
    }
}

/// One target's line. `emulated`: a server in a mode that is not the
/// targets' on this CPU, whose verdict is shown as a reference.
fn ratio_line(r: &Results, server: &str, t: &Ratio<'_>, emulated: bool) -> String {
    let op = if t.at_least { ">=" } else { "<=" };
    let target = format!("{} {op} {:.2}x {}", t.label, t.bound, t.base);
    let (measured, verdict) = match measured(r, t.what, server, t.base) {
        Ok((x, shown)) => {
            // Compared at the printed precision, so the verdict agrees
            // with the ratio shown.
            let x2 = (x * 100.0).round() / 100.0;
            let met = if t.at_least {
                x2 >= t.bound
            } else {
                x2 <= t.bound
            };
            (shown, if met { "met" } else { "MISSED" })
        }
        Err(why) => (why, "-"),
    };
    if emulated {
        format!(
            "| {target} | {server} | {measured} | reference: {verdict} as on a CPU without clwb |"
        )
    } else {
        format!("| {target} | {server} | {measured} | {verdict} |")
    }
}

/// The network path's targets against this run.
///
/// `emulated`: pktfs servers in a mode that is not the targets' on this
/// CPU (clflushopt's write-backs where the CPU has clwb): their lines are
/// printed with the verdict they would get, marked as references.
pub fn print_summary(
    r: &Results,
    machine: &str,
    pktfs: &[&str],
    emulated: &[&str],
    many: usize,
    notes: &[String],
) {
    println!();
    println!("## The network path's targets, this run");
    println!();
    println!("machine: {machine}");
    for n in notes {
        println!("note: {n}");
    }
    println!();
    println!("| target | server | measured | verdict |");
    println!("|---|---|---|---|");
    let mut targets: Vec<Ratio<'_>> = Vec::new();
    for (c, what) in [
        (16, "1 KiB PUT, 16 conns: req/s"),
        (256, "1 KiB PUT, 256 conns: req/s"),
    ] {
        targets.push(Ratio {
            what,
            label: format!("1 KiB PUT req/s, {c} conns"),
            base: "network-only",
            at_least: true,
            bound: 1.0,
        });
        targets.push(Ratio {
            what,
            label: format!("1 KiB PUT req/s, {c} conns"),
            base: "nginx",
            at_least: true,
            bound: 2.5,
        });
    }
    targets.push(Ratio {
        what: "1 KiB PUT, 1 conn: p50, median of rounds",
        label: "1 KiB PUT p50, 1 conn (median of rounds)".into(),
        base: "network-only",
        at_least: false,
        bound: 1.05,
    });
    for c in ["1 conn", "16 conns", "256 conns"] {
        targets.push(Ratio {
            what: match c {
                "1 conn" => CPU_1CONN,
                "16 conns" => "1 KiB PUT, 16 conns: server CPU per request",
                _ => "1 KiB PUT, 256 conns: server CPU per request",
            },
            label: format!("server CPU per 1 KiB PUT, {c}"),
            base: "network-only",
            at_least: false,
            bound: 1.2,
        });
    }
    targets.push(Ratio {
        what: "PUT big",
        label: "large PUT GB/s".into(),
        base: "network-only",
        at_least: true,
        bound: 0.9,
    });
    targets.push(Ratio {
        what: "GET big",
        label: "large GET GB/s".into(),
        base: "sendfile-tmpfs",
        at_least: true,
        bound: 1.0,
    });
    for server in pktfs {
        for t in &targets {
            println!("{}", ratio_line(r, server, t, false));
        }
        let c = format!("1 KiB PUT, {many} conns");
        let errors = get(r, &format!("{c}: non-2xx + socket errors"), server);
        let requests = get(r, &format!("{c}: requests"), server);
        let p99 = get(r, &format!("{c}: p99"), server);
        let (measured, verdict) = match (errors, requests) {
            (Some(e), Some(n)) => (
                format!(
                    "{n:.0} requests, {e:.0} non-2xx or socket errors; p99 {}",
                    p99.map_or("?".into(), |p| fmt_value(p / 1e3, "ms"))
                ),
                if e == 0.0 && n > 0.0 { "met" } else { "MISSED" },
            ),
            _ => ("not measured".to_string(), "-"),
        };
        println!("| {many} connections: every request answered 2xx, p99 reported | {server} | {measured} | {verdict} |");
    }
    for server in emulated {
        for t in &targets {
            println!("{}", ratio_line(r, server, t, true));
        }
    }
    print_polling_floor(r, pktfs);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for l in crate::ceiling::lines(r, pktfs, cpus) {
        println!("{l}");
    }
    print_client_bound(r, pktfs);
    if let Some(n) = dear_wakeups_note(r, pktfs) {
        println!("{n}");
    }
}

/// A note when network-only's one-connection CPU per request was above
/// the polling floor's: its wake-ups then cost more than a polling
/// server's whole round trip, and a polling pktfs server's CPU ratio to it
/// reads better than the server's work (a ratio can read "met" while the
/// loops stand well above the floor). None when the floor is at or above
/// network-only, or either did not run.
fn dear_wakeups_note(r: &Results, pktfs: &[&str]) -> Option<String> {
    let poll = crate::baseline::POLLING;
    let floor = get(r, CPU_1CONN, poll)?;
    let blocking = get(r, CPU_1CONN, "network-only")?;
    if !(floor > 0.0 && floor < blocking) {
        return None;
    }
    let over: Vec<String> = pktfs
        .iter()
        .filter_map(|s| get(r, CPU_1CONN, s).map(|v| format!("{s} {:.2}x", v / floor)))
        .collect();
    Some(format!(
        "note: at 1 conn network-only's wake-ups cost more than polling's whole round trip \
         (the polling floor {:.2}x of its CPU per request): the 1-conn CPU verdicts against \
         network-only read better than the servers' work; against the floor: {}",
        floor / blocking,
        over.join(", ")
    ))
}

/// A load the client could not drive harder: wrk (one thread by default)
/// at or near a whole CPU against a pktfs server. Its req/s ratios then
/// say how fast wrk can go on this machine as much as how fast the server
/// can; printed so that a reader does not take them for the server's
/// ceiling (on a 2-vCPU machine one wrk thread can be the limit against
/// the loops while it is not against nginx).
fn print_client_bound(r: &Results, pktfs: &[&str]) {
    for n in client_bound_notes(r, pktfs) {
        println!("{n}");
    }
}

/// [`print_client_bound`]'s lines.
fn client_bound_notes(r: &Results, pktfs: &[&str]) -> Vec<String> {
    const CLIENT_BOUND_PCT: f64 = 95.0;
    let mut notes = Vec::new();
    for c in ["1 conn", "16 conns", "256 conns"] {
        let what = format!("1 KiB PUT, {c}: client (wrk) CPU");
        let bound: Vec<String> = pktfs
            .iter()
            .filter_map(|s| {
                get(r, &what, s)
                    .filter(|&v| v >= CLIENT_BOUND_PCT)
                    .map(|v| format!("{s} {v:.0}%"))
            })
            .collect();
        if bound.is_empty() {
            continue;
        }
        let nginx =
            get(r, &what, "nginx").map_or(String::new(), |v| format!("; against nginx {v:.0}%"));
        notes.push(format!(
            "note: at {c} the client was the limit: wrk used a whole CPU against {}{nginx}",
            bound.join(", ")
        ));
    }
    notes
}

/// Not targets: what a server that does no work costs per request at one
/// connection when it polls its socket instead of sleeping, and where
/// pktfs (which polls by default) stands against that floor. Busy polling
/// buys the one-connection p50; while it polls, a server's CPU per request
/// is the whole round trip, the client's share included.
fn print_polling_floor(r: &Results, pktfs: &[&str]) {
    const P50: &str = "1 KiB PUT, 1 conn: p50, median of rounds";
    let poll = crate::baseline::POLLING;
    if get(r, CPU_1CONN, poll).is_none() {
        return;
    }
    // Same measurement as a target line, no verdict.
    let line = |label: &str, what: &str, server: &str, base: &str| {
        let shown = measured(r, what, server, base).map_or_else(|why| why, |m| m.1);
        println!("| {label} / {base} | {server} | {shown} | reference |");
    };
    line(
        "polling floor: CPU per 1 KiB PUT, 1 conn",
        CPU_1CONN,
        poll,
        "network-only",
    );
    line("polling floor: p50, 1 conn", P50, poll, "network-only");
    for server in pktfs {
        line(
            "CPU per 1 KiB PUT, 1 conn, over the polling floor",
            CPU_1CONN,
            server,
            poll,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::client_bound_notes;

    fn row(what: &str, server: &str, v: f64) -> (String, String, f64, String) {
        (what.into(), server.into(), v, "%".into())
    }

    #[test]
    fn dear_wake_ups_are_noted_against_the_polling_floor() {
        let cpu = super::CPU_1CONN;
        let poll = crate::baseline::POLLING;
        let r = vec![
            row(cpu, "network-only", 36.94),
            row(cpu, poll, 31.07),
            row(cpu, "pktfs clwb uring", 42.23),
        ];
        let n = super::dear_wakeups_note(&r, &["pktfs clwb uring", "pktfs clwb epoll"])
            .expect("a note");
        assert!(
            n.contains("(the polling floor 0.84x of its CPU per request)"),
            "{n}"
        );
        assert!(
            n.ends_with("against the floor: pktfs clwb uring 1.36x"),
            "{n}"
        );
        // A floor above network-only (wake-ups cheap enough): no note.
        let r = vec![row(cpu, "network-only", 32.44), row(cpu, poll, 37.75)];
        assert_eq!(super::dear_wakeups_note(&r, &["pktfs clwb uring"]), None);
        assert_eq!(
            super::dear_wakeups_note(&Vec::new(), &["pktfs clwb uring"]),
            None
        );
    }

    #[test]
    fn a_saturated_client_is_noted_and_a_busy_one_is_not() {
        let r = vec![
            row(
                "1 KiB PUT, 16 conns: client (wrk) CPU, % of one CPU",
                "pktfs clwb uring",
                80.0,
            ),
            row(
                "1 KiB PUT, 256 conns: client (wrk) CPU, % of one CPU",
                "pktfs clwb uring",
                100.3,
            ),
            row(
                "1 KiB PUT, 256 conns: client (wrk) CPU, % of one CPU",
                "pktfs clwb epoll",
                94.0,
            ),
            row(
                "1 KiB PUT, 256 conns: client (wrk) CPU, % of one CPU",
                "nginx",
                48.5,
            ),
        ];
        let notes = client_bound_notes(&r, &["pktfs clwb uring", "pktfs clwb epoll"]);
        assert_eq!(
            notes,
            vec![
                "note: at 256 conns the client was the limit: wrk used a whole CPU \
                  against pktfs clwb uring 100%; against nginx 48%"
                    .to_string()
            ]
        );
        assert!(client_bound_notes(&Vec::new(), &["pktfs clwb uring"]).is_empty());
    }
}
