//! Real Garage processes for tests and benchmarks (the tier's tests run
//! against a real store, never a mock).
//!
//! [`Garage::start`] makes a scratch directory, picks free ports, starts
//! one or three `garage server` processes (replication factor 1 or 3),
//! applies a layout, and creates a bucket and a key allowed to use it.
//! Readiness is polled with deadlines, never waited for with fixed sleeps;
//! a failure says what failed with the tail of the server's log. Dropping
//! the value kills the servers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::s3::{ObjectStore, StoreOptions};
use crate::target::TierTarget;

#[derive(Debug)]
struct Node {
    conf: PathBuf,
    rpc_port: u16,
    s3_port: u16,
    child: Option<Child>,
    log: PathBuf,
    /// Where this run of the server began writing in `log` (a restarted
    /// node appends).
    log_from: u64,
}

/// Running Garage servers with a bucket and a key.
#[derive(Debug)]
pub struct Garage {
    dir: tempfile::TempDir,
    bin: PathBuf,
    nodes: Vec<Node>,
    bucket: String,
    key_id: String,
    secret: String,
}

/// A free port on 127.0.0.1 for a server about to be started (one of
/// Garage's listeners here; the CLI tests' servers too).
///
/// Not `bind(0)`: the kernel hands out port-0 binds and outgoing
/// connections from the ephemeral range (32768-60999 by default), so a
/// port learned that way and released can be taken by any other socket of
/// the test run before Garage binds it (CI saw a node that never answered
/// on such a port). Ports here come from below that range, from one
/// counter per process (two Garages of one test binary never share a
/// port), and are checked free by binding them; a Garage node that still
/// loses its port is found from its log, and [`Garage::start`] starts
/// again on fresh ports.
///
/// The check binds without listening ([`unclaimed`]): a listening check
/// socket, however briefly open, is inherited by a child that another
/// thread of the test spawns at that instant, and goes on accepting
/// connections in that child until its exec completes; a test's probe of
/// the port then took it for the server it had just started (CI saw the
/// first request refused).
pub fn free_port() -> Result<u16, String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000; // 20000..32000, under the ephemeral range
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    // Seeded per process so that two test binaries, or a benchmark beside
    // a test, start at different places.
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(2_654_435_761) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        if unclaimed(port) {
            return Ok(port);
        }
    }
    Err(format!("no free port in {LOW}..{}", LOW + SPAN))
}

/// Whether 127.0.0.1:`port` can be bound by a server (SO_REUSEADDR, as
/// servers bind): bound and closed, never listening, so the socket accepts
/// no connection whoever holds a copy of it. SO_REUSEADDR on the check too:
/// a copy inherited by another process does not stop the server's bind,
/// and only a listener (or an exclusive bind) makes the port taken.
fn unclaimed(port: u16) -> bool {
    use rustix::net::{bind, socket_with, sockopt, AddressFamily, SocketFlags, SocketType};
    let Ok(fd) = socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    ) else {
        return false;
    };
    sockopt::set_socket_reuseaddr(&fd, true).is_ok()
        && bind(
            &fd,
            &std::net::SocketAddrV4::new([127, 0, 0, 1].into(), port),
        )
        .is_ok()
}

