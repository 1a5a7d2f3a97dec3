//! The control socket (`@pktfs-ctl:DEV:INO`, pktfs_netpath::control) against
//! another local user and against floods:
//! - `nobody` binds an image's name first: the image owner's clients
//!   (`stat`, `recv`, `send`, a request passing a TCP socket) refuse it,
//!   naming its pid, and it sees neither a byte nor a descriptor; a server
//!   started while the name is taken does not start, naming the squatter;
//! - thousands of connections (from `nobody`, refused; from root, held
//!   open without a request) leave the holder's thread count within
//!   [`MAX_CONNECTIONS`] of where it was, and `pktfs stat` still works;
//! - a request trickled a byte a second is cut off by the whole-request
//!   deadline; an oversize one and a passed descriptor that is not a
//!   connected TCP socket are refused (and the descriptor closed);
//! - `nobody` asking about a root-owned image is refused.
//!
//! The other user is this test binary run again as `nobody` (std's
//! `CommandExt::uid`), running only [`hostile_helper`], told what to do by
//! environment variables.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktfs_netpath::control::{MAX_CONNECTIONS, MAX_REQUEST, REQUEST_DEADLINE};

use crate::cli_common::{mkfs, serve, stop, try_startup_lines, Proc, PKTFS};
use crate::prereq;

/// The helper's role, the abstract name it acts on, and how many
/// connections a flood makes.
const ROLE: &str = "PKTFS_HOSTILE_CONTROL_ROLE";
const NAME: &str = "PKTFS_HOSTILE_CONTROL_NAME";
const COUNT: &str = "PKTFS_HOSTILE_CONTROL_COUNT";
/// Lines the helper reports on (its stderr) start with this.
const SAYS: &str = "HOSTILE-CONTROL ";

/// Connections in a flood.
const FLOOD: usize = 2000;

/// Not a test: what the other user does, when another test runs this
/// binary as `nobody` with [`ROLE`] set. `squat`: listen on the name and
/// report, per connection, the bytes and descriptors it got. `bind`: bind
/// the name without listening. `flood`: open [`COUNT`] connections and
/// report how many the holder answered with a refusal. Each role ends when
/// its stdin closes (or after a minute, should the test die).
#[test]
#[ignore = "a helper that other tests of this module run as another user"]
fn hostile_helper() {
    let Ok(role) = std::env::var(ROLE) else {
        eprintln!("hostile_helper only acts when run by the control tests ({ROLE} unset)");
        return;
    };
    let name = std::env::var(NAME).expect("a name");
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(0);
    });
    // One write per line: a line written in pieces could be cut short by
    // the exit when stdin closes.
    let say = |s: String| {
        let _ = std::io::stderr().write_all(format!("{SAYS}{s}\n").as_bytes());
    };
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    match role.as_str() {
        "squat" => {
            let l = UnixListener::bind_addr(&addr).unwrap();
            say(format!("ready {}", std::process::id()));
            for s in l.incoming().flatten() {
                // What an impostor would answer a `recv`: a clean end.
                let _ = (&s).write_all(b"{\"ok\":true,\"result\":{\"ended_cleanly\":true}}\n");
                let (bytes, fds) = drain(&s);
                say(format!("conn bytes={bytes} fds={fds}"));
            }
        }
        "bind" => {
            let fd = rustix::net::socket(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::STREAM,
                None,
            )
            .unwrap();
            let a = rustix::net::SocketAddrUnix::new_abstract_name(name.as_bytes()).unwrap();
            rustix::net::bind(&fd, &a).unwrap();
            say(format!("ready {}", std::process::id()));
            std::thread::park();
        }
        "flood" => {
            let want: usize = std::env::var(COUNT).unwrap().parse().unwrap();
            raise_nofile();
            let mut conns = Vec::new();
            for _ in 0..want {
                match UnixStream::connect_addr(&addr) {
                    Ok(s) => conns.push(s),
                    Err(_) => break,
                }
            }
            // What each got: the refusal line, sent on the accept thread at
            // once (so a short wait is enough; a holder that waited for a
            // request would have sent nothing yet).
            std::thread::sleep(Duration::from_millis(300));
            let mut refused = 0;
            for s in &conns {
                s.set_nonblocking(true).unwrap();
                let mut got = [0u8; 512];
                if matches!((&*s).read(&mut got), Ok(n) if String::from_utf8_lossy(&got[..n]).contains("may not control this image"))
                {
                    refused += 1;
                }
            }
            say(format!(
                "ready {} {} {refused}",
                std::process::id(),
                conns.len()
            ));
            std::thread::park();
        }
        r => panic!("unknown role {r}"),
    }
}

