//! S3 requests for the tests, signed with SigV4 by pktfs-s3's `Signer`,
//! as raw bytes to send over [`crate::net_common::Conn`]. Feature `s3`.

use pktfs_s3::sigv4::{PayloadMode, Signer};

/// Seconds since the epoch, what a signature is dated with.
pub fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs() as i64
}

/// A request's bytes, signed by `who` (None: anonymous), the body sent
/// as is with a Content-Length (unless `extra` gives one).
pub fn signed(
    who: Option<&Signer>,
    method: &str,
    path: &str,
    query: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    payload: PayloadMode,
) -> Vec<u8> {
    let mut headers: Vec<(String, String)> = vec![("host".into(), "s3.test".into())];
    for (n, v) in extra {
        headers.push((n.to_string(), v.to_string()));
    }
    if let Some(s) = who {
        s.sign(method, path, query, &mut headers, &payload, now_s());
    }
    let target = if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    };
    let mut r = format!("{method} {target} HTTP/1.1\r\n");
    for (n, v) in &headers {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    if !headers.iter().any(|(n, _)| n == "content-length") {
        r.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut v = r.into_bytes();
    v.extend_from_slice(body);
    v
}
