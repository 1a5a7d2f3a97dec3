//! Running the `pktfs` binary as a person does: start a long-running
//! command and read its first line, stop it with Ctrl-C, find free ports.
//! Shared by the CLI tests of this package.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// This package's binary: cargo builds it for its tests.
pub const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");

/// A port for a child process to listen on: the Garage harness's
/// (from below the ephemeral range, one counter per process, checked free;
/// a port learned by binding port 0 and releasing it can be taken by any
/// other socket of the test run before the child binds it).
pub fn free_port() -> SocketAddr {
    let port = pktfs_tier::garage::free_port().unwrap();
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A child process that is killed (and reaped) when dropped unless it
/// already ended: a test that fails part way leaves no `pktfs serve` or
/// mount running behind it.
#[derive(Debug)]
pub struct Proc(Option<Child>);

impl Proc {
    pub fn spawn(cmd: &mut Command) -> Proc {
        Proc(Some(cmd.spawn().unwrap()))
    }
    /// Wait for the end and collect what is left of its output.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        self.0.take().expect("a child").wait_with_output()
    }
}

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("a child")
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // std sends nothing to a child it has already reaped.
        if let Some(c) = self.0.as_mut() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Start a long-running command and wait for its first line of output.
pub fn start(cmd: &mut Command) -> (Proc, String) {
    let mut child = Proc::spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    (child, first)
}

pub fn interrupt(mut child: Proc) -> String {
    Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "exit status {st}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// What a starting `pktfs serve` (stdout piped) prints up to its
/// "Ctrl-C" line: how it serves, its limits, its URLs.
pub fn startup_lines(server: &mut Proc) -> String {
    try_startup_lines(server).unwrap_or_else(|said| panic!("server said: {said}"))
}

/// [`startup_lines`], or what the server said before its output ended
/// (it exited while starting).
pub fn try_startup_lines(server: &mut Proc) -> Result<String, String> {
    let mut out = BufReader::new(server.stdout.take().expect("stdout piped"));
    let mut said = String::new();
    while !said.contains("Ctrl-C") {
        let mut l = String::new();
        if out.read_line(&mut l).unwrap() == 0 {
            return Err(said);
        }
        said.push_str(&l);
    }
    Ok(said)
}

/// Wait (at most 20 s) until something accepts connections on `addr`.
pub fn wait_listening(addr: SocketAddr) {
    let t0 = Instant::now();
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "nothing listening on {addr} after 20 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A fresh image of `bytes` at `path` (mkfs lives in another package; the
/// library formats the same way).
pub fn mkfs(path: &std::path::Path, bytes: u64) {
    pktfs_fs::Volume::format(
        path,
        &pktfs_fs::FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
}

/// The address a starting server announced for `service` ("HTTP" or
/// "raw") in its startup lines ([`startup_lines`]): what it bound, so a
/// server told to listen on port 0 is found without a guess.
pub fn announced(said: &str, service: &str) -> Option<SocketAddr> {
    said.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        if words.next()? != service {
            return None;
        }
        let w = words.next()?;
        let w = w.strip_prefix("http://").unwrap_or(w).trim_end_matches('/');
        w.parse().ok()
    })
}

/// `pktfs serve IMAGE --listen 127.0.0.1:0`, returned with the address it
/// announced once it says it serves; its stderr goes to `stderr`.
///
/// Port 0 and the announcement, not a chosen port and a probe: a probe
/// cannot tell this server from another socket on the port, and a port
/// checked free by listening on it can be inherited, still listening, by
/// a child another test thread spawns at that instant (CI saw a probe
/// answered that way and the first request refused).
pub fn serve(img: &std::path::Path, stderr: Stdio) -> (Proc, SocketAddr) {
    serve_with(img, &[], stderr)
}

/// [`serve`] with more arguments.
pub fn serve_with(img: &std::path::Path, extra: &[&str], stderr: Stdio) -> (Proc, SocketAddr) {
    let mut c = Proc::spawn(
        Command::new(PKTFS)
            .args(["serve", img.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr),
    );
    let said = startup_lines(&mut c);
    assert!(said.contains("serving"), "{said}");
    let addr = announced(&said, "HTTP").unwrap_or_else(|| panic!("no HTTP address in: {said}"));
    (c, addr)
}

/// SIGINT, then wait (bounded) for the process to end, whatever its status.
pub fn stop(mut c: Proc) {
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(c.id().to_string())
        .status();
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `pktfs ARGS` to completion.
pub fn pktfs(args: &[&str]) -> std::process::Output {
    Command::new(PKTFS).args(args).output().unwrap()
}

/// `pktfs chain IMG PATH --json`: the file's records as JSON rows.
pub fn chain_json(img: &std::path::Path, path: &str) -> Vec<serde_json::Value> {
    let o = pktfs(&["chain", img.to_str().unwrap(), path, "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<serde_json::Value>(&o.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// A pseudo-random pattern: `n` bytes that differ with `seed`.
pub fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The command's stdout, once it is known to have succeeded (else the
/// test fails saying `what`, with both outputs).
pub fn out_ok(o: &std::process::Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}
