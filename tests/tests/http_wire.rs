//! The client side of `net_fuzz`: write bytes cut anywhere, half-close,
//! read everything until the server closes, and parse it strictly as
//! HTTP/1.1 responses.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long the server may take to close after the client half-closed.
/// Far above what it needs (it reads EOF at once); its timeouts are set
/// above this, so only an EOF can end the connection in time.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(8);

/// One response as the client saw it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_length: Option<u64>,
    pub etag: Option<String>,
    pub body: Vec<u8>,
}

/// Parse the responses in `b`, the whole of what the server sent;
/// `head_only(i)`: the i-th request was HEAD. Err if anything is not
/// well-formed HTTP/1.1.
pub fn parse_answers(
    mut b: &[u8],
    head_only: impl Fn(usize) -> bool,
) -> Result<Vec<Answer>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let end = b.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| {
            format!(
                "a response head without its end: {:?}",
                String::from_utf8_lossy(b)
            )
        })?;
        let head =
            std::str::from_utf8(&b[..end]).map_err(|_| "a head that is not UTF-8".to_string())?;
        b = &b[end + 4..];
        let mut lines = head.split("\r\n");
        let sl = lines.next().unwrap_or("");
        let status: u16 = sl
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|s| s.parse().ok())
            .filter(|s| (100..600).contains(s))
            .ok_or_else(|| format!("a bad status line {sl:?}"))?;
        let mut content_length = None;
        let mut chunked = false;
        let mut etag = None;
        for l in lines {
            let (n, v) = l
                .split_once(':')
                .ok_or_else(|| format!("a header line without a colon: {l:?}"))?;
            let v = v.trim();
            if n.eq_ignore_ascii_case("content-length") {
                content_length = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("Content-Length {v:?}"))?,
                );
            } else if n.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.eq_ignore_ascii_case("chunked");
            } else if n.eq_ignore_ascii_case("etag") {
                etag = Some(v.to_string());
            }
        }
        if status == 100 {
            continue;
        }
        let mut body = Vec::new();
        let no_body = head_only(out.len()) || status == 204 || status == 304;
        if chunked && !no_body {
            loop {
                let e = b
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .ok_or("a chunk size line without its end")?;
                let line = std::str::from_utf8(&b[..e]).map_err(|_| "chunk size line")?;
                let n = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| format!("a chunk size {line:?}"))?;
                b = &b[e + 2..];
                if n == 0 {
                    let t = b
                        .windows(2)
                        .position(|w| w == b"\r\n")
                        .ok_or("a chunked body without its end")?;
                    if t != 0 {
                        return Err("trailers in a response".into());
                    }
                    b = &b[2..];
                    break;
                }
                if b.len() < n + 2 || &b[n..n + 2] != b"\r\n" {
                    return Err("a chunk cut short".into());
                }
                body.extend_from_slice(&b[..n]);
                b = &b[n + 2..];
            }
        } else if !no_body {
            let n = content_length.ok_or("a response without Content-Length or chunking")? as usize;
            if b.len() < n {
                return Err(format!("a body cut short: {} of {n} bytes", b.len()));
            }
            body.extend_from_slice(&b[..n]);
            b = &b[n..];
        }
        out.push(Answer {
            status,
            content_length,
            etag,
            body,
        });
    }
    Ok(out)
}

/// Write `bytes` to a new connection in the pieces `cuts` (fractions of
/// its length) make, pausing after the pieces `pause` marks; half-close;
/// read until the server closes. Err if it has not closed within
/// CLOSE_WITHIN.
pub fn exchange(addr: SocketAddr, bytes: &[u8], cuts: &[(f64, bool)]) -> Result<Vec<u8>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).unwrap();
    let mut r = s.try_clone().unwrap();
    r.set_read_timeout(Some(CLOSE_WITHIN)).unwrap();
    // Read while writing: a pipeline's answers can outgrow the socket
    // buffers.
    let reader = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut got = Vec::new();
        let mut b = vec![0u8; 1 << 16];
        loop {
            match r.read(&mut b) {
                Ok(0) => return Ok(got),
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
                Err(e) => {
                    return Err(format!(
                    "the server had not closed {:?} after the client did ({e}); it sent {} bytes",
                    t0.elapsed(),
                    got.len()
                ))
                }
            }
        }
    });
    let mut at: Vec<(usize, bool)> = cuts
        .iter()
        .map(|(f, p)| ((f * bytes.len() as f64) as usize, *p))
        .collect();
    at.push((bytes.len(), false));
    at.sort_unstable();
    let mut w = &s;
    let mut from = 0;
    for (to, pause) in at {
        if to > from {
            // A reset (the server refused the rest) ends the writing.
            if w.write_all(&bytes[from..to]).is_err() {
                break;
            }
            from = to;
        }
        if pause {
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    reader.join().unwrap()
}
