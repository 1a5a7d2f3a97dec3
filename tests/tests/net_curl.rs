//! curl as the client (needs curl: `prereq` says what happens without it).

use std::process::{Command, Stdio};

use crate::net_common::*;
use crate::prereq;

const MIB: u64 = 1 << 20;

fn curl(args: &[&str]) -> (i32, Vec<u8>) {
    let out = Command::new("curl")
        .args(["-s", "-S", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl");
    (out.status.code().unwrap_or(-1), out.stdout)
}

/// Status code of a request (curl -w).
fn code(args: &[&str]) -> u16 {
    let mut a = vec!["-o", "/dev/null", "-w", "%{http_code}"];
    a.extend_from_slice(args);
    String::from_utf8(curl(&a).1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn curl_upload_download_range_chunked_delete() {
    require!(prereq::tool("curl"));
    let s = server(128 * MIB, |c| {
        c.token = Some(pktfs_netpath::Token::from_file_contents("tok").unwrap())
    });
    let base = format!("http://{}", s.http);
    let auth = "Authorization: Bearer tok";
    let dir = s.dir.path();
    // A 5 MiB upload: curl sends Expect: 100-continue for it.
    let big = data(5 << 20, 1);
    let f = dir.join("big.bin");
    std::fs::write(&f, &big).unwrap();
    let fs = f.to_str().unwrap();
    assert_eq!(code(&["-T", fs, &format!("{base}/up/big.bin")]), 401);
    assert_eq!(
        code(&["-H", auth, "-T", fs, &format!("{base}/up/big.bin")]),
        201
    );
    // Reads need the token too.
    assert_eq!(code(&[&format!("{base}/up/big.bin")]), 401);
    let (rc, got) = curl(&["-H", auth, &format!("{base}/up/big.bin")]);
    assert_eq!(rc, 0);
    assert!(got == big);
    // Range.
    let (_, part) = curl(&["-H", auth, "-r", "1000-1999", &format!("{base}/up/big.bin")]);
    assert_eq!(part, &big[1000..2000]);
    // HEAD.
    let (_, head) = curl(&["-H", auth, "-I", &format!("{base}/up/big.bin")]);
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.contains("content-length: 5242880"), "{head}");
    // Chunked upload from stdin.
    let small = data(300_000, 2);
    let mut child = Command::new("curl")
        .args([
            "-s",
            "-S",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            auth,
            "-H",
            "Transfer-Encoding: chunked",
            "-T",
            "-",
            &format!("{base}/up/chunked"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for p in small.chunks(10_000) {
            stdin.write_all(p).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "201");
    assert_eq!(s.read("/up/chunked").unwrap(), small);
    // POST --data-binary.
    let p = dir.join("p");
    std::fs::write(&p, b"posted\0bytes").unwrap();
    assert_eq!(
        code(&[
            "-H",
            auth,
            "--data-binary",
            &format!("@{}", p.display()),
            &format!("{base}/up/posted")
        ]),
        201
    );
    assert_eq!(s.read("/up/posted").unwrap(), b"posted\0bytes");
    // Listing, DELETE, 404.
    let (_, list) = curl(&["-H", auth, &format!("{base}/up/")]);
    assert_eq!(String::from_utf8_lossy(&list), "big.bin\nchunked\nposted\n");
    assert_eq!(
        code(&["-H", auth, "-X", "DELETE", &format!("{base}/up/posted")]),
        204
    );
    assert_eq!(code(&["-H", auth, &format!("{base}/up/posted")]), 404);
    // --path-as-is lets curl send dot segments: refused.
    assert_eq!(
        code(&[
            "-H",
            auth,
            "--path-as-is",
            &format!("{base}/up/../../etc/passwd")
        ]),
        400
    );
    // Keep-alive: several URLs on one curl connection.
    let (rc, both) = curl(&[
        "-H",
        auth,
        &format!("{base}/up/chunked"),
        &format!("{base}/up/chunked"),
    ]);
    assert_eq!(rc, 0);
    assert_eq!(both.len(), 2 * small.len());
    s.check();
}

#[test]
fn curl_conditional_requests_and_json() {
    require!(prereq::tool("curl"));
    let s = server(64 * MIB, |_| {});
    let base = format!("http://{}", s.http);
    let dir = s.dir.path();
    let src = dir.join("report.json");
    std::fs::write(&src, b"{\"ok\": true}\n").unwrap();
    // Create-only upload: the second one is refused with 412.
    let put = |extra: &str| {
        code(&[
            "-T",
            src.to_str().unwrap(),
            "-H",
            extra,
            &format!("{base}/r/report.json"),
        ])
    };
    assert_eq!(put("If-None-Match: *"), 201);
    assert_eq!(put("If-None-Match: *"), 412);
    // curl's own ETag cache: --etag-save, then --etag-compare gets a 304.
    let tags = dir.join("etags");
    let url = format!("{base}/r/report.json");
    let (rc, body) = curl(&["--etag-save", tags.to_str().unwrap(), &url]);
    assert_eq!((rc, body.as_slice()), (0, &b"{\"ok\": true}\n"[..]));
    let saved = std::fs::read_to_string(&tags).unwrap();
    assert!(saved.trim().starts_with("\"c-"), "{saved}");
    assert_eq!(code(&["--etag-compare", tags.to_str().unwrap(), &url]), 304);
    // Content-Type from the name, seen by curl.
    let (_, ty) = curl(&["-o", "/dev/null", "-w", "%{content_type}", &url]);
    assert_eq!(ty, b"application/json");
    // The listing as JSON.
    let (_, list) = curl(&["-H", "Accept: application/json", &format!("{base}/r/")]);
    let v: serde_json::Value = serde_json::from_slice(&list).unwrap();
    assert_eq!(v[0]["name"], "report.json");
    assert_eq!(v[0]["etag"].as_str(), Some(saved.trim()));
}
