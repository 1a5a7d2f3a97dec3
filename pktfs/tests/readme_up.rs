//! The README's two commands, taken from README.md itself so the two cannot
//! drift: the "run it" line is run verbatim (a release build, an image on
//! /dev/shm, a mount, a server on 127.0.0.1:8080, S3 on 127.0.0.1:9000) and
//! used with curl and aws-cli as the banner says; the test line must be
//! what `.ci/run` runs.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use pktfs_fs::{OpenOptions, Volume};
use rustix::process::{kill_process_group, Pid, Signal};

use crate::fuse_common::is_mountpoint;
use crate::net_common::wait_until;
use crate::prereq;

/// The workspace root (README.md, .ci/run, and where the command runs).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The command lines (indented code) of README.md's "## The two commands".
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("The two commands"))
        .expect("README.md has a \"## The two commands\" section");
    let cmds: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("    ") && !l.trim().is_empty())
        .map(|l| l.trim().to_string())
        .collect();
    assert_eq!(cmds.len(), 2, "the section has two command lines: {cmds:?}");
    cmds
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let cmds = readme_commands();
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .expect(".ci/run runs something");
    assert_eq!(
        last, cmds[1],
        ".ci/run's last command is the README's test command"
    );
}

/// The header the banner's curl lines send (set once `up` said where its
/// token is); empty before.
static AUTH: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn auth_header() -> String {
    AUTH.lock().unwrap().clone()
}

