//! The local control socket's shared half: how a client finds the process
//! that holds an image (a mount daemon or a server), checks that it is one
//! it may trust, and asks it; and the trust rule both ends apply. The
//! holder's side (listening, serving the requests) is pktfs-netpath's
//! `control`; docs/SECURITY.md has the threat model.
//!
//! A process holding an image listens on an abstract Unix socket named
//! after the image file's device and inode (`pktfs-ctl:DEV:INO`), so any
//! client that can `stat` the image finds it, and no socket file is left
//! behind by a crash. The protocol is JSON lines: one request, zero or
//! more `{"progress":{...}}` lines, one final line with `"ok"`.

mod client;
pub mod peer;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use client::{is_held, open_session, request, request_passing, Session};

/// Most control connections a holder serves at once. Each has a thread;
/// one more is answered "busy" on the accept thread and closed. Control
/// requests are rare (a person running `pktfs stat`, a `recv` or `send`
/// handing over a stream), so a handful is plenty, and it bounds what even
/// a trusted client can make the holder spend.
pub const MAX_CONNECTIONS: usize = 8;

/// Most bytes a request line may have, newline included. Requests are
/// small JSON objects (an op, a path inside the image, a few numbers);
/// a path is at most 4 KiB on Linux, so this is room for any real one.
pub const MAX_REQUEST: usize = 4 << 10;

/// How long a client has to send its whole request line, from the moment
/// it is accepted: a deadline for the line, not a timeout per read, so a
/// client trickling a byte at a time cannot hold one of the
/// [`MAX_CONNECTIONS`] slots for longer than this.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

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
    /// The holder answered that the file asked about is not there any
    /// more (deleted, or its inode number names another file now).
    #[error("{0}")]
    Stale(String),
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
pub fn locate(image: &Path) -> std::io::Result<(Vec<u8>, u32)> {
    let m = std::fs::metadata(image)?;
    Ok((
        format!("pktfs-ctl:{}:{}", m.dev(), m.ino()).into_bytes(),
        m.uid(),
    ))
}
