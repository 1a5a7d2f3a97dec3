//! What every server module shares: the volume, the configuration, the
//! change callback, the metrics and the registry of live connections.
//! `server` (listeners, threads) sits on top of this; `http` and `raw`
//! serve connections with it and never call back into `server`.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};

use pktfs_fs::Volume;

use crate::config::{Change, Config, OnChange};
use crate::metrics::Metrics;

pub(crate) struct Shared {
    pub vol: Arc<Volume>,
    pub cfg: Config,
    pub on_change: Option<OnChange>,
    pub stop: AtomicBool,
    pub metrics: Metrics,
    pub uid: u32,
    pub gid: u32,
    /// Inode of the raw-mode directory (when raw mode is on).
    pub raw_dir: u64,
    /// Live connections (a clone of each socket, to cut them at shutdown).
    pub conns: Mutex<HashMap<u64, TcpStream>>,
    /// Signalled when a connection ends.
    pub idle: Condvar,
    pub next_id: AtomicU64,
    /// The io_uring loops' counters (connections open on them).
    pub loops: Arc<crate::loops::LoopShared>,
    /// Raw connections being served now (both transports), against
    /// `Config::raw_max_connections`.
    pub raw_open: AtomicUsize,
    /// Unnamed files connections made ahead of their next upload
    /// (`http::spare`, at most `MAX_SPARES`).
    pub spares: AtomicUsize,
    /// Tiered GETs' fetches: the threads and the budget of fetched bytes.
    pub fetch: crate::transmit::fetch::FetchPool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub fn notify(&self, c: Change<'_>) {
        if let Some(f) = &self.on_change {
            f(c);
        }
    }

    /// Changes are refused (server flag or read-only volume).
    pub fn read_only(&self) -> bool {
        self.cfg.read_only || self.vol.is_read_only()
    }

    /// Connections being served now: by threads, and on the loops.
    pub fn open_connections(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
            + self.loops.active.load(std::sync::atomic::Ordering::Relaxed)
    }
}
