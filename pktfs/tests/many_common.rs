//! What the tests with thousands of connections against a `pktfs serve`
//! child share: the fd limit raised and checked, io_uring usable here, the
//! server started on the loops (and what it says it allows), and the
//! connections opened before any of them sends.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli_common::{startup_lines, wait_listening, Proc, PKTFS};

/// Raise this process's soft RLIMIT_NOFILE to the hard limit; the soft
/// limit in force afterwards.
pub fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let l = getrlimit(Resource::Nofile);
    let _ = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: l.maximum,
            maximum: l.maximum,
        },
    );
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Room for `conns` client sockets (and some spare) after raising the
/// limit, for `require!`.
pub fn fd_room(conns: usize) -> Result<(), String> {
    let nofile = raise_nofile();
    let need = conns as u64 + 200;
    if nofile >= need {
        Ok(())
    } else {
        Err(format!(
            "RLIMIT_NOFILE is {nofile} even at its hard limit; {conns} connections need {need} (raise the hard limit: ulimit -Hn, or LimitNOFILE= for the service)"
        ))
    }
}

/// Whether io_uring's loops can run in this process (for `require!`).
pub fn uring_usable() -> Result<(), String> {
    pktfs_netpath::loops::choose(pktfs_netpath::IoMode::Uring, 1)
        .map(|_| ())
        .map_err(|e| format!("io_uring is not usable in this process: {e}"))
}

/// `pktfs serve IMG LISTEN_FLAG ADDR --io IO --loops 2` (`IO`: uring or
/// epoll), once it is listening. Checks it says `serving` (e.g. "http:
/// io_uring (2 loops)") and that the connection limit it prints allows
/// `conns`.
pub fn serve_on_loops(
    img: &Path,
    listen_flag: &str,
    addr: SocketAddr,
    io: &str,
    serving: &str,
    conns: usize,
) -> Proc {
    let mut server = Proc::spawn(
        Command::new(PKTFS)
            .args(["serve", img.to_str().unwrap(), listen_flag])
            .arg(addr.to_string())
            .args(["--io", io, "--loops", "2"])
            // Raw connections have their own cap (default 1024).
            .args(["--raw-max-connections", &conns.to_string()])
            // Warnings only: the access log would print a line per connection.
            .args(["--log-level", "warn"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    );
    // It prints how it serves and what the fd limit allows.
    let said = startup_lines(&mut server);
    assert!(said.contains(serving), "{said}");
    // And the polling in force (the default window, paused while it misses).
    assert!(
        said.contains("busy polling 50 us after each turn with work, paused while polls miss"),
        "{said}"
    );
    let allowed: usize = said
        .split("up to ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no connection limit printed: {said}"));
    assert!(allowed >= conns, "the server allows only {allowed}: {said}");
    wait_listening(addr);
    server
}

/// Held by a test while it has its thousands of connections open: the
/// tests of one binary share this process's file-descriptor limit, which
/// `fd_room` checked for one of them.
pub static MANY_AT_ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Open `conns` connections to `addr`, all before any sends.
pub fn open_all(addr: SocketAddr, conns: usize) -> Vec<TcpStream> {
    let t0 = Instant::now();
    let v: Vec<TcpStream> = (0..conns)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    eprintln!("{conns} connections open after {:?}", t0.elapsed());
    v
}
