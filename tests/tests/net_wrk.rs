//! wrk against the HTTP server (needs wrk: `prereq` says what happens
//! without it): many keep-alive connections at once, every answer counted
//! in the metrics.

use std::process::Command;

use crate::net_common::*;
use crate::prereq;

#[test]
fn wrk_load_is_answered_and_counted() {
    require!(prereq::tool("wrk"));
    let s = server(64 << 20, |_| {});
    assert_eq!(
        http(s.http, "PUT", "/w/file.bin", &[], &data(4096, 1)).status,
        201
    );
    let out = Command::new("wrk")
        .args(["-t", "2", "-c", "16", "-d", "2s", "--latency"])
        .arg(format!("http://{}/w/file.bin", s.http))
        .output()
        .expect("wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed: {text}");
    // "N requests in Xs, Y read"; no "Non-2xx" line, no socket errors.
    let n: u64 = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk output: {text}"));
    assert!(n > 100, "wrk made {n} requests: {text}");
    assert!(!text.contains("Non-2xx"), "{text}");
    assert!(!text.contains("Socket errors"), "{text}");
    // Every answer wrk counted is in the metrics once its connection ended.
    s.settle();
    let m = http(s.http, "GET", "/metrics", &[], b"");
    let m = String::from_utf8(m.body).unwrap();
    let served: f64 = m
        .lines()
        .find_map(|l| l.strip_prefix("pktfs_http_requests_total{method=\"GET\",status=\"200\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{m}"));
    assert!(served >= n as f64, "metrics {served} < wrk {n}");
    s.check();
}
