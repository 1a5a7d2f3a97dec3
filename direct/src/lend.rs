//! Zero-copy reads: the image's bytes lent to the program's closure as
//! `&[u8]` (`File::read_with`). A slice of the mapping may exist only
//! while nothing can write those bytes, which this module makes so, one
//! of two ways:
//! - **no writer**: the image file's shared lock (the one a read-only open
//!   takes) is held for the closure, so no holder can start meanwhile and
//!   none is running (it would hold the exclusive lock);
//! - **a holder**: the holder holds the range for this reader (`holder`):
//!   the buffers it names are not reused while the hold lives.

#![allow(unsafe_code)]

use crate::error::{Error, Result};
use crate::holder::{Held, HeldSeg};
use crate::map::Mapping;
use crate::shared::Shared;

/// A piece of a range lent to a closure: bytes, or a hole of zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg<'a> {
    Data(&'a [u8]),
    Zero(usize),
}

/// The image file's shared lock, held for a lend while it lives.
pub(crate) struct NoWriter<'a> {
    shared: &'a Shared,
}

impl Drop for NoWriter<'_> {
    fn drop(&mut self) {
        let mut n = self.shared.lends.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            if let Some(f) = &self.shared.file {
                let _ = rustix::fs::flock(f, rustix::fs::FlockOperation::Unlock);
            }
        }
    }
}

impl Shared {
    /// The shared lock, if no writer holds the image now (None: one does,
    /// ask it). A snapshot has no writer.
    pub(crate) fn no_writer(&self) -> Option<NoWriter<'_>> {
        let mut n = self.lends.lock().unwrap_or_else(|p| p.into_inner());
        if *n == 0 {
            if let Some(f) = &self.file {
                let op = rustix::fs::FlockOperation::NonBlockingLockShared;
                rustix::fs::flock(f, op).ok()?;
            }
        }
        *n += 1;
        Some(NoWriter { shared: self })
    }
}

/// The mapping's `[pos, pos+len)` while `_no_writer` holds the lock.
pub(crate) fn unwritten<'a>(
    map: &'a Mapping,
    _no_writer: &'a NoWriter<'_>,
    pos: u64,
    len: u64,
) -> Result<&'a [u8]> {
    let n = usize::try_from(len).map_err(|_| too_long())?;
    if !map.contains(pos, len) {
        return Err(Error::Holder("a range outside the image".into()));
    }
    // SAFETY: inside the mapping (checked), and no process can write the
    // image while the shared lock `_no_writer` holds is held (a writer
    // holds the exclusive lock for as long as it maps the image), which
    // is at least as long as the returned slice lives.
    Ok(unsafe { map.slice(pos, n) })
}

/// The pieces of a held range, lent from the mapping and the fetched bytes.
pub(crate) fn held<'a>(map: &'a Mapping, h: &'a Held) -> Result<Vec<Seg<'a>>> {
    let mut out = Vec::with_capacity(h.segs.len());
    for s in &h.segs {
        out.push(match *s {
            HeldSeg::Image { pos, len } => {
                let n = usize::try_from(len).map_err(|_| too_long())?;
                if !map.contains(pos, len) {
                    return Err(Error::Holder(
                        "the holder named bytes outside the image".into(),
                    ));
                }
                // SAFETY: inside the mapping (checked); the holder holds
                // these buffers for as long as `h` lives (its connection is
                // open), so nothing writes them while the slice, which
                // borrows `h`, lives.
                Seg::Data(unsafe { map.slice(pos, n) })
            }
            HeldSeg::Fetched { at, len } => {
                let end = at
                    .checked_add(len as usize)
                    .filter(|&e| e <= h.fetched.len());
                let end = end.ok_or_else(|| Error::Holder("fetched bytes out of range".into()))?;
                Seg::Data(&h.fetched[at..end])
            }
            HeldSeg::Zero { len } => Seg::Zero(usize::try_from(len).map_err(|_| too_long())?),
        });
    }
    Ok(out)
}

fn too_long() -> Error {
    Error::Holder("a range longer than this machine's address space".into())
}
