//! Translation between FUSE's values and the Volume's: errors to errnos,
//! times, attributes, names, xattr replies, and what FUSE does not send
//! about the caller (its groups and capabilities, read from /proc).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, INodeNo, ReplyXattr, Request, TimeOrNow};

use pktfs_fs::FileType;
use pktfs_fs::FsError;
use pktfs_fs::{Attr, TimeSet};
pub(super) fn err(e: &FsError) -> Errno {
    // A request that fails for a reason other than its answer (ENOENT,
    // EEXIST, ...) is logged with its cause; damaged data is logged by the
    // Volume where it is found, once, not at every read of it.
    match e {
        FsError::Corrupt(_)
        | FsError::Failed(_)
        | FsError::Media(_)
        | FsError::Io { .. }
        | FsError::Refused { .. } => tracing::warn!("a FUSE request failed (EIO): {e}"),
        _ => {}
    }
    Errno::from_i32(e.errno())
}

pub(super) fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_nanos(ns.unsigned_abs()))
            .unwrap_or(UNIX_EPOCH)
    }
}

pub(super) fn time_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_nanos())
            .map(|n| -n)
            .unwrap_or(i64::MIN),
    }
}

pub(super) fn time_set(t: TimeOrNow) -> TimeSet {
    match t {
        TimeOrNow::Now => TimeSet::Now,
        TimeOrNow::SpecificTime(t) => TimeSet::Ns(time_ns(t)),
    }
}

pub(crate) fn kind(k: FileType) -> fuser::FileType {
    match k {
        FileType::Regular => fuser::FileType::RegularFile,
        FileType::Directory => fuser::FileType::Directory,
        FileType::Symlink => fuser::FileType::Symlink,
        FileType::Fifo => fuser::FileType::NamedPipe,
        FileType::Socket => fuser::FileType::Socket,
        FileType::CharDevice => fuser::FileType::CharDevice,
        FileType::BlockDevice => fuser::FileType::BlockDevice,
    }
}

pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: time(a.atime_ns),
        mtime: time(a.mtime_ns),
        ctime: time(a.ctime_ns),
        crtime: time(a.ctime_ns),
        kind: kind(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

/// A line of /proc/PID/status of the process behind `req` (FUSE sends
/// only its pid, uid and gid).
pub(super) fn status_line(req: &Request, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", req.pid())).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// Whether the process behind `req` is in group `gid`: its fsgid or one of
/// its supplementary groups, read from /proc. When that fails (the process
/// is gone) the answer is no, which clears a setgid bit rather than keeps
/// one it should not.
pub(super) fn in_group(req: &Request, gid: u32) -> bool {
    req.gid() == gid
        || status_line(req, "Groups:")
            .is_some_and(|g| g.split_whitespace().any(|x| x.parse() == Ok(gid)))
}

/// Whether the process behind `req` has CAP_FSETID in effect (from /proc;
/// if that fails, whether it is root).
pub(super) fn has_cap_fsetid(req: &Request) -> bool {
    const CAP_FSETID: u32 = 4;
    match status_line(req, "CapEff:").and_then(|c| u64::from_str_radix(&c, 16).ok()) {
        Some(caps) => caps & (1 << CAP_FSETID) != 0,
        None => req.uid() == 0,
    }
}

pub(super) fn name_bytes(n: &OsStr) -> &[u8] {
    n.as_bytes()
}

/// Reply to getxattr/listxattr: the size probe, the value, or ERANGE.
pub(super) fn xattr_reply(reply: ReplyXattr, size: u32, v: &[u8]) {
    if size == 0 {
        match u32::try_from(v.len()) {
            Ok(n) => reply.size(n),
            Err(_) => reply.error(Errno::from_i32(libc::E2BIG)),
        }
    } else if v.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE))
    } else {
        reply.data(v)
    }
}