fn random_hex(n: usize) -> String {
    let mut b = vec![0u8; n];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Why the server logging to `log` (from byte `from`) cannot serve,
/// if it said so. Garage does not exit when its S3 port is taken: it logs
/// the error and keeps its RPC port, and another process listening on the
/// S3 port would pass a connect check. CI once failed that way.
fn start_failure(log: &Path, from: u64) -> Option<String> {
    let s = std::fs::read(log).ok()?;
    let s = String::from_utf8_lossy(s.get(from as usize..)?);
    ["Address already in use", "exited with error"]
        .iter()
        .any(|m| s.contains(m))
        .then(|| tail(log))
}

fn tail(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl Garage {
    /// The garage binary: $GARAGE_BIN, `garage` on PATH, ~/.cargo/bin/garage.
    pub fn binary() -> Option<PathBuf> {
        if let Some(b) = std::env::var_os("GARAGE_BIN") {
            let p = PathBuf::from(b);
            return p.is_file().then_some(p);
        }
        let on_path = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("garage"))
                .find(|p| p.is_file())
        });
        on_path.or_else(|| {
            let p = PathBuf::from(std::env::var_os("HOME")?).join(".cargo/bin/garage");
            p.is_file().then_some(p)
        })
    }

    /// Start `nodes` (1 or 3) servers on 127.0.0.1 with replication factor
    /// `nodes`, a bucket and a key.
    ///
    /// A start that fails (a node that exits, logs a failed bind, or never
    /// answers) is tried again on fresh ports, at most three times in all;
    /// each failure is printed, and the last one is returned.
    pub fn start(nodes: usize) -> Result<Garage, String> {
        Self::start_with_ports(nodes, &mut free_port)
    }

    /// [`Garage::start`] with the ports picked by `port` (a test hands one
    /// that is taken).
    fn start_with_ports(
        nodes: usize,
        port: &mut dyn FnMut() -> Result<u16, String>,
    ) -> Result<Garage, String> {
        if nodes != 1 && nodes != 3 {
            return Err("a Garage of 1 or 3 nodes".into());
        }
        let bin =
            Self::binary().ok_or("garage is not installed (cargo install --locked garage)")?;
        const ATTEMPTS: usize = 3;
        let mut attempt = 1;
        loop {
            match Self::start_once(nodes, bin.clone(), port) {
                Ok(g) => return Ok(g),
                Err(e) if attempt < ATTEMPTS => {
                    eprintln!(
                        "garage: start {attempt} of {ATTEMPTS} failed, trying fresh ports: {e}"
                    );
                    attempt += 1;
                }
                Err(e) => return Err(format!("garage did not start in {ATTEMPTS} tries: {e}")),
            }
        }
    }

    fn start_once(
        nodes: usize,
        bin: PathBuf,
        port: &mut dyn FnMut() -> Result<u16, String>,
    ) -> Result<Garage, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let secret = random_hex(32);
        let mut g = Garage {
            dir,
            bin,
            nodes: Vec::new(),
            bucket: format!("pktfs-{}", &random_hex(4)),
            key_id: String::new(),
            secret: String::new(),
        };
        for k in 0..nodes {
            let d = g.dir.path().join(format!("n{k}"));
            std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
            let (rpc_port, s3_port, admin_port) = (port()?, port()?, port()?);
            let conf = d.join("garage.toml");
            std::fs::write(
                &conf,
                format!(
                    "metadata_dir = \"{d}/meta\"\ndata_dir = \"{d}/data\"\ndb_engine = \"sqlite\"\n\
                     replication_factor = {nodes}\nrpc_bind_addr = \"127.0.0.1:{rpc_port}\"\n\
                     rpc_public_addr = \"127.0.0.1:{rpc_port}\"\nrpc_secret = \"{secret}\"\n\
                     [s3_api]\ns3_region = \"garage\"\napi_bind_addr = \"127.0.0.1:{s3_port}\"\n\
                     root_domain = \".s3.garage.localhost\"\n[admin]\n\
                     api_bind_addr = \"127.0.0.1:{admin_port}\"\n",
                    d = d.display()
                ),
            )
            .map_err(|e| e.to_string())?;
            g.nodes.push(Node {
                conf,
                rpc_port,
                s3_port,
                child: None,
                log: d.join("server.log"),
                log_from: 0,
            });
            g.start_node(k)?;
        }
        g.setup()?;
        Ok(g)
    }

    fn cli(&self, node: usize, args: &[&str]) -> Result<String, String> {
        let o = Command::new(&self.bin)
            .arg("-c")
            .arg(&self.nodes[node].conf)
            .args(args)
            .output()
            .map_err(|e| format!("garage {args:?}: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "garage {args:?}: {}\n{}\nserver log:\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr),
                tail(&self.nodes[node].log)
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    }

    /// Retry `f` until it succeeds or `secs` pass.
    fn poll<T>(&self, secs: u64, mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
        let t0 = Instant::now();
        loop {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) if t0.elapsed() > Duration::from_secs(secs) => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn setup(&mut self) -> Result<(), String> {
        let n = self.nodes.len();
        let mut ids = Vec::new();
        for k in 0..n {
            let id = self.poll(30, || self.cli(k, &["node", "id", "-q"]))?;
            let id = id.trim().to_string();
            ids.push(id);
        }
        for addr in ids.iter().skip(1) {
            self.poll(30, || self.cli(0, &["node", "connect", addr]))?;
        }
        // Every node known to the first before the layout is applied.
        self.poll(30, || {
            let s = self.cli(0, &["status"])?;
            let up = ids
                .iter()
                .filter(|id| s.contains(&id.split('@').next().unwrap_or("")[..16]))
                .count();
            if up == n {
                Ok(())
            } else {
                Err(format!("{up} of {n} nodes up:\n{s}"))
            }
        })?;
        for (k, id) in ids.iter().enumerate() {
            let short = id.split('@').next().unwrap_or("");
            let zone = format!("dc{}", k + 1);
            self.cli(0, &["layout", "assign", "-z", &zone, "-c", "1G", short])?;
        }
        self.cli(0, &["layout", "apply", "--version", "1"])?;
        let bucket = self.bucket.clone();
        self.poll(30, || self.cli(0, &["bucket", "create", &bucket]))?;
        let out = self.cli(0, &["key", "create", "pktfs-test"])?;
        let field = |name: &str| {
            out.lines()
                .find_map(|l| {
                    let l = l.trim();
                    l.strip_prefix(name)
                        .map(|r| r.trim_start_matches([':', ' ']).trim().to_string())
                })
                .ok_or_else(|| format!("no {name} in `garage key create`'s output:\n{out}"))
        };
        self.key_id = field("Key ID")?;
        self.secret = field("Secret key")?;
        self.cli(
            0,
            &[
                "bucket",
                "allow",
                "--read",
                "--write",
                "--owner",
                &bucket,
                "--key",
                "pktfs-test",
            ],
        )?;
        // Ready when a request through the S3 API works on every node.
        for k in 0..n {
            let store = self.store_at(k)?;
            let key = format!("ready-{k}");
            let node = &self.nodes[k];
            self.poll(60, || {
                if let Some(log) = start_failure(&node.log, node.log_from) {
                    return Ok(Err(format!("garage node {k} cannot serve:\n{log}")));
                }
                store
                    .put(&key, b"ok".to_vec(), crc_ok())
                    .map(Ok)
                    .map_err(|e| e.to_string())
            })??;
            store.delete(&key).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Start (or restart, with its data) node `k`.
    pub fn start_node(&mut self, k: usize) -> Result<(), String> {
        let node = &mut self.nodes[k];
        if node.child.is_some() {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .map_err(|e| e.to_string())?;
        node.log_from = log.metadata().map_err(|e| e.to_string())?.len();
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&node.conf)
            .arg("server")
            .env("RUST_LOG", "garage=warn")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start garage: {e}"))?;
        node.child = Some(child);
        let (port, rpc) = (node.s3_port, node.rpc_port);
        let t0 = Instant::now();
        loop {
            // A node that exited (its port taken, say) is a failed start at
            // once, not after the deadline, and never mistaken for another
            // process listening on its port.
            let node = &mut self.nodes[k];
            if let Some(Ok(Some(status))) = node.child.as_mut().map(Child::try_wait) {
                node.child = None;
                return Err(format!(
                    "garage node {k} exited at start ({status}); server log:\n{}",
                    tail(&node.log)
                ));
            }
            if let Some(log) = start_failure(&node.log, node.log_from) {
                return Err(format!("garage node {k} cannot serve:\n{log}"));
            }
            match std::net::TcpStream::connect(("127.0.0.1", port))
                .and(std::net::TcpStream::connect(("127.0.0.1", rpc)))
            {
                Ok(_) => return Ok(()),
                Err(e) if t0.elapsed() > Duration::from_secs(30) => {
                    return Err(format!(
                        "garage node {k} not listening on {port} and {rpc}: {e}; server log:\n{}",
                        tail(&node.log)
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Kill node `k` (SIGKILL: a machine failing, not a clean stop).
    pub fn stop_node(&mut self, k: usize) {
        if let Some(mut c) = self.nodes[k].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn endpoint(&self) -> String {
        self.endpoint_at(0)
    }
    fn endpoint_at(&self, k: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[k].s3_port)
    }
    pub fn bucket(&self) -> &str {
        &self.bucket
    }
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
    pub fn secret(&self) -> &str {
        &self.secret
    }
    pub fn region(&self) -> &str {
        "garage"
    }
    /// `s3://BUCKET/PREFIX`.
    pub fn target(&self, prefix: &str) -> TierTarget {
        TierTarget {
            bucket: self.bucket.clone(),
            prefix: prefix.trim_matches('/').to_string(),
        }
    }
    /// The environment a child process reaches the store with, the way
    /// AWS tools are configured.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret.clone()),
            ("AWS_REGION".into(), "garage".into()),
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            // No shared config of the machine's user is read.
            ("AWS_CONFIG_FILE".into(), "/dev/null".into()),
            ("AWS_SHARED_CREDENTIALS_FILE".into(), "/dev/null".into()),
        ]
    }
    /// The store's options (explicit: the test process's environment is
    /// not touched).
    pub fn options(&self) -> StoreOptions {
        self.options_at(0)
    }
    fn options_at(&self, k: usize) -> StoreOptions {
        StoreOptions {
            endpoint: Some(self.endpoint_at(k)),
            region: Some("garage".into()),
            credentials: Some((self.key_id.clone(), self.secret.clone())),
            ..StoreOptions::default()
        }
    }
    /// A client of the bucket through node 0.
    pub fn store(&self) -> Result<ObjectStore, String> {
        self.store_at(0)
    }
    /// A client of the bucket through node `k`.
    pub fn store_at(&self, k: usize) -> Result<ObjectStore, String> {
        ObjectStore::connect(&self.target(""), &self.options_at(k)).map_err(|e| e.to_string())
    }
    /// The servers' process ids (a benchmark lowers their priority: on a
    /// small machine the store stands in for one that is elsewhere).
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter_map(|n| n.child.as_ref().map(Child::id))
            .collect()
    }

    /// Where the servers keep their data and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// CRC32C of "ok".
fn crc_ok() -> u32 {
    pktfs_layout::crc32c(b"ok")
}

impl Drop for Garage {
    fn drop(&mut self) {
        for k in 0..self.nodes.len() {
            self.stop_node(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_listened_port_is_claimed_and_the_check_never_listens() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = l.local_addr().unwrap().port();
        assert!(!unclaimed(taken), "a listener's port counts as taken");
        drop(l);
        // A port handed out: nothing accepts on it, and a server (binding
        // with SO_REUSEADDR, as std does) gets it.
        let p = free_port().unwrap();
        assert!(TcpStream::connect(("127.0.0.1", p)).is_err());
        let server = TcpListener::bind(("127.0.0.1", p)).unwrap();
        assert!(!unclaimed(p));
        drop(server);
    }

    /// CI once lost a Garage whose S3 port another socket held: the node
    /// kept running without its S3 API while the other listener passed the
    /// connect check. Such a start is now found from the node's log and
    /// made again on fresh ports.
    #[test]
    fn a_node_whose_port_is_taken_is_started_again_on_fresh_ports() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_port = taken.local_addr().unwrap().port();
        // rpc, s3, admin: the first start gets the taken port for S3.
        let mut calls = 0;
        let mut port = || {
            calls += 1;
            if calls == 2 {
                Ok(taken_port)
            } else {
                free_port()
            }
        };
        let t0 = Instant::now();
        let g = Garage::start_with_ports(1, &mut port).unwrap();
        assert_eq!(calls, 6, "one failed start and one good one");
        assert_ne!(g.nodes[0].s3_port, taken_port);
        // Found from the log, not by waiting out a deadline.
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
        let store = g.store().unwrap();
        store.put("k", b"ok".to_vec(), crc_ok()).unwrap();
        drop(taken);
    }
}