/// Read a connection to its end (or 2 s): the bytes and descriptors sent.
fn drain(s: &UnixStream) -> (usize, usize) {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let (mut bytes, mut fds) = (0, 0);
    loop {
        let mut buf = [0u8; 4096];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        match rustix::net::recvmsg(
            s,
            &mut [std::io::IoSliceMut::new(&mut buf)],
            &mut cmsg,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(r) => {
                for m in cmsg.drain() {
                    if let RecvAncillaryMessage::ScmRights(f) = m {
                        fds += f.count();
                    }
                }
                if r.bytes == 0 {
                    return (bytes, fds);
                }
                bytes += r.bytes;
            }
            Err(_) => return (bytes, fds),
        }
    }
}

/// Room for [`FLOOD`] connections in this process.
fn raise_nofile() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    l.current = l.maximum;
    let _ = setrlimit(Resource::Nofile, l);
}

/// An image owned by root in a directory every user can reach (so
/// `nobody` can stat it and find its control name).
fn image() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("pktfs-hostile-ctl")
        .tempdir_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(d.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = d.path().join("img");
    mkfs(&img, 32 << 20);
    (d, img)
}

/// The image's control socket name, as pktfs_netpath::control names it.
fn ctl_name(img: &Path) -> String {
    let m = std::fs::metadata(img).unwrap();
    format!("pktfs-ctl:{}:{}", m.dev(), m.ino())
}

/// `nobody`'s uid and gid.
fn nobody() -> (u32, u32) {
    let uid = prereq::user_id("nobody").unwrap();
    let gid = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .and_then(|l| l.split(':').nth(3)?.parse().ok())
        .unwrap();
    (uid, gid)
}

/// This test binary can be run by `nobody`: every directory above it
/// searchable by others, the file executable by others.
fn exe_reachable() -> prereq::Check {
    let exe = std::env::current_exe().unwrap();
    let ok = exe.ancestors().all(|p| {
        std::fs::metadata(p).is_ok_and(|m| {
            let want = if p == exe { 0o005 } else { 0o001 };
            m.mode() & want == want
        })
    });
    prereq::holds(ok, || {
        format!(
            "{} is not reachable by other users (chmod o+x its directories), \
             so it cannot run as nobody",
            exe.display()
        )
    })
}

/// The helper running as `nobody`.
struct Hostile {
    child: Child,
    said: BufReader<ChildStderr>,
    /// The words after "ready" on its first line (its pid first).
    ready: Vec<String>,
}