/// `up` running in its own process group; on drop (also when the test
/// fails half-way) it is stopped, its mount detached, its image removed.
struct Up {
    child: Child,
    pgid: Pid,
    image: PathBuf,
    mount: Option<PathBuf>,
    /// Lines `up` prints on stdout, as they come.
    out: Receiver<String>,
    /// Everything on stderr (cargo's build output, then pktfs's).
    err: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Up {
    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// The next line of stdout within `limit`.
    fn line(&self, limit: Duration) -> String {
        match self.out.recv_timeout(limit) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no output from `up` within {limit:?}; stderr:\n{}",
                self.stderr()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "`up` ended before printing what was expected; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// No process of the group is left.
    fn group_gone(&self) -> bool {
        rustix::process::test_kill_process_group(self.pgid).is_err()
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = kill_process_group(self.pgid, Signal::INT);
            let t0 = Instant::now();
            while self.child.try_wait().ok().flatten().is_none()
                && t0.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = kill_process_group(self.pgid, Signal::KILL);
            let _ = self.child.wait();
        }
        if let Some(mp) = &self.mount {
            if is_mountpoint(mp) {
                let _ = Command::new("umount").arg("-l").arg(mp).status();
            }
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

fn curl(args: &[&str]) -> Vec<u8> {
    let out = Command::new("curl")
        .args(["-H", &auth_header()])
        .args(["-sS", "--fail", "--max-time", "30"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn readme_run_command_works_verbatim() {
    let run = readme_commands()[0].clone();
    assert!(run.starts_with("cargo run "), "{run}");
    // `up` serves on 127.0.0.1:8080 and nothing in the README's command
    // moves it, so the port must be free (else curl would reach whatever
    // holds it, not this `up`).
    let port_free = TcpListener::bind("127.0.0.1:8080").is_ok();
    let s3_port_free = TcpListener::bind("127.0.0.1:9000").is_ok();
    require!(
        prereq::fuse(),
        prereq::tool("curl"),
        prereq::tool("aws"),
        prereq::holds(port_free, || {
            "127.0.0.1:8080, where the README's `up` serves, is in use".into()
        }),
        prereq::holds(s3_port_free, || {
            "127.0.0.1:9000, where the README's `up` serves S3, is in use".into()
        }),
    );
    // `up` names its image after $USER and mounts at $HOME/pktfs: a user
    // name and a home of this test's own keep a person's default image
    // and mount (or another run's) out of it. Cargo and rustup find their
    // homes through CARGO_HOME and RUSTUP_HOME, kept as they were.
    let home = tempfile::tempdir().unwrap();
    let real_home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| real_home.join(".cargo"));
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| real_home.join(".rustup"));
    let user = format!("readme-up-{}", std::process::id());
    let image = PathBuf::from(format!("/dev/shm/pktfs-{user}.img"));
    // Named for this process only: a leftover is a crashed earlier run's.
    let _ = std::fs::remove_file(&image);

    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&run)
        .current_dir(root())
        .env("HOME", home.path())
        // `up` keeps its token in $XDG_CONFIG_HOME when set: here, $HOME.
        .env_remove("XDG_CONFIG_HOME")
        .env("USER", &user)
        .env("CARGO_HOME", cargo_home)
        .env("RUSTUP_HOME", rustup_home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = Pid::from_child(&child);
    let (tx, out) = channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut stderr = child.stderr.take().unwrap();
    let err2 = err.clone();
    // Drained all along: cargo's build output would otherwise fill the pipe.
    std::thread::spawn(move || {
        let mut b = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut b) {
            err2.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&b[..n]));
        }
    });
    let mut up = Up {
        child,
        pgid,
        image: image.clone(),
        mount: None,
        out,
        err,
    };

    // The banner. In CI the release build happens here, hence the long
    // first wait.
    let first = up.line(Duration::from_secs(30 * 60));
    assert!(
        first.starts_with(&format!("pktfs is up: created {}", image.display())),
        "{first}"
    );
    let mut banner = vec![first];
    while !banner.last().unwrap().starts_with("Ctrl-C stops") {
        banner.push(up.line(Duration::from_secs(30)));
    }
    let field = |key: &str| {
        banner
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key:?} line in the banner: {banner:#?}"))
    };
    let url = field("HTTP ");
    // `up` serves with a token of the user's own, made 0600 under their
    // home, and the banner's lines read it from there.
    let token_file = PathBuf::from(field("token "));
    assert!(
        token_file.starts_with(home.path()),
        "{}",
        token_file.display()
    );
    let token = std::fs::read_to_string(&token_file).unwrap();
    *AUTH.lock().unwrap() = format!("Authorization: Bearer {}", token.trim());
    let mp = PathBuf::from(field("mount "));
    assert!(mp.is_absolute(), "mounted: {}", mp.display());
    up.mount = Some(mp.clone());
    assert!(is_mountpoint(&mp), "{} is a mount", mp.display());
    assert_eq!(url, "http://127.0.0.1:8080/");
    let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    wait_until("the server accepts", Duration::from_secs(10), || {
        TcpStream::connect(addr).is_ok()
    });

    // As the banner says: store, list, fetch, and see it in the mount.
    let body = b"stored through the README's quick start\n".repeat(100);
    let src = home.path().join("somefile");
    std::fs::write(&src, &body).unwrap();
    let code = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-T",
        src.to_str().unwrap(),
        &format!("{url}somefile"),
    ]);
    assert_eq!(code, b"201", "PUT answers 201 Created");
    // Without the token another local user gets nothing, reads included.
    let anon = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("{url}somefile"))
        .output()
        .unwrap();
    assert_eq!(anon.stdout, b"401", "an anonymous GET is refused");
    let list = String::from_utf8(curl(&[&url])).unwrap();
    assert!(list.contains("somefile"), "listed: {list}");
    assert!(curl(&[&format!("{url}somefile")]) == body, "fetched back");
    assert!(
        std::fs::read(mp.join("somefile")).unwrap() == body,
        "in the mount"
    );

    // S3, with the banner's aws-cli lines run as printed (the key read
    // from the file they name), in the directory holding somefile. The
    // S3 endpoint runs on the event loops: with a thread per connection
    // (.ci/run's threads pass) `up` says it serves none.
    if std::env::var("PKTFS_IO").as_deref() == Ok("threads") {
        let why = field("S3    ");
        assert!(why.contains("--io threads"), "{why}");
    } else {
        s3_through_the_banner(&banner, home.path(), &mp, &body);
    }

    // Ctrl-C (to the whole group, as a terminal sends it) stops it all.
    kill_process_group(pgid, Signal::INT).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = up.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "`up` did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    wait_until(
        "every process of the group exited",
        Duration::from_secs(30),
        || up.group_gone(),
    );
    wait_until("the mount is gone", Duration::from_secs(10), || {
        !is_mountpoint(&mp)
    });
    // sh does not exec the command, and dies of the SIGINT as in a
    // terminal; pktfs (under it) is judged by what it did: it stopped,
    // and it closed the image cleanly.
    assert!(
        status.success() || status.signal() == Some(libc::SIGINT),
        "{status}"
    );
    let err = up.stderr();
    let said: Vec<&str> = err.lines().filter(|l| l.starts_with("pktfs: ")).collect();
    assert_eq!(said, ["pktfs: stopping"], "pktfs's messages: {err}");
    let v = Volume::open(&image, &OpenOptions::default()).unwrap();
    assert!(v.open_report().was_clean, "`up` closed the image cleanly");
    v.close().unwrap();
}

/// The banner's S3 lines (export, mb, cp, ls) run as printed, in `home`
/// (where somefile is); the object then reads back through the mount.
fn s3_through_the_banner(banner: &[String], home: &Path, mp: &Path, body: &[u8]) {
    let field = |key: &str| {
        banner
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {key:?} line in the banner: {banner:#?}"))
    };
    let s3_key = field("S3 key ");
    assert!(s3_key.contains(home.to_str().unwrap()), "{s3_key}");
    let tries: Vec<String> = banner
        .iter()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| l.starts_with("export AWS_CONFIG_FILE=") || l.starts_with("aws "))
        .map(|l| l.split("   # ").next().unwrap().trim_end().to_string())
        .collect();
    assert_eq!(tries.len(), 4, "export, mb, cp, ls: {banner:#?}");
    let script = tries.join(" && ");
    let aws = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(home)
        .env("HOME", home)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&aws.stdout);
    assert!(
        aws.status.success(),
        "{script}: {said}{}",
        String::from_utf8_lossy(&aws.stderr)
    );
    assert!(said.contains("somefile"), "the listing names it: {said}");
    assert!(
        std::fs::read(mp.join("demo/somefile")).unwrap() == *body,
        "the object is in the mount"
    );
}
