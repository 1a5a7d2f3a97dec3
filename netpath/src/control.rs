//! The local control socket: how `pktfs scrub`, `chain` and `stat` reach
//! the process that holds an image (a mount daemon or a server) instead of
//! reading a live image behind its back.
//!
//! A process holding a Volume listens on an abstract Unix socket named
//! after the image file's device and inode (`pktfs-ctl:DEV:INO`), so any
//! client that can `stat` the image finds it, and no socket file is left
//! behind by a crash. Abstract sockets have no file permissions, so every
//! connection is checked by its peer credentials (SO_PEERCRED): root, the
//! image file's owner, or the holder's own user may ask; anyone else is
//! refused with a message.
//!
//! The protocol is JSON lines: one request (`{"op":"stat"}`,
//! `{"op":"chain","path":"/a"}`, `{"op":"scrub","rate_bytes_per_sec":N}`,
//! `{"op":"recv_check","path":"/a","mode":"create"}`,
//! `{"op":"send_check","path":"/a"}`),
//! then zero or more `{"progress":{...}}` lines and one final line with
//! `"ok": true` and the result, or `"ok": false` and an `"error"`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use pktfs::{FileType, FsError, ScrubOptions, Volume};
use serde_json::{json, Value};

/// Why a control request failed.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No process serves this image (it is not mounted or served).
    #[error("no pktfs process holds {0}")]
    NotServed(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The holder answered with an error.
    #[error("{0}")]
    Refused(String),
}

/// The abstract socket name for an image file.
fn name_for(image: &Path) -> std::io::Result<Vec<u8>> {
    let m = std::fs::metadata(image)?;
    Ok(format!("pktfs-ctl:{}:{}", m.dev(), m.ino()).into_bytes())
}

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
    pub fn start(vol: Arc<Volume>, image: &Path) -> std::io::Result<Control> {
        Self::start_with(vol, image, None)
    }

    /// [`Control::start`], with more facts for `pktfs stat` (the tier
    /// engine's counters, under `"tier"`).
    pub fn start_with(
        vol: Arc<Volume>,
        image: &Path,
        extra: Option<crate::config::Extra>,
    ) -> std::io::Result<Control> {
        let addr = SocketAddr::from_abstract_name(name_for(image)?)?;
        let l = UnixListener::bind_addr(&addr)?;
        l.set_nonblocking(true)?;
        let owner = std::fs::metadata(image)?.uid();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pktfs-control".into())
            .spawn(move || accept_loop(vol, l, owner, st, extra))?;
        Ok(Control {
            stop,
            thread: Some(thread),
        })
    }
}

fn accept_loop(
    vol: Arc<Volume>,
    l: UnixListener,
    owner: u32,
    stop: Arc<AtomicBool>,
    extra: Option<crate::config::Extra>,
) {
    let me = rustix::process::getuid().as_raw();
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                let vol = vol.clone();
                let extra = extra.clone();
                let _ = std::thread::Builder::new()
                    .name("pktfs-control-conn".into())
                    .spawn(move || serve(&vol, s, owner, me, extra.as_ref()));
            }
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
                tracing::warn!("control socket: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn send(s: &mut UnixStream, v: &Value) -> bool {
    let mut line = v.to_string();
    line.push('\n');
    s.write_all(line.as_bytes()).is_ok()
}