impl Hostile {
    fn start(role: &str, name: &str, count: usize) -> Hostile {
        let (uid, gid) = nobody();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                // Its full name: hostile::control::hostile_helper.
                &crate::harness::name_in(module_path!(), "hostile_helper"),
                "--ignored",
                "--nocapture",
            ])
            .args(["--test-threads", "1", "-q"])
            .env(ROLE, role)
            .env(NAME, name)
            .env(COUNT, count.to_string())
            .uid(uid)
            .gid(gid)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut said = BufReader::new(child.stderr.take().unwrap());
        let ready = loop {
            let l = next_line(&mut said).unwrap_or_else(|| panic!("the {role} helper ended"));
            if let Some(r) = l.strip_prefix("ready ") {
                break r.split_whitespace().map(String::from).collect();
            }
        };
        Hostile { child, said, ready }
    }

    fn pid(&self) -> u32 {
        self.ready[0].parse().unwrap()
    }

    /// End it; what it reported after "ready".
    /// Its report lines: the first `expected` read before it is told to
    /// end (closing its stdin ends it at once, perhaps before it has said
    /// what the test waits for), then whatever else it said.
    fn finish(mut self, expected: usize) -> Vec<String> {
        let mut rest = Vec::new();
        while rest.len() < expected {
            match next_line(&mut self.said) {
                Some(l) => rest.push(l),
                None => break,
            }
        }
        drop(self.child.stdin.take());
        while let Some(l) = next_line(&mut self.said) {
            rest.push(l);
        }
        let _ = self.child.wait();
        rest
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let t0 = Instant::now();
        while let Ok(None) = self.child.try_wait() {
            if t0.elapsed() > Duration::from_secs(5) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The helper's next report line, skipping libtest's own output.
fn next_line(r: &mut impl BufRead) -> Option<String> {
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 {
            return None;
        }
        if let Some(i) = l.find(SAYS) {
            return Some(l[i + SAYS.len()..].trim_end().to_string());
        }
    }
}

/// Run `cmd` to its end within `secs` (killed and failed past that).
fn bounded(cmd: &mut Command, secs: u64) -> std::process::Output {
    let mut c = Proc::spawn(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut out = c.stdout.take().unwrap();
    let mut err = c.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = c.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "{cmd:?} still running after {secs} s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

fn stat_ok(img: &Path) {
    let o = bounded(
        Command::new(PKTFS).args(["stat", img.to_str().unwrap()]),
        30,
    );
    assert!(
        o.status.success(),
        "pktfs stat: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Threads of process `pid` (/proc/PID/status).
fn threads(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The most threads `pid` had while `during` ran (sampled every 2 ms).
fn max_threads_during<T>(pid: u32, during: impl FnOnce() -> T) -> (usize, T) {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let sampler = std::thread::spawn(move || {
        let mut most = 0;
        while !d.load(Ordering::SeqCst) {
            most = most.max(threads(pid));
            std::thread::sleep(Duration::from_millis(2));
        }
        most.max(threads(pid))
    });
    let r = during();
    done.store(true, Ordering::SeqCst);
    (sampler.join().unwrap(), r)
}

/// Connect to a served image's control socket as this (trusted) process.
fn connect(img: &Path) -> UnixStream {
    let a = SocketAddr::from_abstract_name(ctl_name(img).as_bytes()).unwrap();
    let s = UnixStream::connect_addr(&a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// The holder's answer line on `s`.
fn answer(s: &UnixStream) -> serde_json::Value {
    let mut l = String::new();
    BufReader::new(s).read_line(&mut l).unwrap();
    serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}"))
}

/// Send `line` with `fd` passed (SCM_RIGHTS).
fn pass(s: &UnixStream, line: &[u8], fd: std::os::fd::BorrowedFd<'_>) {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    let fds = [fd];
    assert!(cmsg.push(SendAncillaryMessage::ScmRights(&fds)));
    rustix::net::sendmsg(
        s,
        &[std::io::IoSlice::new(line)],
        &mut cmsg,
        SendFlags::empty(),
    )
    .unwrap();
}

#[test]
fn clients_refuse_a_squatter_and_pass_it_nothing() {
    require!(prereq::root(), prereq::user("nobody"), exe_reachable());
    let (_d, img) = image();
    let squat = Hostile::start("squat", &ctl_name(&img), 0);
    let pid = squat.pid();
    let (uid, _) = nobody();
    let names_it = |err: &str| {
        assert!(
            err.contains(&format!("pid {pid} (")) && err.contains(&format!("uid {uid}")),
            "does not name the squatter (pid {pid}, uid {uid}): {err}"
        );
    };
    let i = img.to_str().unwrap();
    // The TCP peer of recv and send: it must never see a connection.
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = peer.local_addr().unwrap().to_string();
    for args in [
        vec!["stat", i],
        vec!["chain", i, "/x"],
        vec!["recv", i, "/x", "--connect", &at],
        vec!["send", i, "/x", &at],
    ] {
        let o = bounded(Command::new(PKTFS).args(&args), 30);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "pktfs {args:?} succeeded: {err}");
        names_it(&err);
    }
    peer.set_nonblocking(true).unwrap();
    assert!(peer.accept().is_err(), "recv or send connected to the peer");
    // A request passing a connected socket (what recv and send do once the
    // checks pass) is refused before the socket is passed.
    let sock = std::net::TcpStream::connect(peer.local_addr().unwrap()).unwrap();
    let r = pktfs_netpath::control::request_passing(
        &img,
        &serde_json::json!({"op": "recv", "path": "/x"}),
        Some(&sock),
        &mut |_| {},
    );
    match r {
        Err(e @ pktfs_netpath::control::ControlError::Impostor { .. }) => names_it(&e.to_string()),
        r => panic!("request_passing to a squatter: {r:?}"),
    }
    let conns = squat.finish(5);
    // Every client reached the squatter (so the check is what refused it)
    // and sent it nothing: not a byte, not a descriptor.
    assert_eq!(conns.len(), 5, "{conns:?}");
    assert!(conns.iter().all(|c| c == "conn bytes=0 fds=0"), "{conns:?}");
}

#[test]
fn a_server_whose_name_is_taken_does_not_start_and_names_the_taker() {
    require!(prereq::root(), prereq::user("nobody"), exe_reachable());
    // Listening (named by SO_PEERCRED) and bound only (found in /proc).
    for role in ["squat", "bind"] {
        let (_d, img) = image();
        let squat = Hostile::start(role, &ctl_name(&img), 0);
        let mut c = Proc::spawn(
            Command::new(PKTFS)
                .args(["serve", img.to_str().unwrap(), "--listen", "127.0.0.1:0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let said = try_startup_lines(&mut c);
        assert!(said.is_err(), "{role}: the server started: {said:?}");
        let o = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{role}: {err}");
        assert!(
            err.contains("already bound by") && err.contains(&format!("pid {} (", squat.pid())),
            "{role}: does not name the squatter (pid {}): {err}",
            squat.pid()
        );
    }
    // A mount likewise: the daemon tells its parent, which fails.
    if !prereq::part_met("pktfs mount", &[prereq::fuse()]) {
        return;
    }
    let (d, img) = image();
    let mnt = d.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let squat = Hostile::start("squat", &ctl_name(&img), 0);
    let o = bounded(
        Command::new(PKTFS).args(["mount", img.to_str().unwrap(), mnt.to_str().unwrap()]),
        30,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .contains(mnt.to_str().unwrap());
    if mounted {
        let _ = Command::new("umount").arg(&mnt).status();
    }
    assert!(!o.status.success() && !mounted, "the mount started: {err}");
    assert!(
        err.contains(&format!("pid {} (", squat.pid())),
        "does not name the squatter (pid {}): {err}",
        squat.pid()
    );
}

#[test]
fn a_connection_flood_leaves_the_holders_threads_bounded() {
    require!(prereq::root(), prereq::user("nobody"), exe_reachable());
    let (_d, img) = image();
    let (server, _) = serve(&img, Stdio::null());
    let pid = server.id();
    stat_ok(&img);
    // Let the threads a first request may start settle.
    std::thread::sleep(Duration::from_millis(200));
    let base = threads(pid);
    let bound = base + MAX_CONNECTIONS + 1;

    // From nobody: every connection refused on the accept thread.
    let (most, flood) = max_threads_during(pid, || {
        let f = Hostile::start("flood", &ctl_name(&img), FLOOD);
        let (made, refused): (usize, usize) =
            (f.ready[1].parse().unwrap(), f.ready[2].parse().unwrap());
        (f, made, refused)
    });
    let (f, made, refused) = flood;
    assert!(made >= 1000, "nobody made only {made} connections");
    assert_eq!(refused, made, "connections without the refusal line");
    assert!(
        most <= bound,
        "{made} connections from nobody: {most} threads (base {base}, bound {bound})"
    );
    drop(f);

    // From root (trusted), held open without a request.
    raise_nofile();
    let t0 = Instant::now();
    let (most, held) = max_threads_during(pid, || {
        let a = SocketAddr::from_abstract_name(ctl_name(&img).as_bytes()).unwrap();
        let held: Vec<UnixStream> = (0..FLOOD)
            .map_while(|_| UnixStream::connect_addr(&a).ok())
            .collect();
        // Long enough for every connection to be accepted and decided.
        std::thread::sleep(Duration::from_millis(500));
        held
    });
    assert!(
        held.len() >= 1000,
        "root made only {} connections",
        held.len()
    );
    assert!(
        most <= bound,
        "{} silent connections from root: {most} threads (base {base}, bound {bound})",
        held.len()
    );
    // All but the slots were told "busy" at once.
    let busy = held
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 256];
            matches!((&**s).read(&mut b), Ok(n) if String::from_utf8_lossy(&b[..n]).contains("\"busy\":true"))
        })
        .count();
    assert!(
        busy >= held.len() - MAX_CONNECTIONS,
        "{busy} of {} told busy",
        held.len()
    );
    // A person's `pktfs stat` while they are still open: the slots free at
    // the request deadline, and the client waits that long for one.
    stat_ok(&img);
    assert!(t0.elapsed() < REQUEST_DEADLINE + Duration::from_secs(5));
    drop(held);
    stat_ok(&img);
    assert!(threads(pid) <= bound);
    stop(server);
}

#[test]
fn slow_oversize_and_wrongly_passed_requests_are_refused() {
    require!(prereq::root());
    let (_d, img) = image();
    let (server, _) = serve(&img, Stdio::null());

    // A byte a second: each read is quick, the line never completes.
    let s = connect(&img);
    let w = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for b in b"{\"op\":\"stat\"".iter().cycle().take(30) {
            if (&w).write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let t0 = Instant::now();
    let v = answer(&s);
    let took = t0.elapsed();
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("not complete within"),
        "{v}"
    );
    assert!(
        took >= REQUEST_DEADLINE - Duration::from_millis(500)
            && took < REQUEST_DEADLINE + Duration::from_secs(2),
        "cut off after {took:?}"
    );
    drop(s);
    trickle.join().unwrap();

    // Longer than the bound.
    let s = connect(&img);
    let mut big = vec![b' '; MAX_REQUEST + 100];
    big.extend_from_slice(b"{\"op\":\"stat\"}\n");
    let _ = (&s).write_all(&big);
    let v = answer(&s);
    assert!(v["error"].as_str().unwrap().contains("longer than"), "{v}");

    // A pipe and a Unix socket passed as if they were the TCP connection.
    let (mut pr, pw) = std::io::pipe().unwrap();
    let (u1, _u2) = UnixStream::pair().unwrap();
    for (what, fd) in [("pipe", pw.as_fd()), ("unix socket", u1.as_fd())] {
        let s = connect(&img);
        pass(&s, b"{\"op\":\"recv\",\"path\":\"/x\"}\n", fd);
        let v = answer(&s);
        assert_eq!(v["ok"], false, "{what}: {v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains("not a connected TCP socket"),
            "{what}: {v}"
        );
    }
    // The holder closed its copy of the pipe: with ours gone, the read end
    // ends.
    drop(pw);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = tx.send(pr.read_to_end(&mut rest).is_ok());
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(10)),
        Ok(true),
        "the holder kept the passed pipe open"
    );
    // Nothing was received into the image.
    let o = bounded(
        Command::new(PKTFS).args(["chain", img.to_str().unwrap(), "/x"]),
        30,
    );
    assert!(!o.status.success());
    stat_ok(&img);
    stop(server);
}

#[test]
fn nobody_may_not_ask_about_roots_image() {
    require!(prereq::root(), prereq::user("nobody"), exe_reachable());
    let (_d, img) = image();
    let (server, _) = serve(&img, Stdio::null());
    let (uid, gid) = nobody();
    let o = bounded(
        Command::new(PKTFS)
            .args(["stat", img.to_str().unwrap()])
            .uid(uid)
            .gid(gid),
        30,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("may not control this image"), "{err}");
    stat_ok(&img);
    stop(server);
}
