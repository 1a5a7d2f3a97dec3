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

pub mod direct;
mod holder;
pub mod keys;
mod request;

use pktfs_fs::{FileType, Volume};
use serde_json::{json, Value};

pub use holder::Control;
pub use pktfs_control::{
    is_held, locate, peer, request, request_passing, ControlError, MAX_CONNECTIONS, MAX_REQUEST,
    REQUEST_DEADLINE,
};

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