fn serve(vol: &Volume, s: UnixStream, owner: u32, me: u32, extra: Option<&crate::config::Extra>) {
    let _ = s.set_nonblocking(false);
    let Ok(mut out) = s.try_clone() else { return };
    let (uid, gid) = match rustix::net::sockopt::socket_peercred(&s) {
        Ok(c) => (c.uid.as_raw(), c.gid.as_raw()),
        Err(_) => return,
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let (line, passed) = match read_request(&s) {
        Ok((l, _)) if l.is_empty() => return, // a probe (`is_held`)
        Ok(x) => x,
        Err(e) => {
            send(
                &mut out,
                &json!({"ok": false, "error": format!("reading the request: {e}")}),
            );
            return;
        }
    };
    // The request is read before a refusal is sent, so a refused client
    // gets its answer instead of a broken pipe; a socket it passed is
    // dropped unused.
    if uid != 0 && uid != owner && uid != me {
        send(
            &mut out,
            &json!({"ok": false, "error": format!(
                "user {uid} may not control this image (only root, its owner {owner}, or user {me})"
            )}),
        );
        return;
    }
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
            let mut last = std::time::Instant::now();
            let mut gone = false;
            vol.scrub(&opts, &mut |p| {
                if last.elapsed() >= Duration::from_millis(100) {
                    last = std::time::Instant::now();
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
            Some(p) => recv_mode(&req).and_then(|m| {
                crate::recv::check_target(vol, p, m)
                    .map(|()| json!({}))
                    .map_err(|e| e.to_string())
            }),
            None => Err("recv_check needs a \"path\"".into()),
        },
        Some("recv") => match (passed, req["path"].as_str()) {
            (Some(sock), Some(p)) => recv_op(vol, &sock, p, &req, (uid, gid)),
            (None, _) => Err("recv needs the connected socket passed with the request".into()),
            (_, None) => Err("recv needs a \"path\"".into()),
        },
        Some("send_check") => match req["path"].as_str() {
            Some(p) => crate::send::check_source(vol, p).map(|_| json!({})),
            None => Err("send_check needs a \"path\"".into()),
        },
        Some("send") => match (passed, req["path"].as_str()) {
            (Some(sock), Some(p)) => send_op(vol, &sock, p),
            (None, _) => Err("send needs the connected socket passed with the request".into()),
            (_, None) => Err("send needs a \"path\"".into()),
        },
        _ => Err(format!("unknown op in {}", line.trim())),
    };
    let v = match r {
        Ok(v) => json!({"ok": true, "result": v}),
        Err(e) => json!({"ok": false, "error": e}),
    };
    send(&mut out, &v);
}

/// Most bytes a request line may have.
const MAX_REQUEST: usize = 64 << 10;

/// Read one request line, and the TCP socket the client may have passed
/// with it (SCM_RIGHTS on the first message).
fn read_request(s: &UnixStream) -> std::io::Result<(String, Option<TcpStream>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::mem::MaybeUninit;
    let mut buf = Vec::new();
    let mut passed: Option<TcpStream> = None;
    let mut chunk = [0u8; 4096];
    while !buf.contains(&b'\n') {
        if buf.len() > MAX_REQUEST {
            return Err(std::io::Error::other("request line too long"));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let r = rustix::net::recvmsg(
            s,
            &mut [std::io::IoSliceMut::new(&mut chunk)],
            &mut cmsg,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        for m in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = m {
                for fd in fds {
                    // Only the first passed descriptor is used; more are
                    // closed as they drop.
                    if passed.is_none() {
                        passed = Some(TcpStream::from(fd));
                    }
                }
            }
        }
        if r.bytes == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..r.bytes]);
    }
    let line =
        String::from_utf8(buf).map_err(|_| std::io::Error::other("the request is not UTF-8"))?;
    Ok((line, passed))
}

/// The holder receives a stream into one of its files.
/// `peer`: the client's user and group (SO_PEERCRED); the file is theirs,
/// whatever the request says, unless the client is root.
/// A request's receive mode (`create` when it names none).
fn recv_mode(req: &Value) -> Result<crate::recv::RecvMode, String> {
    match req["mode"].as_str().unwrap_or("create") {
        "create" => Ok(crate::recv::RecvMode::CreateOnly),
        "append" => Ok(crate::recv::RecvMode::Append),
        "replace" => Ok(crate::recv::RecvMode::ReplaceAtEnd),
        m => Err(format!(
            "unknown receive mode {m:?} (create, append, replace)"
        )),
    }
}

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
    let opts = crate::recv::RecvOptions {
        mode: recv_mode(req)?,
        commit: match (req["commit"].as_str(), req["commit_bytes"].as_u64()) {
            (Some("chunk"), _) => crate::recv::CommitPolicy::EveryChunk,
            (Some("end"), _) => crate::recv::CommitPolicy::AtEnd,
            (_, Some(n)) => crate::recv::CommitPolicy::EveryBytes(n.max(1)),
            _ => crate::recv::CommitPolicy::default(),
        },
        uid: asked("uid", peer.0),
        gid: asked("gid", peer.1),
        ..Default::default()
    };
    let _ = sock.set_nonblocking(false);
    crate::recv::recv_to_file(vol, sock, path, &opts)
        .map(|r| r.to_json())
        .map_err(|e| e.to_string())
}

/// The holder sends one of its files on a passed socket.
fn send_op(vol: &Volume, sock: &TcpStream, path: &str) -> Result<Value, String> {
    let ino = match crate::send::check_source(vol, path) {
        Ok(i) => i,
        Err(e) => {
            crate::send::reset(sock);
            return Err(e);
        }
    };
    let _ = sock.set_nonblocking(false);
    let r = crate::send::send_on(vol, ino, sock, Duration::from_secs(30))?;
    Ok(
        json!({"bytes": r.bytes, "segments": r.segments, "syscalls": r.syscalls,
              "elapsed_s": r.elapsed.as_secs_f64()}),
    )
}

