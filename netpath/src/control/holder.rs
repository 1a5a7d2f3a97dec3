//! The holder's side: listen on the image's name, admit a connection on
//! the accept thread (credentials, then the cap) before any thread or
//! buffer is spent on it, then answer its one request on a thread of its
//! own.

use std::io::Write;
use std::net::TcpStream;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pktfs_fs::{ScrubOptions, Volume};
use serde_json::{json, Value};

use super::request::{read_request, Request};
use super::{chain_json, locate, stat_json, ControlError};
use pktfs_control::peer::{self, Peer, Trust};
use pktfs_control::MAX_CONNECTIONS;

/// How long an answer or progress line may wait for a client that does not
/// read it before the connection is given up (a scrub is then cancelled).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most one log line per this interval about refused or turned-away
/// connections, so a flood does not become a flood of log lines.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// A running control socket; dropping it stops it.
#[derive(Debug)]
pub struct Control {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Control {
    /// Listen for requests about `image`, answered from `vol`.
    pub fn start(vol: Arc<Volume>, image: &Path) -> Result<Control, ControlError> {
        Self::start_with(vol, image, None)
    }

    /// [`Control::start`], with more facts for `pktfs stat` (the tier
    /// engine's counters, under `"tier"`).
    ///
    /// [`ControlError::NameTaken`] when another process already has the
    /// image's name: clients could not tell it from this one, so a holder
    /// that cannot have its name must not start.
    pub fn start_with(
        vol: Arc<Volume>,
        image: &Path,
        extra: Option<crate::config::Extra>,
    ) -> Result<Control, ControlError> {
        let io = |source| ControlError::Io {
            path: image.to_path_buf(),
            source,
        };
        let (name, owner) = locate(image).map_err(io)?;
        let addr = SocketAddr::from_abstract_name(&name).map_err(io)?;
        let l = match UnixListener::bind_addr(&addr) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(ControlError::NameTaken {
                    image: image.to_path_buf(),
                    name: String::from_utf8_lossy(&name).into_owned(),
                    holder: peer::who_holds(&name),
                })
            }
            Err(e) => return Err(io(e)),
        };
        l.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let trust = Trust::new(owner);
        let thread = std::thread::Builder::new()
            .name("pktfs-control".into())
            .spawn(move || accept_loop(vol, l, trust, st, extra))
            .map_err(io)?;
        Ok(Control {
            stop,
            thread: Some(thread),
        })
    }
}

/// Gives a connection's slot back when its thread ends (or never starts).
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Connections turned away since the last log line about them.
#[derive(Default)]
struct TurnedAway {
    last: Option<Instant>,
    since: u64,
}

impl TurnedAway {
    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            self.since += 1;
            return;
        }
        let more = std::mem::take(&mut self.since);
        if more > 0 {
            tracing::warn!(
                "control socket: {} ({more} more turned away before it)",
                what()
            );
        } else {
            tracing::warn!("control socket: {}", what());
        }
        self.last = Some(Instant::now());
    }
}

