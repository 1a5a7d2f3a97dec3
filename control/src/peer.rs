//! Who is at the other end of a control connection, and who may be.
//!
//! Both ends check: the holder refuses clients that are not trusted with
//! the image, and a client refuses a listener that is not trusted with it
//! (an abstract name is first come, first served, so any local user can
//! bind `pktfs-ctl:DEV:INO` before the real holder does).

use std::os::fd::AsFd;

/// The credentials of the process at the other end of a Unix socket
/// (SO_PEERCRED: for a client, the process that called `listen`; for the
/// holder, the process that called `connect`).
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

pub fn peer(s: impl AsFd) -> std::io::Result<Peer> {
    let c = rustix::net::sockopt::socket_peercred(s)?;
    Ok(Peer {
        pid: c.pid.as_raw_nonzero().get(),
        uid: c.uid.as_raw(),
        gid: c.gid.as_raw(),
    })
}

/// The users trusted with an image: root, the image file's owner, and the
/// user this process runs as (real or effective). The same rule on both
/// ends, so a holder and a client of the same user always agree.
#[derive(Debug, Clone, Copy)]
pub struct Trust {
    pub owner: u32,
    me: u32,
    me_eff: u32,
}

impl Trust {
    pub fn new(owner: u32) -> Trust {
        Trust {
            owner,
            me: rustix::process::getuid().as_raw(),
            me_eff: rustix::process::geteuid().as_raw(),
        }
    }

    pub fn me(&self) -> u32 {
        self.me
    }

    pub fn allows(&self, uid: u32) -> bool {
        uid == 0 || uid == self.owner || uid == self.me || uid == self.me_eff
    }
}

/// `pid 123 (python3, uid 65534 nobody)`: a process as a person finds it
/// in `ps`.
pub fn describe(pid: i32, uid: Option<u32>) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_else(|_| "command unknown".into());
    match uid {
        Some(u) => format!("pid {pid} ({comm}, uid {u}{})", user_name(u)),
        None => format!("pid {pid} ({comm})"),
    }
}

/// ` alice` for uid 1000, or "" when /etc/passwd has no such user.
fn user_name(uid: u32) -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let mut f = l.split(':');
                let name = f.next()?;
                (f.nth(1)?.parse::<u32>().ok()? == uid).then(|| format!(" {name}"))
            })
        })
        .unwrap_or_default()
}

/// Who holds the abstract name `name`, for a holder that could not bind
/// it: a sentence naming the process, or saying plainly why it cannot be
/// named.
pub fn who_holds(name: &[u8]) -> String {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixStream};
    // A listener answers a connect, and SO_PEERCRED then names it whoever
    // owns it (no /proc permissions needed). Nothing is sent to it.
    if let Ok(s) = SocketAddr::from_abstract_name(name).and_then(|a| UnixStream::connect_addr(&a)) {
        if let Ok(p) = peer(&s) {
            return describe(p.pid, Some(p.uid));
        }
    }
    // A socket bound but not listening refuses connections: find its inode
    // in /proc/net/unix, then the process with that inode among its fds.
    let inodes = abstract_inodes(name);
    if inodes.is_empty() {
        return "a process that cannot be found (the name is not in /proc/net/unix \
                of this network namespace)"
            .into();
    }
    if let Some(pid) = processes_with_sockets(&inodes).into_iter().next() {
        let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .and_then(|l| l.split_whitespace().next()?.parse().ok())
            });
        return describe(pid, uid);
    }
    format!(
        "a process that cannot be found (socket inode {}; its /proc/PID/fd is not readable by \
         uid {}: run as root to name it, e.g. `ss -xlp | grep {}`)",
        inodes[0],
        rustix::process::geteuid().as_raw(),
        String::from_utf8_lossy(name)
    )
}

/// The socket inodes bound to the abstract name `name`, from /proc/net/unix
/// (`Num RefCount Protocol Flags Type St Inode Path`, abstract names with a
/// leading '@').
fn abstract_inodes(name: &[u8]) -> Vec<u64> {
    let Ok(table) = std::fs::read("/proc/net/unix") else {
        return Vec::new();
    };
    let want = [b"@".as_slice(), name].concat();
    String::from_utf8_lossy(&table)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[7].as_bytes() == want.as_slice())
                .then(|| f[6].parse().ok())
                .flatten()
        })
        .collect()
}

/// The pids with one of `inodes` among their open descriptors.
fn processes_with_sockets(inodes: &[u64]) -> Vec<i32> {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        if fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|t| wanted.iter().any(|w| t.as_os_str() == w.as_str()))
        }) {
            found.push(pid);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_root_owner_or_me() {
        let t = Trust::new(4242);
        assert!(t.allows(0));
        assert!(t.allows(4242));
        assert!(t.allows(t.me()));
        let stranger = (1..u32::MAX)
            .find(|u| ![4242, t.me(), t.me_eff].contains(u))
            .unwrap();
        assert!(!t.allows(stranger));
    }

    #[test]
    fn a_listener_is_named_by_its_pid() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("pktfs-ctl-test:{}:listen", std::process::id());
        let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let _l = std::os::unix::net::UnixListener::bind_addr(&a).unwrap();
        let said = who_holds(name.as_bytes());
        assert!(
            said.starts_with(&format!("pid {} (", std::process::id())),
            "{said}"
        );
    }

    #[test]
    fn a_bound_socket_that_does_not_listen_is_found_in_proc() {
        // Bound without listen: connect is refused, so only /proc names it.
        let name = format!("pktfs-ctl-test:{}:bound", std::process::id());
        let fd = rustix::net::socket(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            None,
        )
        .unwrap();
        let a = rustix::net::SocketAddrUnix::new_abstract_name(name.as_bytes()).unwrap();
        rustix::net::bind(&fd, &a).unwrap();
        let said = who_holds(name.as_bytes());
        assert!(
            said.starts_with(&format!("pid {} (", std::process::id())),
            "{said}"
        );
    }

    #[test]
    fn a_free_name_is_said_to_be_unfindable() {
        let said = who_holds(b"pktfs-ctl-test:nobody-has-this");
        assert!(said.contains("cannot be found"), "{said}");
    }
}
