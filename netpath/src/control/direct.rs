//! Direct readers' requests to the holder (docs/DIRECT.md, "Through the
//! holder"): a hold on a range of a file, so a reader can lend the image's
//! bytes to its program without a copy (the held buffers are not reused
//! while the hold lives), with the bytes of tiered records sent along.
//!
//! `{"op":"direct_hold","ino":N,"birth":B,"off":X,"len":L}` is answered
//! with `{"ok":true,"result":{"size":S,"segs":[["i",IMAGE_OFF,LEN] |
//! ["f",LEN] | ["z",LEN], ...],"fetched":F}}` and then F raw bytes (the
//! tiered segments' bytes, in order); the hold lasts until the reader
//! closes the connection. `birth` names the incarnation of inode N the
//! reader means: a number that names another file now is refused.
//!
//! # Who may ask
//! The users the control socket trusts (root, the image's owner, the
//! holder's user), as for every other op. A direct reader of an image
//! readable by others (a group) that is none of them maps and copies
//! without the holder, but cannot ask it for holds.
//!
//! # Bounds
//! A hold covers at most [`MAX_HOLD_BYTES`], and at most [`MAX_HOLDS`]
//! live at once (each keeps a thread waiting for its reader to close); a
//! reader that dies closes its connection, and the hold goes with it.
//! What a hold delays is the reuse of the buffers it names: the holder
//! never waits for it (writers are copy-on-write).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pktfs_fs::{TxSeg, Volume};
use serde_json::{json, Value};

/// Most bytes one hold covers.
pub const MAX_HOLD_BYTES: u64 = 64 << 20;
/// Most holds live at once.
pub const MAX_HOLDS: usize = 32;

/// A live hold's slot among [`MAX_HOLDS`].
struct HoldSlot(Arc<AtomicUsize>);

impl Drop for HoldSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn num(req: &Value, k: &str) -> Result<u64, String> {
    req[k]
        .as_u64()
        .ok_or_else(|| format!("direct_hold needs a number \"{k}\""))
}

/// Why a hold was not taken: the answer's error line.
pub(crate) enum HoldError {
    /// The file asked about is not there any more (`"stale": true`).
    Stale(String),
    Other(String),
}

impl HoldError {
    pub fn answer(&self) -> Value {
        match self {
            HoldError::Stale(e) => json!({"ok": false, "stale": true, "error": e}),
            HoldError::Other(e) => json!({"ok": false, "error": e}),
        }
    }
}

impl From<String> for HoldError {
    fn from(e: String) -> HoldError {
        HoldError::Other(e)
    }
}

/// Serve one `direct_hold`: answer it, then keep the hold until the
/// reader closes the connection. Errors are answered by the caller.
pub(crate) fn serve_hold(
    vol: &Volume,
    req: &Value,
    out: &mut UnixStream,
    holds: &Arc<AtomicUsize>,
) -> Result<(), HoldError> {
    let (ino, birth) = (num(req, "ino")?, num(req, "birth")?);
    let (off, len) = (num(req, "off")?, num(req, "len")?);
    if len > MAX_HOLD_BYTES {
        return Err(format!("a hold covers at most {MAX_HOLD_BYTES} bytes; {len} asked").into());
    }
    if holds.fetch_add(1, Ordering::SeqCst) >= MAX_HOLDS {
        holds.fetch_sub(1, Ordering::SeqCst);
        return Err(format!("busy: {MAX_HOLDS} holds live already; try again").into());
    }
    let _slot = HoldSlot(holds.clone());
    let stale = || {
        HoldError::Stale(format!(
            "inode {ino} is not the file asked for (deleted or replaced)"
        ))
    };
    let fs_err = |e: pktfs_fs::FsError| match e {
        pktfs_fs::FsError::NotFound => stale(),
        e => HoldError::Other(e.to_string()),
    };
    if vol.inode_birth(ino).map_err(fs_err)? != birth {
        return Err(stale());
    }
    let hold = vol.tx_hold(ino, off, len).map_err(fs_err)?;
    // The hold was taken on the inode as it is now: still the same file?
    if vol.inode_birth(ino).ok() != Some(birth) {
        return Err(stale());
    }
    let mut fetched: Vec<&[u8]> = Vec::new();
    let segs: Vec<Value> = hold
        .segs()
        .iter()
        .map(|s| match *s {
            TxSeg::Image { image_off, len } => json!(["i", image_off, len]),
            TxSeg::Fetched { buf, skip, len } => {
                fetched.push(hold.fetched(buf, skip, len));
                json!(["f", len])
            }
            TxSeg::Zero { len } => json!(["z", len]),
        })
        .collect();
    let total: usize = fetched.iter().map(|b| b.len()).sum();
    let head = json!({"ok": true, "result": {"size": hold.size(), "segs": segs, "fetched": total}});
    let mut line = head.to_string();
    line.push('\n');
    out.write_all(line.as_bytes()).map_err(|e| e.to_string())?;
    for b in fetched {
        out.write_all(b).map_err(|e| e.to_string())?;
    }
    // Held until the reader closes (or dies): read until end of file.
    let _ = out.set_read_timeout(None);
    let mut sink = [0u8; 64];
    loop {
        match std::io::Read::read(out, &mut sink) {
            Ok(0) => break,
            Ok(_) => {} // a reader sends nothing more; whatever it sends is ignored
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    drop(hold);
    Ok(())
}
