//! The tier the model tests tier out to: objects in DRAM, shared by every
//! volume of the process, never deleted. Crash states and remounts read
//! their remote records back through it, checked against the records'
//! CRCs like any fetch. (The tier engine's own tests run against real
//! Garage; this store exists so tier-out joins the crash-state
//! exploration, which is about what reaches PM.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pktfs_fs::{FsError, RemoteBytes, RemoteSource, Volume};

#[derive(Debug, Default)]
pub struct MemTier {
    objs: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next: AtomicU64,
}

impl RemoteSource for MemTier {
    fn fetch(&self, _ino: u64, obj: u64, off: u64, len: u32) -> Result<RemoteBytes, String> {
        let o = self
            .objs
            .lock()
            .map_err(|_| "the test tier's lock is poisoned".to_string())?
            .get(&obj)
            .cloned()
            .ok_or_else(|| format!("object {obj} not in the test tier"))?;
        let end = off as usize + len as usize;
        let size = o.len();
        RemoteBytes::range(o, off as usize..end)
            .ok_or_else(|| format!("object {obj} is {size} bytes, asked to {end}"))
    }
}

/// The process's test tier.
pub fn store() -> Arc<MemTier> {
    static S: OnceLock<Arc<MemTier>> = OnceLock::new();
    S.get_or_init(|| {
        Arc::new(MemTier {
            objs: Mutex::default(),
            next: AtomicU64::new(1),
        })
    })
    .clone()
}

/// Give `v` the test tier as its read-through source.
pub fn use_store(v: &Volume) {
    v.set_remote_source(store());
}

/// Tier out every local record of `ino` into one new object, the way the
/// engine does: hold, read (checked), store, switch.
pub fn tier_out(v: &Volume, ino: u64) -> Result<u64, FsError> {
    use_store(v);
    let s = store();
    let out = v.tier_begin(ino, u64::MAX)?;
    if out.is_empty() {
        return Ok(0);
    }
    let obj = s.next.fetch_add(1, Ordering::Relaxed);
    let mut body = Vec::with_capacity(out.len() as usize);
    let mut placed = Vec::with_capacity(out.extents().len());
    for k in 0..out.extents().len() {
        placed.push((obj, body.len() as u64));
        body.extend_from_slice(out.bytes(k)?);
    }
    if let Ok(mut o) = s.objs.lock() {
        o.insert(obj, Arc::new(body));
    }
    Ok(v.tier_switch(out, &placed)?.bytes)
}
