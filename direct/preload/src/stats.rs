//! What the shim did, for tests and for a person asking "did it work?":
//! with `PKTFS_PRELOAD_STATS=FILE` set, one JSON line is appended to FILE
//! when the program exits (`{"opened":N,"direct_reads":N,"direct_bytes":N,
//! "fell_back":N}`): descriptors served directly, reads served from the
//! image, their bytes, and reads of served descriptors that went to the
//! kernel after all.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Once;

static OPENED: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static FELL_BACK: AtomicU64 = AtomicU64::new(0);
static AT_EXIT: Once = Once::new();

pub fn opened() {
    OPENED.fetch_add(1, Relaxed);
    AT_EXIT.call_once(|| {
        if std::env::var_os("PKTFS_PRELOAD_STATS").is_some() {
            // SAFETY: registering a function with no arguments that the C
            // library calls once at exit.
            #[allow(unsafe_code)]
            unsafe {
                libc::atexit(write_at_exit)
            };
        }
    });
}

pub fn read(n: usize) {
    READS.fetch_add(1, Relaxed);
    BYTES.fetch_add(n as u64, Relaxed);
}

pub fn fell_back() {
    FELL_BACK.fetch_add(1, Relaxed);
}

extern "C" fn write_at_exit() {
    let _inside = crate::guard::Inside::enter();
    let Some(path) = std::env::var_os("PKTFS_PRELOAD_STATS") else {
        return;
    };
    let line = format!(
        "{{\"pid\":{},\"opened\":{},\"direct_reads\":{},\"direct_bytes\":{},\"fell_back\":{}}}\n",
        std::process::id(),
        OPENED.load(Relaxed),
        READS.load(Relaxed),
        BYTES.load(Relaxed),
        FELL_BACK.load(Relaxed)
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
