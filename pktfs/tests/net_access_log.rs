//! `pktfs serve --log-file`: one access-log line per request, and failed
//! requests logged with their cause.

use std::process::Stdio;
use std::time::Duration;

use crate::cli_common::*;
use crate::net_common::*;

#[test]
fn access_log_and_request_failures_land_in_the_log_file() {
    let (dir, vol) = image(32 << 20);
    drop(vol);
    let img = dir.path().join("img");
    let log = dir.path().join("serve.log");
    let (child, addr) = serve_with(
        &img,
        &["--log-level", "info", "--log-file", log.to_str().unwrap()],
        Stdio::null(),
    );

    assert_eq!(http(addr, "PUT", "/logged.txt", &[], b"hello").status, 201);
    assert_eq!(http(addr, "GET", "/logged.txt", &[], b"").status, 200);
    assert_eq!(http(addr, "GET", "/absent", &[], b"").status, 404);
    // A client error with a cause: a bad chunk size.
    let mut c = Conn::new(addr);
    c.send(b"PUT /bad HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert_eq!(c.response(false).unwrap().status, 400);

    // Two uploads pipelined in one write: each line's bytes_in is its own
    // request's bytes (head and body), not what the server happened to
    // receive while serving it.
    let r1 = req_bytes("PUT", "/piped1", &[], &data(100_000, 1));
    let r2 = req_bytes("PUT", "/piped2", &[], &data(1_000, 2));
    let mut c = Conn::new(addr);
    c.send(&[r1.clone(), r2.clone()].concat());
    assert_eq!(c.response(false).unwrap().status, 201);
    assert_eq!(c.response(false).unwrap().status, 201);
    drop(c);

    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until(
        "access lines in the log file",
        Duration::from_secs(10),
        || {
            let t = read();
            t.contains("PUT")
                && t.contains("/logged.txt")
                && t.contains("/absent")
                && t.contains("/bad")
                && t.contains("/piped2")
        },
    );
    let text = read();
    // The access events (target pktfs::access; the file's format shows
    // the message, "access", and the fields).
    let access: Vec<&str> = text.lines().filter(|l| l.contains(" access ")).collect();
    let put = access
        .iter()
        .find(|l| l.contains("PUT") && l.contains("/logged.txt"))
        .unwrap_or_else(|| panic!("no access line for the PUT in:\n{text}"));
    for field in [
        "status=201",
        "peer=127.0.0.1:",
        "bytes_in=",
        "bytes_out=",
        "us=",
    ] {
        assert!(put.contains(field), "{field} in {put}");
    }
    assert!(
        access
            .iter()
            .any(|l| l.contains("/absent") && l.contains("404")),
        "{text}"
    );
    for (path, req) in [("/piped1 ", &r1), ("/piped2 ", &r2)] {
        let line = access
            .iter()
            .find(|l| l.contains(path))
            .unwrap_or_else(|| panic!("no access line for {path} in:\n{text}"));
        let want = format!("bytes_in={} ", req.len());
        assert!(line.contains(&want), "{want} in {line}");
    }
    // The 400 says why, at info (not only the access line).
    assert!(
        text.lines()
            .any(|l| l.contains("/bad") && l.contains("bad chunk size")),
        "the failed request's cause is logged:\n{text}"
    );
    stop(child);
}
