//! Servers as child processes, so that a server's CPU time can be read on
//! its own (/proc/PID/stat: utime + stime of all its threads, also the
//! finished ones) while the client (wrk) runs as another process.
//!
//! A child is netbench itself (`--serve-baseline`, `--serve-pktfs`) or
//! nginx. netbench children print one line, `serving NAME on ADDR (IO)`,
//! and serve until their stdin closes, which happens when the parent drops
//! the [`ChildServer`] or dies: no server outlives its benchmark.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// First line of a netbench child, read by [`ChildServer::spawn`].
pub fn announce(name: &str, addr: SocketAddr, io: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "serving {name} on {addr} ({io})");
    let _ = out.flush();
}

/// The directory a child keeps its files in: `--dir`, or a fresh one of
/// its own under /dev/shm.
///
/// Why it remembers whether it made the directory: a child started by
/// hand may be given a directory that holds other files (`--dir
/// /dev/shm`, `--dir /tmp`); at exit it removes the directory only if it
/// made it, and otherwise only the files it names. (It used to remove the
/// directory with everything in it, which took every image of every other
/// server in /dev/shm along.)
#[derive(Debug)]
pub struct ChildDir {
    path: PathBuf,
    made: bool,
}

impl ChildDir {
    pub fn new(given: Option<PathBuf>) -> ChildDir {
        let path = given.unwrap_or_else(|| {
            let [shm, _] = own_dirs();
            shm
        });
        let made = !path.exists();
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!("cannot make the directory {}: {e}", path.display());
        }
        ChildDir { path, made }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove what the child made: the whole directory if it made it,
    /// else each of `files` (paths inside it; a missing one is fine).
    pub fn remove(self, files: impl IntoIterator<Item = PathBuf>) {
        if self.made {
            let _ = std::fs::remove_dir_all(&self.path);
            return;
        }
        for f in files {
            if f.starts_with(&self.path) {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// Block until the parent closes our stdin, or until SIGINT, SIGTERM or
/// SIGHUP: a child stopped by hand (Ctrl-C, `kill`) then still removes
/// its image (a 1 GiB file in /dev/shm) instead of leaving it to fill
/// the memory of the next runs.
pub fn wait_for_parent() {
    let (tx, done) = std::sync::mpsc::channel::<()>();
    match pktfs_support::signal::shutdown_signal() {
        Ok(sig) => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                if sig.recv().is_ok() {
                    let _ = tx.send(());
                }
            });
        }
        Err(e) => eprintln!("netbench child: {e}; only the parent's exit stops it cleanly"),
    }
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin().lock();
        while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
        let _ = tx.send(());
    });
    let _ = done.recv();
}

/// The directories netbench runs make for themselves: `PREFIX-PID` under
/// these bases (the run's images and nginx's prefix under /dev/shm, the
/// ext4 baseline's files under /tmp).
const OWN_DIRS: [(&str, &str); 2] = [("/dev/shm", "pktfs-netbench-"), ("/tmp", "pktfs-netbench-")];

/// This process's own directories, in the order of [`OWN_DIRS`]: the
/// images' under /dev/shm and the ext4 baseline's under /tmp.
pub fn own_dirs() -> [PathBuf; 2] {
    OWN_DIRS.map(|(base, prefix)| Path::new(base).join(format!("{prefix}{}", std::process::id())))
}

