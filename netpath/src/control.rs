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
//! `{"op":"chain","path":"/a"}`, `{"op":"scrub","rate_bytes_per_sec":N}`),
//! then zero or more `{"progress":{...}}` lines and one final line with
//! `"ok": true` and the result, or `"ok": false` and an `"error"`.

use std::io::{BufRead, BufReader, Write};
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
        let addr = SocketAddr::from_abstract_name(name_for(image)?)?;
        let l = UnixListener::bind_addr(&addr)?;
        l.set_nonblocking(true)?;
        let owner = std::fs::metadata(image)?.uid();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pktfs-control".into())
            .spawn(move || accept_loop(vol, l, owner, st))?;
        Ok(Control {
            stop,
            thread: Some(thread),
        })
    }
}

fn accept_loop(vol: Arc<Volume>, l: UnixListener, owner: u32, stop: Arc<AtomicBool>) {
    let me = rustix::process::getuid().as_raw();
    while !stop.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((s, _)) => {
                let vol = vol.clone();
                let _ = std::thread::Builder::new()
                    .name("pktfs-control-conn".into())
                    .spawn(move || serve(&vol, s, owner, me));
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

fn serve(vol: &Volume, s: UnixStream, owner: u32, me: u32) {
    let _ = s.set_nonblocking(false);
    let Ok(mut out) = s.try_clone() else { return };
    let uid = match rustix::net::sockopt::socket_peercred(&s) {
        Ok(c) => c.uid.as_raw(),
        Err(_) => return,
    };
    if uid != 0 && uid != owner && uid != me {
        send(
            &mut out,
            &json!({"ok": false, "error": format!(
                "user {uid} may not control this image (only root, its owner {owner}, or user {me})"
            )}),
        );
        return;
    }
    let mut line = String::new();
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if BufReader::new(&s).read_line(&mut line).is_err() {
        return;
    }
    let req: Value = match serde_json::from_str(&line) {
        Ok(v) => v,
        Err(e) => {
            send(&mut out, &json!({"ok": false, "error": format!("bad request: {e}")}));
            return;
        }
    };
    let r = match req["op"].as_str() {
        Some("stat") => Ok(stat_json(vol)),
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
        _ => Err(format!("unknown op in {}", line.trim())),
    };
    let v = match r {
        Ok(v) => json!({"ok": true, "result": v}),
        Err(e) => json!({"ok": false, "error": e}),
    };
    send(&mut out, &v);
}

/// `pktfs stat`'s facts, from a Volume.
pub fn stat_json(vol: &Volume) -> Value {
    let sb = vol.superblock();
    let g = vol.geometry();
    let s = vol.statfs();
    json!({
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

/// Ask the process holding `image`. `on_progress` sees each progress line.
/// [`ControlError::NotServed`] when nothing holds it.
pub fn request(
    image: &Path,
    req: &Value,
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
    s.write_all(line.as_bytes()).map_err(io)?;
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