/// `pktfs stat`'s facts, from a Volume.
pub fn stat_json(vol: &Volume) -> Value {
    let sb = vol.superblock();
    let g = vol.geometry();
    let s = vol.statfs();
    let remote = vol.remote_objects();
    json!({
        "remote_objects": remote.len(), "remote_bytes": remote.values().map(|o| o.bytes).sum::<u64>(),
        "image_bytes": g.image_len_bytes, "buffer_size": g.buffer_size_bytes,
        "buffers": g.buffer_count, "buffers_free": s.blocks_free,
        "inodes": g.inode_count, "inodes_free": s.files_free,
        "records": g.record_count, "records_free": s.records_free,
        "clean": sb.state == layout::superblock::STATE_CLEAN, "mount_count": sb.mount_count,
        "verify": vol.verify_mode().to_string(),
        "failed": vol.failure(),
        "read_only": vol.is_read_only(),
    })
}

/// Resolve `/a/b` from the root.
pub fn resolve(vol: &Volume, path: &str) -> Result<u64, FsError> {
    let mut ino = vol.root();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        ino = vol.lookup(ino, part.as_bytes())?.ino;
    }
    Ok(ino)
}

/// A file's chain as JSON rows (`pktfs chain --json`).
pub fn chain_json(vol: &Volume, path: &str) -> Result<Value, String> {
    let ino = resolve(vol, path).map_err(|e| format!("{path}: {e}"))?;
    let a = vol.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == FileType::Directory {
        return Err(format!("{path}: is a directory"));
    }
    let recs = vol.chain(ino).map_err(|e| format!("{path}: {e}"))?;
    Ok(Value::Array(recs.iter().map(|r| r.to_json()).collect()))
}

/// Does a process answer for `image` on its control socket? (A probe: the
/// holder sees a connection without a request and drops it.)
pub fn is_held(image: &Path) -> bool {
    name_for(image)
        .and_then(SocketAddr::from_abstract_name)
        .and_then(|a| UnixStream::connect_addr(&a))
        .is_ok()
}

/// Ask the process holding `image`. `on_progress` sees each progress line.
/// [`ControlError::NotServed`] when nothing holds it.
pub fn request(
    image: &Path,
    req: &Value,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Value, ControlError> {
    request_passing(image, req, None, on_progress)
}

/// [`request`], passing the connected TCP socket `pass` to the holder with
/// the request (SCM_RIGHTS), so the process that owns the Volume moves the
/// data itself: the data path stays one copy.
pub fn request_passing(
    image: &Path,
    req: &Value,
    pass: Option<&TcpStream>,
    on_progress: &mut dyn FnMut(&Value),
) -> Result<Value, ControlError> {
    let io = |source| ControlError::Io {
        path: image.to_path_buf(),
        source,
    };
    let addr = SocketAddr::from_abstract_name(name_for(image).map_err(io)?).map_err(io)?;
    let mut s = match UnixStream::connect_addr(&addr) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(ControlError::NotServed(image.to_path_buf()))
        }
        Err(e) => return Err(io(e)),
    };
    let mut line = req.to_string();
    line.push('\n');
    match pass {
        None => s.write_all(line.as_bytes()).map_err(io)?,
        Some(sock) => {
            use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
            use std::os::fd::AsFd;
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut cmsg = SendAncillaryBuffer::new(&mut space);
            let fds = [sock.as_fd()];
            cmsg.push(SendAncillaryMessage::ScmRights(&fds));
            let n = rustix::net::sendmsg(
                &s,
                &[std::io::IoSlice::new(line.as_bytes())],
                &mut cmsg,
                SendFlags::empty(),
            )
            .map_err(|e| io(e.into()))?;
            s.write_all(&line.as_bytes()[n..]).map_err(io)?;
        }
    }
    for l in BufReader::new(&s).lines() {
        let l = l.map_err(io)?;
        let v: Value = serde_json::from_str(&l)
            .map_err(|e| ControlError::Refused(format!("bad answer from the holder: {e}")))?;
        if let Some(p) = v.get("progress") {
            on_progress(p);
            continue;
        }
        return if v["ok"].as_bool() == Some(true) {
            Ok(v["result"].clone())
        } else {
            Err(ControlError::Refused(
                v["error"].as_str().unwrap_or("refused").to_string(),
            ))
        };
    }
    Err(ControlError::Refused(
        "the holder closed the control connection without an answer".into(),
    ))
}
