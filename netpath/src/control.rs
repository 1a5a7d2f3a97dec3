//! The local control socket: how `pktfs scrub`, `chain` and `stat` reach
//! the process that holds an image (a mount daemon or a server) instead of
//! reading a live image behind its back, and how `pktfs recv` and `send`
//! hand it a connected TCP socket so it moves the data itself.
//!
//! A process holding a Volume listens on an abstract Unix socket named
//! after the image file's device and inode (`pktfs-ctl:DEV:INO`), so any
//! client that can `stat` the image finds it, and no socket file is left
//! behind by a crash.
//!
//! # Threat model
//!
//! Abstract sockets have no file permissions: any local user can connect
//! to the name, and any local user can bind it first. So:
//!
//! - **Who is trusted**: root, the image file's owner, and the user the
//!   process itself runs as. The same rule on both ends ([`peer`]).
//! - **The holder checks its clients** by SO_PEERCRED on the accept
//!   thread, before a thread or a buffer is spent: anyone else gets one
//!   short line, sent without waiting, and is closed.
//! - **Clients check the holder** by SO_PEERCRED right after connecting,
//!   before sending anything (and before passing a socket): a listener of
//!   another user is refused with [`ControlError::Impostor`], naming its
//!   pid and uid. A squatter therefore learns only that someone connected.
//! - **A holder that cannot bind its name does not start**
//!   ([`ControlError::NameTaken`], naming the process that has it), since
//!   clients would otherwise reach that process instead.
//! - **Bounds**: at most [`MAX_CONNECTIONS`] connections are served at
//!   once (a thread each; one more is told "busy" and closed, and clients
//!   retry for a few seconds); a request is one line of at most
//!   [`MAX_REQUEST`] bytes, complete within [`REQUEST_DEADLINE`] of being
//!   accepted; at most one descriptor may be passed, and it must be a
//!   connected TCP socket (others are closed, received close-on-exec).
//!
//! A trusted client is trusted with the image (it could open the file
//! itself): the bounds keep a buggy or hostile one from exhausting the
//! holder, not from asking for what the image's owner may ask.
//!
//! The protocol is JSON lines: one request (`{"op":"stat"}`,
//! `{"op":"chain","path":"/a"}`, `{"op":"scrub","rate_bytes_per_sec":N}`,
//! `{"op":"recv_check","path":"/a","mode":"create"}`,
//! `{"op":"send_check","path":"/a"}`, and the S3 access keys' `keys_*`
//! ops: [`keys`]),
//! then zero or more `{"progress":{...}}` lines and one final line with
//! `"ok": true` and the result, or `"ok": false` and an `"error"` (and
//! `"busy": true` when the holder turned the connection away for the cap).

mod client;
mod holder;
pub mod keys;
mod peer;
mod request;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use pktfs_fs::{FileType, Volume};
use serde_json::{json, Value};

pub use client::{is_held, request, request_passing};
pub use holder::{Control, MAX_CONNECTIONS};
pub use request::{MAX_REQUEST, REQUEST_DEADLINE};

/// Why a control request failed, or a control socket did not start.
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
    /// The process listening on the image's name is not trusted with it
    /// (not root, the image's owner, or this user): nothing was sent to it.
    #[error(
        "{}: the control socket @{name} is answered by {process}, which is not root, \
         the image's owner (uid {owner}) or you (uid {me}); nothing was sent to it. \
         Another user may be squatting the name: stop that process (as root) and \
         restart the pktfs that holds the image",
        image.display()
    )]
    Impostor {
        image: PathBuf,
        name: String,
        process: String,
        owner: u32,
        me: u32,
    },
    /// A holder could not bind the image's name: another process has it.
    #[error(
        "{}: cannot listen on the control socket @{name}: it is already bound by {holder}. \
         If that is a pktfs holding this image, use it or stop it; otherwise it squats \
         the name: stop it, then start again",
        image.display()
    )]
    NameTaken {
        image: PathBuf,
        name: String,
        holder: String,
    },
    /// The holder serves [`MAX_CONNECTIONS`] control connections already,
    /// and still did after the client retried for a few seconds.
    #[error(
        "{}: the pktfs holding it is busy ({MAX_CONNECTIONS} control connections at once); \
         try again",
        .0.display()
    )]
    Busy(PathBuf),
}

/// The abstract socket name for an image file, and the file's owner.
fn locate(image: &Path) -> std::io::Result<(Vec<u8>, u32)> {
    let m = std::fs::metadata(image)?;
    Ok((
        format!("pktfs-ctl:{}:{}", m.dev(), m.ino()).into_bytes(),
        m.uid(),
    ))
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
        "clean": sb.state == pktfs_layout::superblock::STATE_CLEAN, "mount_count": sb.mount_count,
        "verify": vol.verify_mode().to_string(),
        "failed": vol.failure(),
        "read_only": vol.is_read_only(),
    })
}

/// A file's chain as JSON rows (`pktfs chain --json`).
pub fn chain_json(vol: &Volume, path: &str) -> Result<Value, String> {
    let ino = vol
        .resolve_path(path)
        .map_err(|e| format!("{path}: {e}"))?
        .ino;
    let a = vol.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == FileType::Directory {
        return Err(format!("{path}: is a directory"));
    }
    let recs = vol.chain(ino).map_err(|e| format!("{path}: {e}"))?;
    Ok(Value::Array(recs.iter().map(|r| r.to_json()).collect()))
}
