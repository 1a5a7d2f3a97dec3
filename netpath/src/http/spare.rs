//! Unnamed files made ahead of a connection's next upload.
//!
//! Creating the unnamed file an upload lands in is Volume work (an inode,
//! its slot) that would otherwise sit between a request's arrival and its
//! answer. After a PUT's answer is out, a keep-alive connection makes the
//! file for its next PUT instead, off the client's wait.
//!
//! Each spare holds an inode until it is used or its connection ends, so
//! the number held server-wide is capped ([`MAX_SPARES`]): with thousands
//! of connections only the first few hundred keep one, the others create
//! the file when the request comes, as without spares. Nor are spares made
//! while fewer than [`SPARE_MIN_FREE_INODES`] inodes are free: on a small
//! or nearly full image idle connections must not hold the inodes other
//! uploads need. A crash loses nothing: an unnamed file is gone after the
//! next open.

use std::sync::atomic::{AtomicUsize, Ordering};

use pktfs_fs::TmpFile;

use crate::shared::Shared;

/// Spares held by all connections of a server at most.
pub const MAX_SPARES: usize = 256;
/// No spare is made while fewer inodes than this are free.
pub const SPARE_MIN_FREE_INODES: u64 = 2 * MAX_SPARES as u64;

/// An unnamed file made ahead, counted in the server's spares while held;
/// dropped unused, the file is freed.
pub(super) struct Spare<'a> {
    tmp: Option<TmpFile<'a>>,
    held: &'a AtomicUsize,
}

impl<'a> Spare<'a> {
    /// A spare, unless the server is read-only, `MAX_SPARES` are held,
    /// inodes are scarce, or the Volume cannot make the file now (then the
    /// next PUT makes it and answers the error).
    pub(super) fn make(sh: &'a Shared) -> Option<Spare<'a>> {
        if sh.read_only() || sh.vol.statfs().files_free < SPARE_MIN_FREE_INODES {
            return None;
        }
        // Count first, so concurrent connections cannot overshoot the cap.
        if sh.spares.fetch_add(1, Ordering::AcqRel) >= MAX_SPARES {
            sh.spares.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let held = &sh.spares;
        match sh.vol.tmpfile(0o644, sh.uid, sh.gid) {
            Ok(t) => Some(Spare { tmp: Some(t), held }),
            Err(e) => {
                held.fetch_sub(1, Ordering::AcqRel);
                tracing::debug!("making an unnamed file ahead of the next upload: {e}");
                None
            }
        }
    }

    /// The file, for an upload (no longer counted as a spare).
    pub(super) fn take(mut self) -> TmpFile<'a> {
        self.tmp.take().expect("a spare holds its file until taken")
    }
}

impl Drop for Spare<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}
