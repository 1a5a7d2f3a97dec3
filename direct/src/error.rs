//! What can go wrong reading an image directly, as errors a person can
//! act on, each with the errno the C ABI and the preload shim report.

use std::path::PathBuf;

/// A direct reader's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or mapping the image file failed (EACCES: this user may not
    /// read the image, which is the boundary: see docs/DIRECT.md).
    #[error("{}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not a pktfs image this build can read.
    #[error("{}: {why}", path.display())]
    NotAnImage { path: PathBuf, why: String },
    /// The image was last written by a pktfs that does not keep the live
    /// words direct readers rely on.
    #[error(
        "{}: the image was last written by a pktfs without direct-reader support; \
         mount or serve it once with this build",
        path.display()
    )]
    NoLiveWords { path: PathBuf },
    #[error("{0}: no such file or directory")]
    NotFound(String),
    #[error("{0}: not a directory")]
    NotDir(String),
    #[error("{0}: is a directory")]
    IsDir(String),
    #[error("{0}: not a regular file")]
    NotRegular(String),
    #[error("{0}: too many levels of symbolic links")]
    Loop(String),
    /// A symlink whose target is absolute names a path outside the image.
    #[error("{path}: the symlink points to the absolute path {target}, outside the image")]
    AbsoluteSymlink { path: String, target: String },
    #[error("{0}: invalid path")]
    InvalidPath(String),
    /// Bytes whose checksum does not match, or a record fsck marked
    /// damaged: never returned as data (the mount answers EIO too).
    #[error("inode {ino}: damaged data at bytes [{start}, {end}): {why}")]
    Damaged {
        ino: u64,
        start: u64,
        end: u64,
        why: String,
    },
    /// A structure that fails its checks in a consistent view (not a
    /// change in flight): the holder reports the same inode damaged.
    #[error("inode {ino}: {why}; run fsck.pktfs on the image")]
    Corrupt { ino: u64, why: String },
    /// The range lies in the tier (an S3-compatible store): only the
    /// holder can fetch it, and there is none to ask.
    #[error(
        "inode {ino}: bytes [{start}, {end}) are tiered out; no pktfs holds the image to \
         fetch them (mount or serve it, or `pktfs tier recall`)"
    )]
    Remote { ino: u64, start: u64, end: u64 },
    /// The inode number a handle holds names another file now (the file
    /// was deleted, or the holder restarted and the name was gone).
    #[error("inode {0}: the file this handle was opened on no longer exists")]
    Stale(u64),
    /// The file changed under every attempt to read it; the holder (or a
    /// later retry) can still serve it.
    #[error("inode {0}: the file changed during every attempt to read it; try again")]
    Busy(u64),
    /// An image writer that does not keep the counters (fsck -y, recovery)
    /// is at work, or one died in the middle.
    #[error("the image is being repaired or recovered (its epoch is odd); try again later")]
    Repairing,
    /// A zero-copy read asked for more than one lend may cover.
    #[error("a zero-copy read covers at most {max} bytes; {len} asked (read in parts)")]
    TooLong { len: u64, max: u64 },
    /// The holder was asked and refused, or could not be reached.
    #[error("the pktfs holding the image: {0}")]
    Holder(String),
}

impl Error {
    /// The errno for this error (the C ABI and the shim set it).
    pub fn errno(&self) -> i32 {
        match self {
            Error::Open { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::NotAnImage { .. } | Error::NoLiveWords { .. } => libc::EINVAL,
            Error::NotFound(_) => libc::ENOENT,
            Error::NotDir(_) => libc::ENOTDIR,
            Error::IsDir(_) => libc::EISDIR,
            Error::NotRegular(_) => libc::EINVAL,
            Error::Loop(_) => libc::ELOOP,
            Error::AbsoluteSymlink { .. } => libc::EXDEV,
            Error::InvalidPath(_) => libc::EINVAL,
            Error::Damaged { .. } | Error::Corrupt { .. } => libc::EIO,
            Error::Remote { .. } => libc::EREMOTE,
            Error::Stale(_) => libc::ESTALE,
            Error::Busy(_) | Error::Repairing => libc::EAGAIN,
            Error::Holder(_) => libc::EIO,
            Error::TooLong { .. } => libc::EINVAL,
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::new(std::io::Error::from_raw_os_error(e.errno()).kind(), e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;