/// Remove this process's own directories (a missing one is fine): a run
/// stopping early takes its images along.
pub fn remove_own_dirs() {
    for d in own_dirs() {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Remove what netbench processes that no longer exist left behind (one
/// killed with SIGKILL, or by the OOM killer, cannot clean up: each left
/// image is a GiB of tmpfs, that is of memory). A directory whose PID is
/// alive is kept, whatever runs under that PID now. Returns each
/// directory removed and its size in bytes.
pub fn sweep_stale() -> Vec<(PathBuf, u64)> {
    sweep_stale_in(&OWN_DIRS, |pid| Path::new(&format!("/proc/{pid}")).exists())
}

fn sweep_stale_in(bases: &[(&str, &str)], alive: impl Fn(u32) -> bool) -> Vec<(PathBuf, u64)> {
    let mut removed = Vec::new();
    for (base, prefix) in bases {
        let Ok(entries) = std::fs::read_dir(base) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            // Only directories (not symlinks), of dead processes.
            if pid == std::process::id() || alive(pid) || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = e.path();
            let bytes = tree_bytes(&path);
            if std::fs::remove_dir_all(&path).is_ok() {
                removed.push((path, bytes));
            }
        }
    }
    removed
}

/// Bytes of the regular files under `dir` (not following symlinks).
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Sweep (see [`sweep_stale`]) and say what went.
pub fn sweep_stale_and_report() {
    for (path, bytes) in sweep_stale() {
        println!(
            "removed {} ({} MiB), left by a netbench that no longer runs",
            path.display(),
            bytes >> 20
        );
    }
}

/// A server running as a child process.
#[derive(Debug)]
pub struct ChildServer {
    pub name: String,
    pub addr: SocketAddr,
    /// How it serves its connections, as it said.
    pub io: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl ChildServer {
    /// Run `netbench ARGS` and wait for its `serving` line.
    pub fn spawn(name: &str, args: &[String]) -> Result<ChildServer, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{name}: cannot start: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let parsed = line
            .trim()
            .split_once(" on ")
            .and_then(|(_, rest)| {
                let (addr, io) = rest.split_once(' ').unwrap_or((rest, ""));
                Some((addr.parse::<SocketAddr>().ok()?, io))
            })
            .map(|(a, io)| {
                let inner = io.strip_prefix('(').and_then(|i| i.strip_suffix(')'));
                (a, inner.unwrap_or(io).to_string())
            });
        let Some((addr, io)) = parsed else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{name}: did not start (said {:?})", line.trim()));
        };
        // Anything else it prints goes to our stdout, so its pipe never
        // fills and blocks it.
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                println!("  [child] {l}");
            }
        });
        Ok(ChildServer {
            name: name.to_string(),
            addr,
            io,
            stdin: child.stdin.take(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        drop(self.stdin.take()); // its cue to stop
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("netbench: {} did not stop in 10 s; killed", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (parent pid, utime, stime in clock ticks) of a process, from
/// /proc/PID/stat (all its threads, live and finished).
fn stat(pid: u32) -> Option<(u32, u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields are counted
    // from after its closing one (field 3, state, comes first).
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ppid = f.get(1)?.parse().ok()?;
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((ppid, utime, stime))
}

/// CPU seconds used so far by `pid` and every live descendant (nginx's
/// workers are its master's children).
pub fn tree_cpu_s(pid: u32) -> f64 {
    tree_cpu(pid).total_s()
}

/// CPU time of a process tree, split by mode.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTimes {
    /// From /proc/PID/stat, in clock ticks (10 ms each here).
    pub user_s: f64,
    pub system_s: f64,
    /// The same total from each process's CPU-time clock, in nanoseconds;
    /// `None` when a clock could not be read.
    pub exact_s: Option<f64>,
}

impl CpuTimes {
    /// User + system time: the exact clocks where they were read, else the
    /// ticks. A tick is 10 ms: in a 1 s run at 5,000 requests/s (the paced
    /// load) it is 2 µs per request, too coarse for a per-request figure.
    pub fn total_s(&self) -> f64 {
        self.exact_s.unwrap_or(self.user_s + self.system_s)
    }
}

/// CPU seconds used so far by one process, all its threads, live and
/// finished (its `CLOCK_PROCESS_CPUTIME_ID`, read from outside through
/// clock_getcpuclockid(3)).
fn process_cpu_s(pid: u32) -> Option<f64> {
    let pid = i32::try_from(pid).ok()?;
    let id = nix::time::clock_getcpuclockid(nix::unistd::Pid::from_raw(pid)).ok()?;
    let t = nix::time::clock_gettime(id).ok()?;
    Some(t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// [`tree_cpu_s`], user and system time apart: the system share is the
/// kernel's TCP work, which every server pays alike; the user share is
/// the server's own.
pub fn tree_cpu(pid: u32) -> CpuTimes {
    let mut all: Vec<(u32, u32, (u64, u64))> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if let Some((pp, u, s)) = stat(p) {
                    all.push((p, pp, (u, s)));
                }
            }
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(all.iter().filter(|x| x.1 == parent).map(|x| x.0));
        i += 1;
    }
    let (user, system) = all
        .iter()
        .filter(|x| tree.contains(&x.0))
        .fold((0u64, 0u64), |a, x| (a.0 + x.2 .0, a.1 + x.2 .1));
    let hz = rustix::param::clock_ticks_per_second() as f64;
    let exact_s = tree.iter().map(|&p| process_cpu_s(p)).sum::<Option<f64>>();
    CpuTimes {
        user_s: user as f64 / hz,
        system_s: system as f64 / hz,
        exact_s,
    }
}

/// Raise this process's soft RLIMIT_NOFILE to its hard limit (children,
/// wrk among them, inherit it: 10,000 connections need more than the
/// usual 1024 descriptors on both ends). Returns the limit now in force.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if l.maximum.is_some() && l.current != l.maximum {
        l.current = l.maximum;
        let _ = setrlimit(Resource::Nofile, l);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only directories named for a dead PID go, with their size; a live
    /// PID's, a name that is not a PID, a plain file and other names stay.
    #[test]
    fn the_sweep_removes_only_dead_runs_directories() {
        let base = std::env::temp_dir().join(format!("netbench-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dead = base.join("run-41");
        std::fs::create_dir_all(dead.join("nginx")).unwrap();
        std::fs::write(dead.join("a.img"), vec![0u8; 3000]).unwrap();
        std::fs::write(dead.join("nginx").join("error.log"), vec![0u8; 1000]).unwrap();
        for keep in ["run-42", "run-x1", "other-41"] {
            std::fs::create_dir_all(base.join(keep)).unwrap();
        }
        std::fs::write(base.join("run-43"), b"a file").unwrap();
        let b = base.display().to_string();
        let removed = sweep_stale_in(&[(b.as_str(), "run-")], |pid| pid == 42);
        assert_eq!(removed, vec![(dead.clone(), 4000)]);
        assert!(!dead.exists());
        for keep in ["run-42", "run-x1", "other-41", "run-43"] {
            assert!(base.join(keep).exists(), "{keep} was removed");
        }
        // Nothing left to sweep: a second pass removes nothing.
        assert!(sweep_stale_in(&[(b.as_str(), "run-")], |pid| pid == 42).is_empty());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// A child given a directory that holds other files leaves them (and
    /// the directory) and removes only its own; a directory it made goes
    /// whole.
    #[test]
    fn a_child_removes_only_what_it_made() {
        let base = std::env::temp_dir().join(format!("netbench-childdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let other = base.join("someone-elses.img");
        std::fs::write(&other, b"keep me").unwrap();
        let d = ChildDir::new(Some(base.clone()));
        let mine = d.path().join("mine.img");
        std::fs::write(&mine, b"x").unwrap();
        // A path outside the directory is never removed through it.
        let outside = std::env::temp_dir().join(format!("netbench-outside-{}", std::process::id()));
        std::fs::write(&outside, b"keep").unwrap();
        d.remove([mine.clone(), outside.clone(), base.join("never-made")]);
        assert!(!mine.exists());
        assert_eq!(std::fs::read(&other).unwrap(), b"keep me");
        assert!(outside.exists());
        std::fs::remove_file(&outside).unwrap();

        let fresh = base.join("fresh");
        let d = ChildDir::new(Some(fresh.clone()));
        std::fs::write(fresh.join("a"), b"a").unwrap();
        d.remove([]);
        assert!(!fresh.exists());
        assert!(other.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// The exact clock and the ticks agree on a process's CPU time, to
    /// within the ticks' resolution, and the clock counts a thread that
    /// finished between the two readings.
    #[test]
    fn the_cpu_clock_agrees_with_the_ticks_and_counts_finished_threads() {
        let me = std::process::id();
        let a = tree_cpu(me);
        assert!(
            a.exact_s.is_some(),
            "this process's CPU clock could not be read"
        );
        std::thread::spawn(|| {
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < std::time::Duration::from_millis(300) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        })
        .join()
        .unwrap();
        let b = tree_cpu(me);
        let exact = b.total_s() - a.total_s();
        let ticks = (b.user_s + b.system_s) - (a.user_s + a.system_s);
        // The spinning thread ran up to 0.3 s (less if the machine is busy);
        // the test's own threads add a little.
        assert!(exact > 0.0 && exact < 2.0, "exact {exact} s");
        let tick = 1.0 / rustix::param::clock_ticks_per_second() as f64;
        assert!(
            (exact - ticks).abs() <= 5.0 * tick,
            "exact {exact} s against ticks {ticks} s"
        );
    }
}