fn accept_loop(
    vol: Arc<Volume>,
    l: UnixListener,
    trust: Trust,
    stop: Arc<AtomicBool>,
    extra: Option<crate::config::Extra>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let holds = Arc::new(AtomicUsize::new(0));
    let mut away = TurnedAway::default();
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => admit(s, &vol, trust, (&active, &holds), &mut away, &extra),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fds = [rustix::event::PollFd::new(&l, rustix::event::PollFlags::IN)];
                let t = rustix::event::Timespec {
                    tv_sec: 0,
                    tv_nsec: 200_000_000,
                };
                let _ = rustix::event::poll(&mut fds, Some(&t));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!("control socket: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Decide on the accept thread, before a thread or a buffer is spent: an
/// untrusted peer and a connection over the cap get one short line (sent
/// without waiting: a peer that does not read gets nothing) and are closed.
fn admit(
    s: UnixStream,
    vol: &Arc<Volume>,
    trust: Trust,
    (active, holds): (&Arc<AtomicUsize>, &Arc<AtomicUsize>),
    away: &mut TurnedAway,
    extra: &Option<crate::config::Extra>,
) {
    let p = match peer::peer(&s) {
        Ok(p) => p,
        Err(e) => {
            away.note(|| format!("no credentials for a connection ({e}); closed"));
            return;
        }
    };
    if !trust.allows(p.uid) {
        let uid = p.uid;
        let (owner, me) = (trust.owner, trust.me());
        away.note(|| {
            format!(
                "refused {} (not root, the image's owner or this user)",
                peer::describe(p.pid, Some(uid))
            )
        });
        say_once(
            &s,
            &json!({"ok": false, "error": format!(
                "user {uid} may not control this image (only root, its owner {owner}, or user {me})"
            )}),
        );
        return;
    }
    // Only this thread adds to `active`, so checking then adding cannot
    // pass the cap.
    if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
        away.note(|| {
            format!(
                "busy: {MAX_CONNECTIONS} control connections already; turned away {}",
                peer::describe(p.pid, Some(p.uid))
            )
        });
        say_once(
            &s,
            &json!({"ok": false, "busy": true, "error": format!(
                "the holder is busy ({MAX_CONNECTIONS} control connections at once); try again"
            )}),
        );
        return;
    }
    active.fetch_add(1, Ordering::SeqCst);
    let slot = Slot(active.clone());
    let vol = vol.clone();
    let extra = extra.clone();
    let holds = holds.clone();
    let spawned = std::thread::Builder::new()
        .name("pktfs-control-conn".into())
        .spawn(move || serve(&vol, s, p, slot, (extra.as_ref(), &holds)));
    if let Err(e) = spawned {
        tracing::warn!("control socket: no thread for a connection ({e}); closed");
    }
}

/// One line, without blocking and without SIGPIPE; whatever does not fit
/// in the socket's buffer right now is not sent.
fn say_once(s: &UnixStream, v: &Value) {
    use rustix::net::SendFlags;
    let line = format!("{v}\n");
    let _ = rustix::net::send(
        s,
        line.as_bytes(),
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    );
}

fn send(s: &mut UnixStream, v: &Value) -> bool {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).is_ok()
}

fn serve(
    vol: &Volume,
    s: UnixStream,
    p: Peer,
    slot: Slot,
    (extra, holds): (Option<&crate::config::Extra>, &Arc<AtomicUsize>),
) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    let Ok(mut out) = s.try_clone() else { return };
    let Request { line, passed } = match read_request(&s) {
        Ok(Some(r)) => r,
        Ok(None) => return, // a probe (`is_held`)
        Err(e) => {
            tracing::warn!(
                "control socket: {} from {}",
                e,
                peer::describe(p.pid, Some(p.uid))
            );
            send(&mut out, &json!({"ok": false, "error": e.to_string()}));
            return;
        }
    };
    let req: Value = match serde_json::from_str(&line) {
        Ok(v) => v,
        Err(e) => {
            send(
                &mut out,
                &json!({"ok": false, "error": format!("bad request: {e}")}),
            );
            return;
        }
    };
    if req["op"].as_str() == Some("direct_hold") {
        // A hold lives as long as its reader: not on one of the
        // MAX_CONNECTIONS slots, on its own bound (`direct::MAX_HOLDS`).
        drop(slot);
        if let Err(e) = super::direct::serve_hold(vol, &req, &mut out, holds) {
            send(&mut out, &e.answer());
        }
        return;
    }
    let _slot = slot;
    let r = match req["op"].as_str() {
        Some("stat") => {
            let mut v = stat_json(vol);
            if let Some(x) = extra {
                let t: serde_json::Map<String, Value> = (x.0)()
                    .into_iter()
                    .map(|s| (s.name.to_string(), json!(s.value)))
                    .collect();
                v["tier"] = Value::Object(t);
            }
            Ok(v)
        }
        Some("chain") => match req["path"].as_str() {
            Some(p) => chain_json(vol, p),
            None => Err("chain needs a \"path\"".to_string()),
        },
        Some("scrub") => {
            let opts = ScrubOptions {
                rate_bytes_per_sec: req["rate_bytes_per_sec"].as_u64(),
            };
            let mut last = Instant::now();
            let mut gone = false;
            vol.scrub(&opts, &mut |p| {
                if last.elapsed() >= Duration::from_millis(100) {
                    last = Instant::now();
                    gone = !send(
                        &mut out,
                        &json!({"progress": {"files": p.files, "records": p.records,
                                "bytes": p.bytes, "total_bytes": p.total_bytes}}),
                    );
                }
                !gone // the client went away: cancel
            })
            .map(|r| r.to_json())
            .map_err(|e| e.to_string())
        }
        Some("recv_check") => match req["path"].as_str() {
            Some(path) => recv_mode(&req).and_then(|m| {
                crate::receive::to_file::check_target(vol, path, m)
                    .map(|()| json!({}))
                    .map_err(|e| e.to_string())
            }),
            None => Err("recv_check needs a \"path\"".into()),
        },
        Some("recv") => match (passed, req["path"].as_str()) {
            (Some(sock), Some(path)) => recv_op(vol, &sock, path, &req, (p.uid, p.gid)),
            (None, _) => Err("recv needs the connected socket passed with the request".into()),
            (_, None) => Err("recv needs a \"path\"".into()),
        },
        Some("send_check") => match req["path"].as_str() {
            Some(path) => crate::transmit::to_peer::check_source(vol, path).map(|_| json!({})),
            None => Err("send_check needs a \"path\"".into()),
        },
        Some("send") => match (passed, req["path"].as_str()) {
            (Some(sock), Some(path)) => send_op(vol, &sock, path),
            (None, _) => Err("send needs the connected socket passed with the request".into()),
            (_, None) => Err("send needs a \"path\"".into()),
        },
        Some(op) if op.starts_with("keys_") => {
            super::keys::serve_op(vol, &req, &peer::describe(p.pid, Some(p.uid)))
        }
        _ => Err(format!("unknown op in {}", line.trim())),
    };
    let v = match r {
        Ok(v) => json!({"ok": true, "result": v}),
        Err(e) => json!({"ok": false, "error": e}),
    };
    send(&mut out, &v);
}

