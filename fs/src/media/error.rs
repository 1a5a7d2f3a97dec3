//! What can go wrong opening, creating or persisting an image, in words a
//! person can act on.

use std::path::PathBuf;

use super::space;

#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is in use by another pktfs process (it holds the image lock); unmount it first"
    )]
    Locked { path: PathBuf },
    #[error("{path} is {len} bytes: too small to be an image")]
    TooSmall { path: PathBuf, len: u64 },
    /// Not something an image can live in (a directory, a FIFO, ...).
    #[error("{path} is {kind}: an image is a regular file (on a DAX-mounted file system for real persistent memory) or a DAX character device (/dev/daxN.M)")]
    NotAnImage { path: PathBuf, kind: &'static str },
    /// Creating (or resizing) an image: the file system lacks the room.
    #[error(
        "{path}: {} asked for but the file system holding it has only {} free; {}",
        space::human_bytes(*len_bytes),
        space::human_bytes(*free_bytes),
        size_advice(*max_len_bytes)
    )]
    NoRoom {
        path: PathBuf,
        len_bytes: u64,
        free_bytes: u64,
        /// The largest image that fits: what is free plus what the file
        /// already has allocated.
        max_len_bytes: u64,
    },
    /// A writable open of a sparse image the file system cannot complete.
    #[error(
        "{path} is sparse: {} of its {} are not allocated and the file system holding it has only {} free, so writes there would fault; free {} more there (or move the image), or open it read-only",
        space::human_bytes(*missing_bytes),
        space::human_bytes(*len_bytes),
        space::human_bytes(*free_bytes),
        space::human_bytes(missing_bytes.saturating_sub(*free_bytes))
    )]
    SparseNoRoom {
        path: PathBuf,
        len_bytes: u64,
        missing_bytes: u64,
        free_bytes: u64,
    },
    #[error(
        "{path}: {} is more than the file system holding it allows in one file",
        space::human_bytes(*len_bytes)
    )]
    TooLarge { path: PathBuf, len_bytes: u64 },
    /// `--persist clflushopt` (or another forced write-back instruction) on
    /// a CPU without it.
    #[error("persist mode {0} asked for, but this CPU has no {0} instruction (it is not among the flags in /proc/cpuinfo); use clwb, clflushopt or clflush where the CPU has it, or auto")]
    FlushUnavailable(&'static str),
}

/// What to do about [`MediaError::NoRoom`]: the largest `--size` that fits
/// (whole MiB, as mkfs.pktfs and `pktfs up` take it), if there is one.
fn size_advice(max_len_bytes: u64) -> String {
    if max_len_bytes >= 1 << 20 {
        format!(
            "choose --size at most {}M, or another place",
            max_len_bytes >> 20
        )
    } else {
        "free some space there or choose another place".to_string()
    }
}
