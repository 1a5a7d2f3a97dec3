//! Volume errors, and the one errno mapping the FUSE and network layers use.

use std::path::PathBuf;

use pktfs_layout::Corrupt;

use crate::media::MediaError;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("name longer than 255 bytes")]
    NameTooLong,
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    #[error("no space left on the image ({0})")]
    NoSpace(&'static str),
    #[error("no such attribute")]
    NoXattr,
    #[error("attribute value too large for the buffer")]
    Range,
    #[error("file too large")]
    TooBig,
    #[error("too many links")]
    TooManyLinks,
    #[error("operation not permitted: {0}")]
    NotPermitted(&'static str),
    /// A permission check refused (EACCES): the caller's identity lacks a
    /// mode or ACL bit ([`crate::volume::Cred`]).
    #[error("permission denied")]
    Access,
    #[error("no data or hole at or past that offset")]
    Nxio,
    #[error("the volume is open read-only")]
    ReadOnly,
    #[error("the target is not what the precondition asked for (it changed)")]
    PreconditionFailed,
    /// A name kept changing under a call that must see it settle (e.g.
    /// [`crate::Volume::lookup_pinned`]); trying again may succeed.
    #[error("{0} kept changing while it was looked at; try again")]
    Contended(&'static str),
    #[error("operation not supported: {0}")]
    NotSupported(&'static str),
    #[error(
        "inode {ino}: bytes [{start}, {end}) are damaged (they do not match the checksum \
         stored with them); the rest of the file is readable"
    )]
    Damaged { ino: u64, start: u64, end: u64 },
    #[error("tiered data could not be read back: {0}")]
    Remote(String),
    #[error("inode {ino} is damaged ({why}); run fsck.pktfs on the image")]
    DamagedInode { ino: u64, why: String },
    #[error(
        "the volume has stopped after a fault and serves nothing more ({0}); \
             unmount it; the next open recovers the image"
    )]
    Failed(String),
    #[error("{}", corrupt_advice(.0))]
    Corrupt(#[from] Corrupt),
    #[error(transparent)]
    Media(#[from] MediaError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Refused { path: PathBuf, msg: String },
}

pub type Result<T, E = FsError> = std::result::Result<T, E>;

/// What a person can do about an image that does not parse: fsck repairs
/// damage, but a file that is not an image, a truncated copy or a newer
/// format need something else first.
fn corrupt_advice(c: &Corrupt) -> String {
    match c {
        Corrupt::NotPktfs { .. } => {
            format!("{c}: check the path, or make an image there with mkfs.pktfs")
        }
        Corrupt::Truncated { expected, .. } => format!(
            "{c}: give the file its length back (truncate -s {expected} IMAGE; bytes past \
             the cut are lost) and run fsck.pktfs -y on it, or use a whole copy"
        ),
        // Each says what to do already.
        Corrupt::NewerVersion { .. }
        | Corrupt::UnknownIncompat { .. }
        | Corrupt::UnknownRoCompat { .. } => c.to_string(),
        Corrupt::At { .. } => format!("image is corrupt: {c}; run fsck.pktfs -y on it"),
    }
}

impl FsError {
    /// Does the message already name the image's path? (Callers that add
    /// the path add it only when it does not.)
    pub fn names_path(&self) -> bool {
        matches!(
            self,
            FsError::Media(_) | FsError::Io { .. } | FsError::Refused { .. }
        )
    }

    /// The errno a POSIX caller should see.
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => libc::ENOENT,
            FsError::Exists => libc::EEXIST,
            FsError::NotDir => libc::ENOTDIR,
            FsError::IsDir => libc::EISDIR,
            FsError::NotEmpty => libc::ENOTEMPTY,
            FsError::NameTooLong => libc::ENAMETOOLONG,
            FsError::Invalid(_) => libc::EINVAL,
            FsError::NoSpace(_) => libc::ENOSPC,
            FsError::NoXattr => libc::ENODATA,
            FsError::Range => libc::ERANGE,
            FsError::TooBig => libc::EFBIG,
            FsError::TooManyLinks => libc::EMLINK,
            FsError::ReadOnly => libc::EROFS,
            FsError::NotPermitted(_) => libc::EPERM,
            FsError::Access => libc::EACCES,
            FsError::Nxio => libc::ENXIO,
            FsError::NotSupported(_) => libc::EOPNOTSUPP,
            // Only callers that pass a precondition see it (netpath's 412);
            // no POSIX call does.
            FsError::PreconditionFailed => libc::EAGAIN,
            FsError::Contended(_) => libc::EAGAIN,
            FsError::Corrupt(_)
            | FsError::Damaged { .. }
            | FsError::Remote(_)
            | FsError::DamagedInode { .. }
            | FsError::Failed(_) => libc::EIO,
            FsError::Media(_) | FsError::Io { .. } | FsError::Refused { .. } => libc::EIO,
        }
    }
}
