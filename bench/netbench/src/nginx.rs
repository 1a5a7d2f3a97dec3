//! nginx as a baseline: WebDAV `PUT` into a tmpfs directory, our own
//! instance (own config and prefix, a free loopback port, `daemon off` so
//! it is our child), never a system nginx that may be running.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Nginx {
    pub addr: SocketAddr,
    pub version: String,
    pub workers: usize,
    pub worker_connections: usize,
    child: Child,
    prefix: PathBuf,
}

/// The nginx binary: `--nginx PATH`, else the first on $PATH or in the
/// sbin directories (Debian puts it in /usr/sbin, often not on a user's
/// PATH).
fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"])
        .map(|d| Path::new(d).join("nginx"))
        .find(|p| p.is_file());
    found
}

/// The config: as many workers as cores, no access log, no body size
/// limit, bodies and files on tmpfs, WebDAV PUT; keep-alive without the
/// default cap of 1000 requests per connection (wrk's connections would
/// otherwise be closed and reopened during a run, which the other
/// servers never do).
fn config(
    prefix: &Path,
    root: &Path,
    port: u16,
    workers: usize,
    conns: usize,
    nofile: u64,
) -> String {
    // Started as root, nginx switches its workers to `user` (default
    // nobody, whose group Debian lacks): run them as the invoking user,
    // as an unprivileged start does.
    let user = if rustix::process::geteuid().is_root() {
        "user root root;\n"
    } else {
        ""
    };
    format!(
        "{user}worker_processes {workers};\n\
         worker_rlimit_nofile {nofile};\n\
         daemon off;\n\
         master_process on;\n\
         pid {prefix}/nginx.pid;\n\
         error_log {prefix}/error.log warn;\n\
         events {{ worker_connections {conns}; }}\n\
         http {{\n\
         \x20 access_log off;\n\
         \x20 client_max_body_size 0;\n\
         \x20 client_body_temp_path {root}/.tmp;\n\
         \x20 keepalive_requests 1000000000;\n\
         \x20 keepalive_timeout 300s;\n\
         \x20 server {{\n\
         \x20   listen 127.0.0.1:{port} backlog=4096;\n\
         \x20   root {root};\n\
         \x20   location / {{\n\
         \x20     dav_methods PUT DELETE;\n\
         \x20     create_full_put_path on;\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n",
        prefix = prefix.display(),
        root = root.display(),
    )
}

/// Start nginx with its prefix and root under `dir` (tmpfs), able to hold
/// `conns` connections. Err says why it is skipped.
pub fn start(
    explicit: Option<&Path>,
    dir: &Path,
    conns: usize,
    nofile: u64,
) -> Result<Nginx, String> {
    let Some(bin) = find(explicit).filter(|b| b.is_file()) else {
        return Err(match explicit {
            Some(p) => format!("{} not found", p.display()),
            None => "not installed (apt-get install nginx-light)".into(),
        });
    };
    let v = Command::new(&bin)
        .arg("-V")
        .output()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let info = String::from_utf8_lossy(&v.stderr).to_string();
    if !info.contains("http_dav_module") {
        return Err(format!(
            "{} has no WebDAV module (nginx-light has it)",
            bin.display()
        ));
    }
    let version = info
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("nginx version: "))
        .unwrap_or("nginx")
        .to_string();
    let prefix = dir.join("nginx");
    let root = prefix.join("root");
    std::fs::create_dir_all(root.join(".tmp")).map_err(|e| format!("{}: {e}", root.display()))?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a free port: {e}"))?
        .port();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Each worker must be able to hold every connection (the kernel may
    // hand them all to one), with a descriptor per connection plus
    // one per open temp file.
    let worker_connections = conns + 64;
    let nofile = nofile.min(2 * worker_connections as u64 + 64);
    let conf = prefix.join("nginx.conf");
    std::fs::write(
        &conf,
        config(&prefix, &root, port, workers, worker_connections, nofile),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    // nginx with `daemon off` outlives a netbench killed by a signal (no
    // Drop runs then); util-linux's setpriv asks the kernel to send it
    // SIGTERM when netbench goes (it execs nginx: same pid).
    let pdeathsig = Command::new("setpriv")
        .arg("--help")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--pdeathsig"));
    let mut cmd = if pdeathsig {
        let mut c = Command::new("setpriv");
        c.args(["--pdeathsig", "TERM", "--"]).arg(&bin);
        c
    } else {
        Command::new(&bin)
    };
    let child = cmd
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .arg("-e")
        .arg(prefix.join("error.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let mut n = Nginx {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        version,
        workers,
        worker_connections,
        child,
        prefix,
    };
    let t0 = Instant::now();
    loop {
        if TcpStream::connect(n.addr).is_ok() {
            return Ok(n);
        }
        let exited = matches!(n.child.try_wait(), Ok(Some(_)));
        if exited || t0.elapsed() > Duration::from_secs(10) {
            let log = std::fs::read_to_string(n.prefix.join("error.log")).unwrap_or_default();
            return Err(format!("did not start: {}", log.trim()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Nginx {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers, then itself.
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.prefix);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("netbench: nginx did not stop in 10 s; killed");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}