/// A request's receive mode (`create` when it names none).
fn recv_mode(req: &Value) -> Result<crate::receive::to_file::RecvMode, String> {
    match req["mode"].as_str().unwrap_or("create") {
        "create" => Ok(crate::receive::to_file::RecvMode::CreateOnly),
        "append" => Ok(crate::receive::to_file::RecvMode::Append),
        "replace" => Ok(crate::receive::to_file::RecvMode::ReplaceAtEnd),
        m => Err(format!(
            "unknown receive mode {m:?} (create, append, replace)"
        )),
    }
}

/// The holder receives a stream into one of its files.
/// `peer`: the client's user and group (SO_PEERCRED); the file is theirs,
/// whatever the request says, unless the client is root.
fn recv_op(
    vol: &Volume,
    sock: &TcpStream,
    path: &str,
    req: &Value,
    peer: (u32, u32),
) -> Result<Value, String> {
    let asked = |k: &str, own: u32| {
        if peer.0 == 0 {
            req[k].as_u64().map_or(own, |v| v as u32)
        } else {
            own
        }
    };
    let opts = crate::receive::to_file::RecvOptions {
        mode: recv_mode(req)?,
        commit: match (req["commit"].as_str(), req["commit_bytes"].as_u64()) {
            (Some("chunk"), _) => crate::receive::to_file::CommitPolicy::EveryChunk,
            (Some("end"), _) => crate::receive::to_file::CommitPolicy::AtEnd,
            (_, Some(n)) => crate::receive::to_file::CommitPolicy::EveryBytes(n.max(1)),
            _ => crate::receive::to_file::CommitPolicy::default(),
        },
        uid: asked("uid", peer.0),
        gid: asked("gid", peer.1),
        ..Default::default()
    };
    let _ = sock.set_nonblocking(false);
    // `pktfs recv` turned receive timestamps on before the stream began
    // (crate::receive::stamped), so bytes queued before this process took
    // the socket carry their arrival time; for another client's socket the
    // receive turns them on now, and records of bytes the kernel gave no
    // time say so.
    crate::receive::to_file::recv_to_file(vol, sock, path, &opts)
        .map(|r| r.to_json())
        .map_err(|e| e.to_string())
}

/// The holder sends one of its files on a passed socket.
fn send_op(vol: &Volume, sock: &TcpStream, path: &str) -> Result<Value, String> {
    let ino = match crate::transmit::to_peer::check_source(vol, path) {
        Ok(i) => i,
        Err(e) => {
            crate::transmit::to_peer::reset(sock);
            return Err(e);
        }
    };
    let _ = sock.set_nonblocking(false);
    let r = crate::transmit::to_peer::send_on(vol, ino, sock, Duration::from_secs(30))?;
    Ok(
        json!({"bytes": r.bytes, "segments": r.segments, "syscalls": r.syscalls,
              "elapsed_s": r.elapsed.as_secs_f64()}),
    )
}
