//! Clients: one large PUT/GET on a fresh connection, and the small-PUT
//! load (wrk, or a built-in closed-loop client when wrk is missing).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// PUT `size` bytes on a fresh connection; seconds until the answer.
pub fn put_big(addr: SocketAddr, path: &str, size: u64, chunk: &[u8]) -> f64 {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.set_nodelay(true);
    let t0 = Instant::now();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {size}\r\n\r\n"
    )
    .expect("head");
    let mut left = size;
    while left > 0 {
        let n = (left as usize).min(chunk.len());
        s.write_all(&chunk[..n]).expect("body");
        left -= n as u64;
    }
    let mut resp = [0u8; 4096];
    let mut got = Vec::new();
    loop {
        let n = s.read(&mut resp).expect("response");
        assert!(n > 0, "server closed");
        got.extend_from_slice(&resp[..n]);
        if got.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    assert!(
        got.starts_with(b"HTTP/1.1 20"),
        "PUT failed: {}",
        String::from_utf8_lossy(&got)
    );
    dt
}

/// GET a file; seconds until its last byte, and the byte count.
pub fn get_big(addr: SocketAddr, path: &str, buf: &mut [u8]) -> (f64, u64) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let t0 = Instant::now();
    write!(s, "GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n").expect("head");
    let mut head = Vec::new();
    let (clen, mut have) = loop {
        let n = s.read(buf).expect("read");
        assert!(n > 0, "closed");
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let h = String::from_utf8_lossy(&head[..i]).to_string();
            assert!(h.starts_with("HTTP/1.1 200"), "GET failed: {h}");
            let cl = h
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<u64>().expect("len"))
                })
                .expect("content-length");
            break (cl, (head.len() - i - 4) as u64);
        }
    };
    while have < clen {
        let n = s.read(buf).expect("read");
        assert!(n > 0, "closed early");
        have += n as u64;
    }
    (t0.elapsed().as_secs_f64(), clen)
}

/// One 1 KiB PUT of `path` on `s`, waiting for its whole answer.
fn put_1k(s: &mut TcpStream, path: &str, buf: &mut [u8; 4096]) {
    let mut req =
        format!("PUT {path} HTTP/1.1\r\nHost: b\r\nContent-Length: 1024\r\n\r\n").into_bytes();
    req.extend_from_slice(&[b'x'; 1024]);
    s.write_all(&req).expect("send");
    let mut got = 0;
    loop {
        let k = s.read(&mut buf[got..]).expect("recv");
        assert!(k > 0);
        got += k;
        if let Some(i) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
            let h = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            assert!(h.starts_with("http/1.1 20"), "PUT failed: {h}");
            let cl: usize = h
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            while got < i + 4 + cl {
                let k = s.read(&mut buf[got..]).expect("recv");
                assert!(k > 0);
                got += k;
            }
            return;
        }
    }
}

/// Built-in closed-loop 1 KiB PUT client: (median latency us, req/s).
pub fn own_small_puts(addr: SocketAddr, conns: usize, secs: f64) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut ts = Vec::new();
    for c in 0..conns {
        let stop = stop.clone();
        ts.push(std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).expect("connect");
            let _ = s.set_nodelay(true);
            let mut lat = Vec::new();
            let mut buf = [0u8; 4096];
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let t0 = Instant::now();
                put_1k(
                    &mut s,
                    &format!("/k/{}", c as u64 * 1000 + n % 64),
                    &mut buf,
                );
                lat.push(t0.elapsed().as_secs_f64() * 1e6);
            }
            lat
        }));
    }
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<f64> = ts
        .into_iter()
        .flat_map(|t| t.join().expect("client"))
        .collect();
    let count = all.len() as f64;
    all.sort_by(|a, b| a.partial_cmp(b).expect("nan"));
    (all[all.len() / 2], count / secs)
}

/// Paced 1 KiB PUTs on one connection: one request every `gap` (the next
/// is sent at its slot, or at once when the previous answer came later),
/// for `secs`. Returns (median latency us, requests answered).
pub fn paced_puts(addr: SocketAddr, gap: Duration, secs: f64) -> (f64, f64) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let _ = s.set_nodelay(true);
    let mut buf = [0u8; 4096];
    let mut lat = Vec::new();
    let t_end = Instant::now() + Duration::from_secs_f64(secs);
    let mut slot = Instant::now();
    let mut n = 0u64;
    while slot < t_end {
        if let Some(d) = slot.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        n += 1;
        let t0 = Instant::now();
        put_1k(&mut s, &format!("/paced/{}", n % 64), &mut buf);
        lat.push(t0.elapsed().as_secs_f64() * 1e6);
        slot += gap;
    }
    let count = lat.len() as f64;
    lat.sort_by(|a, b| a.partial_cmp(b).expect("nan"));
    (lat[lat.len() / 2], count)
}

pub fn have_wrk() -> bool {
    std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok()
}

