//! `/metrics` over real sockets: the Prometheus text format parses, and
//! the counters move with the requests served.

use std::collections::HashMap;

use crate::net_common::*;

/// Parse the text exposition: `name{labels} value` lines (and `# ...`
/// comments, ending with `# EOF`). Panics on a line that does not parse.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut m = HashMap::new();
    assert!(text.trim_end().ends_with("# EOF"), "ends with # EOF");
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line:?}"));
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value of {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "metric name in {line:?}"
        );
        m.insert(series.to_string(), v);
    }
    m
}

fn scrape(s: &Server) -> HashMap<String, f64> {
    let r = http(s.http, "GET", "/metrics", &[], b"");
    assert_eq!(r.status, 200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/openmetrics-text"));
    parse(std::str::from_utf8(&r.body).unwrap())
}

#[test]
fn metrics_parse_and_count_what_was_served() {
    let s = server(64 << 20, |_| {});
    let m0 = scrape(&s);
    let put = "pktfs_http_requests_total{method=\"PUT\",status=\"201\"}";
    let miss = "pktfs_http_requests_total{method=\"GET\",status=\"404\"}";
    assert_eq!(m0.get(put), None);
    // PM usage is there from the start.
    let total = m0["pktfs_pm_buffer_bytes"];
    assert!(total > 0.0 && m0["pktfs_pm_buffer_free_bytes"] <= total);
    assert!(m0["pktfs_pm_inodes"] > 0.0);
    let free_inodes0 = m0["pktfs_pm_inodes_free"];

    for k in 0..3 {
        let r = http(s.http, "PUT", &format!("/m/{k}"), &[], &data(100_000, k));
        assert_eq!(r.status, 201);
    }
    assert_eq!(http(s.http, "GET", "/m/0", &[], b"").status, 200);
    assert_eq!(http(s.http, "GET", "/nope", &[], b"").status, 404);
    // Connections add their counts when they end.
    s.settle();
    let m = scrape(&s);
    assert_eq!(m[put], 3.0);
    assert_eq!(m[miss], 1.0);
    assert_eq!(
        m["pktfs_http_requests_total{method=\"GET\",status=\"200\"}"],
        2.0, // the first scrape and GET /m/0
    );
    assert!(m["pktfs_net_received_bytes_total"] >= 300_000.0);
    assert!(m["pktfs_net_sent_bytes_total"] >= 100_000.0);
    assert!(m["pktfs_net_connections_accepted_total"] >= 7.0);
    assert!(m["pktfs_net_connections_open"] >= 1.0, "the scrape's own");
    assert_eq!(m["pktfs_net_files_stored_total"], 3.0);
    assert!(m["pktfs_commit_duration_seconds_count"] >= 3.0);
    assert!(m["pktfs_commit_duration_seconds_sum"] > 0.0);
    assert!(
        m["pktfs_pm_inodes_free"] <= free_inodes0 - 4.0,
        "3 files, 1 dir"
    );
    assert!(m["pktfs_pm_buffer_free_bytes"] < m0["pktfs_pm_buffer_free_bytes"]);
    // The loops' own counters are there (on threads they stay 0); nothing
    // here idled out, ran out of space or was read into DRAM.
    for name in [
        "pktfs_net_connections_idle_closed_total",
        "pktfs_net_connections_nospace_closed_total",
        "pktfs_net_dram_reads_total",
    ] {
        assert_eq!(m[name], 0.0, "{name}");
    }
    assert!(m["pktfs_net_ring_empty_total"] >= 0.0);
    // The library's stats agree.
    let st = s.stats();
    assert_eq!(st.files_stored, 3);
    assert!(st.requests >= 6);

    // HEAD answers the head; changes to the path are refused.
    let mut c = Conn::new(s.http);
    let h = c.request("HEAD", "/metrics", &[], b"");
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    assert_eq!(c.request("PUT", "/metrics", &[], b"x").status, 405);
    assert_eq!(c.request("DELETE", "/metrics", &[], b"").status, 405);
    assert!(s.lookup("/metrics").is_none());

    // An upload on a keep-alive connection leaves a spare file for its
    // next one, reported while it is held.
    let spares = "pktfs_http_spare_files";
    assert_eq!(m[spares], 0.0, "connections that closed hold none");
    assert_eq!(c.request("PUT", "/m/ka", &[], b"x").status, 201);
    let r = c.request("GET", "/metrics", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(parse(std::str::from_utf8(&r.body).unwrap())[spares], 1.0);
    drop(c);
    s.settle();
    assert_eq!(scrape(&s)[spares], 0.0, "freed with its connection");
}

#[test]
fn metrics_path_can_move_or_be_off() {
    let s = server(32 << 20, |c| {
        c.metrics_path = Some("/_pktfs/metrics".into())
    });
    assert_eq!(http(s.http, "GET", "/_pktfs/metrics", &[], b"").status, 200);
    // /metrics is an ordinary name again.
    assert_eq!(http(s.http, "PUT", "/metrics", &[], b"a file").status, 201);
    assert_eq!(http(s.http, "GET", "/metrics", &[], b"").body, b"a file");
    let s = server(32 << 20, |c| c.metrics_path = None);
    assert_eq!(http(s.http, "GET", "/metrics", &[], b"").status, 404);
}

/// Nothing is made at or below the metrics path through the plain
/// listener (a directory there could never be listed: GET of the path
/// answers the metrics), nor is it raw mode's directory.
#[test]
fn nothing_is_made_at_or_below_the_metrics_path() {
    let s = server(32 << 20, |_| {});
    for (m, path) in [
        ("PUT", "/metrics/x"),
        ("POST", "/%6Detrics/a/b"),
        ("PUT", "/metrics/"),
    ] {
        let r = http(s.http, m, path, &[], b"x");
        assert_eq!(
            r.status,
            405,
            "{m} {path}: {:?}",
            String::from_utf8_lossy(&r.body)
        );
        assert!(
            String::from_utf8_lossy(&r.body).contains("reserved"),
            "{m} {path}"
        );
    }
    assert!(s.lookup("/metrics").is_none());
    // Beside it, names are ordinary.
    assert_eq!(http(s.http, "PUT", "/metrics2/x", &[], b"x").status, 201);
    // A metrics path moved below a directory reserves only itself.
    let s = server(32 << 20, |c| {
        c.metrics_path = Some("/_pktfs/metrics".into())
    });
    assert_eq!(
        http(s.http, "PUT", "/_pktfs/metrics/x", &[], b"x").status,
        405
    );
    assert_eq!(http(s.http, "PUT", "/_pktfs/x", &[], b"x").status, 201);
    assert!(s.lookup("/_pktfs/metrics").is_none());
    // Raw mode's directory cannot be there either: refused at start,
    // saying why.
    let (_d, vol) = image(16 << 20);
    let cfg = pktfs_netpath::Config {
        raw_listen: Some("127.0.0.1:0".parse().unwrap()),
        raw_dir: "/metrics/raw".into(),
        ..Default::default()
    };
    let e = pktfs_netpath::Services::start(vol.clone(), cfg, None).unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
    assert!(vol.resolve_path("/metrics").is_err(), "nothing made");
}
