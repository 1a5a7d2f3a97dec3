//! Through the holder: what a direct reader cannot do from the mapping
//! alone (docs/DIRECT.md, "Through the holder").
//!
//! The reader asks the process holding the image, over its control socket
//! (`pktfs-control`; the holder's side is pktfs-netpath's
//! `control::direct`), for a hold on a range of a file: the holder pins the
//! range's buffers (its transmit hold, as an HTTP GET takes) and answers
//! with where the bytes are in the image, and the bytes of tiered records
//! fetched and checked. While the connection is open nothing reuses those
//! buffers, so their bytes may be lent to the program as `&[u8]`; the
//! hold ends when the reader closes the connection, or dies.

use std::path::Path;

use serde_json::json;

/// Most bytes one hold covers (the holder's bound too).
pub const MAX_HOLD_BYTES: u64 = 64 << 20;

/// One piece of a held range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldSeg {
    /// `len` bytes at image offset `pos`, pinned by the holder.
    Image { pos: u64, len: u64 },
    /// `len` bytes of the fetched bytes, from `at`.
    Fetched { at: usize, len: u64 },
    /// `len` zero bytes (a hole).
    Zero { len: u64 },
}

/// A range held by the holder for this reader; the hold ends when this
/// drops (its connection closes).
#[derive(Debug)]
pub(crate) struct Held {
    _session: pktfs_control::Session,
    pub segs: Vec<HeldSeg>,
    pub fetched: Vec<u8>,
}

/// Why the holder could not be used.
#[derive(Debug)]
pub(crate) enum NoHold {
    /// No process holds the image.
    NoHolder,
    /// The holder says the file is not there any more.
    Stale,
    /// It did not serve the request (why).
    Refused(String),
}

/// Ask the holder of `image` to hold `[off, off+len)` of inode `ino` (the
/// incarnation `birth`). `buffers`: the buffer region's `[start, end)` in
/// the image; every image segment the holder names must lie inside it.
pub(crate) fn hold(
    image: &Path,
    (ino, birth): (u32, u64),
    (off, len): (u64, u64),
    buffers: (u64, u64),
) -> std::result::Result<Held, NoHold> {
    let req = json!({"op": "direct_hold", "ino": ino, "birth": birth, "off": off, "len": len});
    let (v, mut session) = match pktfs_control::open_session(image, &req, None) {
        Ok(x) => x,
        // Nothing listens on the image's name, or the image file cannot be
        // named at all (a snapshot, a removed path): no holder to ask.
        Err(pktfs_control::ControlError::NotServed(_) | pktfs_control::ControlError::Io { .. }) => {
            return Err(NoHold::NoHolder)
        }
        Err(pktfs_control::ControlError::Stale(_)) => return Err(NoHold::Stale),
        Err(e) => return Err(NoHold::Refused(e.to_string())),
    };
    let bad = |why: &str| NoHold::Refused(format!("the holder's answer makes no sense: {why}"));
    let mut segs = Vec::new();
    let mut fetched_len = 0usize;
    let mut total = 0u64;
    for s in v["segs"].as_array().ok_or_else(|| bad("no segments"))? {
        let kind = s[0].as_str().unwrap_or("");
        let (a, b) = (s[1].as_u64(), s[2].as_u64());
        let seg = match (kind, a, b) {
            ("i", Some(pos), Some(len)) => {
                let inside =
                    pos >= buffers.0 && pos.checked_add(len).is_some_and(|e| e <= buffers.1);
                if !inside {
                    return Err(bad("a segment outside the buffer region"));
                }
                HeldSeg::Image { pos, len }
            }
            ("f", Some(len), None) => {
                let at = fetched_len;
                fetched_len = fetched_len
                    .checked_add(
                        usize::try_from(len).map_err(|_| bad("a fetched segment too long"))?,
                    )
                    .ok_or_else(|| bad("fetched segments too long"))?;
                HeldSeg::Fetched { at, len }
            }
            ("z", Some(len), None) => HeldSeg::Zero { len },
            _ => return Err(bad("an unknown segment")),
        };
        total = total.saturating_add(match seg {
            HeldSeg::Image { len, .. } | HeldSeg::Fetched { len, .. } | HeldSeg::Zero { len } => {
                len
            }
        });
        segs.push(seg);
    }
    if total > len || v["fetched"].as_u64() != Some(fetched_len as u64) {
        return Err(bad("segments do not add up"));
    }
    let fetched = session
        .read_bytes(fetched_len)
        .map_err(|e| NoHold::Refused(format!("reading the fetched bytes: {e}")))?;
    Ok(Held {
        _session: session,
        segs,
        fetched,
    })
}