/// The Lua script every server gets: `PUT /k/<n mod 64>` with a 1 KiB
/// body, so every upload after the first 64 replaces a file.
///
/// The 64 requests are built once, in `init` (after wrk has set the Host
/// header), and `request` only hands the next one back. Why: at 16 and
/// 256 connections wrk's one thread is the limit against pktfs on a
/// 2-vCPU machine, and building each request with `wrk.format` (a 1 KiB
/// body concatenated into a fresh string per request) was a measurable
/// share of wrk's CPU per request. A cheaper client measures more of the
/// server; every server gets the same client.
pub fn write_put_script(path: &Path) {
    std::fs::write(path, PUT_SCRIPT).expect("script");
}

/// The script itself, one file that bench/common.sh hands wrk too.
const PUT_SCRIPT: &str = include_str!("../put.lua");

/// What one load run measured.
#[derive(Clone, Debug, Default)]
pub struct Load {
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Requests answered in the run.
    pub requests: f64,
    /// Answers other than 2xx/3xx (wrk does not tell 3xx apart; none of
    /// the servers answers a PUT with one).
    pub non2xx: u64,
    /// Connect, read, write errors and timeouts.
    pub socket_errors: u64,
    /// The client's own CPU seconds over the run (user and system; wrk's,
    /// None for the built-in client, which runs on threads of ours).
    pub client_cpu_s: Option<f64>,
}

/// CPU seconds (user and system) of this process's children that were
/// waited for. Around a wrk run (`output()` waits for it, and the servers,
/// also children, are only waited for at the end) the difference is wrk's
/// own CPU time: with `-t 1` a run near one CPU-second per second was
/// limited by the client, not the server.
pub fn reaped_children_cpu_s() -> Option<f64> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    Some(secs(u.user_time()) + secs(u.system_time()))
}

/// How to drive wrk.
#[derive(Clone, Copy, Debug)]
pub struct WrkOpts {
    pub conns: usize,
    pub threads: usize,
    pub secs: f64,
    /// A request unanswered this long counts as a timeout error.
    pub timeout_s: f64,
}

/// wrk with the PUT script.
pub fn wrk_small_puts(addr: SocketAddr, o: WrkOpts, script: &Path) -> Load {
    let cpu0 = reaped_children_cpu_s();
    let out = std::process::Command::new("wrk")
        .args([
            "-t",
            &o.threads.clamp(1, o.conns.max(1)).to_string(),
            "-c",
            &o.conns.to_string(),
            "-d",
            &format!("{}s", o.secs.round().max(1.0) as u64),
            "--timeout",
            &format!("{}s", o.timeout_s.round().max(1.0) as u64),
            "--latency",
            "-s",
        ])
        .arg(script)
        .arg(format!("http://{addr}/"))
        .output()
        .expect("wrk");
    let cpu1 = reaped_children_cpu_s();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        eprintln!(
            "wrk against {addr} failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut l = parse_wrk(&text);
    l.client_cpu_s = cpu0.zip(cpu1).map(|(a, b)| b - a);
    if l.non2xx > 0 || l.socket_errors > 0 {
        eprintln!("wrk -c {} against {addr} reported errors:\n{text}", o.conns);
    }
    l
}

/// Read wrk's report (4.x format).
fn parse_wrk(text: &str) -> Load {
    let unit = |v: &str| -> f64 {
        let v = v.trim();
        let (num, mul) = if let Some(x) = v.strip_suffix("us") {
            (x, 1.0)
        } else if let Some(x) = v.strip_suffix("ms") {
            (x, 1e3)
        } else if let Some(x) = v.strip_suffix('m') {
            (x, 60e6)
        } else if let Some(x) = v.strip_suffix('s') {
            (x, 1e6)
        } else {
            (v, 1.0)
        };
        num.parse::<f64>().unwrap_or(f64::NAN) * mul
    };
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(str::to_string))
    };
    // "Socket errors: connect 0, read 3, write 0, timeout 0"
    let socket_errors = line("Socket errors:")
        .map(|v| {
            v.split(',')
                .filter_map(|p| p.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    Load {
        rps: line("Requests/sec:")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::NAN),
        p50_us: line("50%").map(|v| unit(&v)).unwrap_or(f64::NAN),
        p99_us: line("99%").map(|v| unit(&v)).unwrap_or(f64::NAN),
        // "  123456 requests in 6.00s, 9.50MB read"
        requests: text
            .lines()
            .find(|l| l.contains(" requests in "))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or(f64::NAN),
        non2xx: line("Non-2xx or 3xx responses:")
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        socket_errors,
        client_cpu_s: None,
    }
}

#[cfg(test)]
mod tests {
    use super::reaped_children_cpu_s;

    #[test]
    fn a_waited_for_child_s_cpu_time_is_counted() {
        let before = reaped_children_cpu_s().expect("getrusage");
        // A shell counting to 200,000: tenths of a CPU-second, whatever
        // the machine's load (CPU time, not wall time).
        let st = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(st.success());
        let after = reaped_children_cpu_s().expect("getrusage");
        assert!(
            after - before > 0.01,
            "the child's CPU time was not counted: {before} -> {after}"
        );
    }
}
