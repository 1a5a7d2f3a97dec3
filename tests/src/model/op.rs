//! The operations the model, a live Volume and a recovered crash image are
//! all driven by, addressed by path.

use super::*;

/// One file-system operation, by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        perm: u32,
    },
    Mkdir {
        path: String,
        perm: u32,
    },
    Mknod {
        path: String,
        kind: FileType,
        perm: u32,
        rdev: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// Write `len` pattern bytes (from `seed`) at `off`.
    Write {
        path: String,
        off: u64,
        len: u32,
        seed: u8,
    },
    Append {
        path: String,
        len: u32,
        seed: u8,
    },
    Truncate {
        path: String,
        size: u64,
    },
    Fallocate {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
        punch: bool,
    },
    CopyRange {
        src: String,
        soff: u64,
        dst: String,
        doff: u64,
        len: u64,
    },
    Link {
        src: String,
        dst: String,
    },
    Unlink {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        src: String,
        dst: String,
        noreplace: bool,
        exchange: bool,
    },
    Chmod {
        path: String,
        perm: u32,
    },
    Chown {
        path: String,
        uid: u32,
        gid: u32,
    },
    SetXattr {
        path: String,
        name: String,
        len: u32,
        seed: u8,
        create: bool,
        replace: bool,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    /// setfacl: the access ACL (or the default ACL) of `path` set to
    /// `entries` (tag, perm, id), in the kernel's xattr form.
    SetAcl {
        path: String,
        default: bool,
        entries: Vec<(u16, u16, u32)>,
    },
    /// Tier-out: every local record of `path` uploaded to the tier (the
    /// test store, `model::tier`) and switched to a remote record, its PM
    /// space freed. The content does not change.
    TierOut {
        path: String,
    },
    /// Recall: every remote record of `path` brought back into PM.
    Recall {
        path: String,
    },
    /// An upload, as the network path does it: an unnamed file (like
    /// O_TMPFILE) filled through the receive path (`rx_reserve`, the bytes
    /// stored into the reserved buffers as recv() would, a request header
    /// skipped by the first piece's offset, `rx_piece`, `rx_commit` every two
    /// pieces) in `segs` segments, then the last pieces and the name `path`
    /// in one commit (`rx_link`, replacing a non-directory when `replace`).
    Upload {
        path: String,
        len: u32,
        segs: u8,
        seed: u8,
        replace: bool,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create { path, perm } => write!(f, "create {path} {perm:o}"),
            Op::Mkdir { path, perm } => write!(f, "mkdir {path} {perm:o}"),
            Op::Mknod {
                path,
                kind,
                perm,
                rdev,
            } => write!(f, "mknod {path} {kind:?} {perm:o} rdev={rdev:#x}"),
            Op::Symlink { path, target } => write!(f, "symlink {path} -> {target}"),
            Op::Write {
                path,
                off,
                len,
                seed,
            } => write!(f, "write {path} [{off}, +{len}) seed {seed}"),
            Op::Append { path, len, seed } => write!(f, "append {path} +{len} seed {seed}"),
            Op::Truncate { path, size } => write!(f, "truncate {path} {size}"),
            Op::Fallocate {
                path,
                off,
                len,
                keep_size,
                punch,
            } => {
                write!(
                    f,
                    "fallocate {path} [{off}, +{len}) keep_size={keep_size} punch={punch}"
                )
            }
            Op::CopyRange {
                src,
                soff,
                dst,
                doff,
                len,
            } => write!(f, "copy_range {src}@{soff} -> {dst}@{doff} len {len}"),
            Op::Link { src, dst } => write!(f, "link {src} {dst}"),
            Op::Unlink { path } => write!(f, "unlink {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => {
                let fl = if *exchange {
                    " EXCHANGE"
                } else if *noreplace {
                    " NOREPLACE"
                } else {
                    ""
                };
                write!(f, "rename{fl} {src} {dst}")
            }
            Op::Chmod { path, perm } => write!(f, "chmod {path} {perm:o}"),
            Op::Chown { path, uid, gid } => write!(f, "chown {path} {uid}:{gid}"),
            Op::SetXattr {
                path,
                name,
                len,
                seed,
                create,
                replace,
            } => {
                write!(f, "setxattr {path} {name} len {len} seed {seed} create={create} replace={replace}")
            }
            Op::RemoveXattr { path, name } => write!(f, "removexattr {path} {name}"),
            Op::TierOut { path } => write!(f, "tier-out {path}"),
            Op::Recall { path } => write!(f, "recall {path}"),
            Op::SetAcl {
                path,
                default,
                entries,
            } => write!(
                f,
                "setfacl{} {path} {entries:?}",
                if *default { " -d" } else { "" }
            ),
            Op::Upload {
                path,
                len,
                segs,
                seed,
                replace,
            } => {
                write!(
                    f,
                    "upload {path} len {len} in {segs} segments seed {seed} replace={replace}"
                )
            }
        }
    }
}
