//! The persister thread of a large body on the thread-per-connection
//! transport: the connection's thread only receives and walks the body,
//! handing each landed range over held (`RxHeld`: it shares the
//! reservation's reference, so handing it over takes no lock); the
//! persister makes the pieces (CRC32C, write-back) and commits them in
//! batches, so that work overlaps the next receive, on another core when
//! one is free. Everything is committed before [`with_persister`]
//! returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::time::Instant;

use pktfs_fs::{FsError, RxHeld, RxPiece, RxTime, Volume};
use prometheus_client::metrics::histogram::Histogram;

/// Received bytes to be made into a piece by another thread (see
/// [`super::stream::RxStream::take_job`]). Shares the reservation's reference on its
/// buffers: dropped unmade, it just lets go of that share.
#[derive(Debug)]
pub struct RxJob<'v> {
    pub held: RxHeld<'v>,
    pub at: RxTime,
    pub seq: u64,
}

impl<'v> RxJob<'v> {
    /// Make the piece (CRC, flush); the job's reference moves to it.
    pub fn piece(self) -> RxPiece<'v> {
        self.held.piece(self.at, self.seq)
    }
}

/// What the persister is given, in stream order.
enum Work<'v> {
    Job(RxJob<'v>),
    Piece(RxPiece<'v>),
}

/// The sending side: given to the body's [`super::body::Pieces`].
#[derive(Debug)]
pub(crate) struct Persister<'v> {
    tx: SyncSender<Work<'v>>,
    /// A commit failed: the receiver stops early.
    failed: Arc<AtomicBool>,
}

impl std::fmt::Debug for Work<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Work")
    }
}

fn not_stored() -> FsError {
    FsError::NoSpace("the upload could not be stored")
}

impl<'v> Persister<'v> {
    /// Pieces made on this thread (copied together, or from DRAM), after
    /// what was sent before.
    pub(crate) fn send_pieces(&self, list: &mut Vec<RxPiece<'v>>) -> Result<(), FsError> {
        for p in list.drain(..) {
            // A piece the thread no longer takes gives its reference back
            // when the error drops it.
            self.tx.send(Work::Piece(p)).map_err(|_| not_stored())?;
        }
        Ok(())
    }

    /// Held bytes, made a piece by the thread.
    pub(crate) fn send_held(&self, held: RxHeld<'v>, at: RxTime, seq: u64) -> Result<(), FsError> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(not_stored());
        }
        self.tx
            .send(Work::Job(RxJob { held, at, seq }))
            .map_err(|_| not_stored())
    }
}

/// Run `walk` with a persister thread committing into `ino` in batches of
/// `batch` bytes (None when no thread could be started: `walk` then makes
/// the pieces itself). `walk` must drop the [`Persister`] before it
/// returns. Returns what `walk` returned and the records the thread
/// committed (its error, if a commit failed).
pub(crate) fn with_persister<'v, R>(
    vol: &'v Volume,
    ino: u64,
    batch: u64,
    commits: &Histogram,
    walk: impl FnOnce(Option<Persister<'v>>) -> R,
) -> (R, Result<u64, FsError>) {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Work<'v>>(256);
    let failed = Arc::new(AtomicBool::new(false));
    std::thread::scope(|sc| {
        let f = failed.clone();
        let worker = std::thread::Builder::new()
            .name("pktfs-persist".into())
            .stack_size(256 << 10)
            .spawn_scoped(sc, move || persist(vol, ino, rx, batch, &f, commits));
        let worker = match worker {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!("cannot start a persister thread ({e}); receiving inline");
                return (walk(None), Ok(0));
            }
        };
        let r = walk(Some(Persister { tx, failed }));
        let w = worker
            .join()
            .unwrap_or(Err(FsError::Invalid("persister thread failed")));
        (r, w)
    })
}

/// The thread: make each piece, commit in batches of `batch` bytes.
/// Returns the records committed. After a failure it only drains (and
/// frees) what it is sent; `failed` tells the receiver to stop early.
fn persist<'v>(
    vol: &'v Volume,
    ino: u64,
    rx: Receiver<Work<'v>>,
    batch: u64,
    failed: &AtomicBool,
    commit_seconds: &Histogram,
) -> Result<u64, FsError> {
    let mut pieces: Vec<RxPiece<'v>> = Vec::new();
    let mut bytes = 0u64;
    let mut records = 0u64;
    let mut err = None;
    let commit = |pieces: Vec<RxPiece<'v>>| {
        let t0 = Instant::now();
        let r = vol.rx_commit(ino, pieces);
        commit_seconds.observe(t0.elapsed().as_secs_f64());
        r
    };
    for w in rx {
        if err.is_some() {
            drop(w); // its reference goes back
            continue;
        }
        let p = match w {
            Work::Job(j) => j.piece(),
            Work::Piece(p) => p,
        };
        bytes += p.len() as u64;
        pieces.push(p);
        if bytes >= batch {
            let n = pieces.len() as u64;
            match commit(std::mem::take(&mut pieces)) {
                Ok(_) => records += n,
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    err = Some(e);
                }
            }
            bytes = 0;
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let n = pieces.len() as u64;
    if n > 0 {
        commit(pieces)?;
    }
    Ok(records + n)
}
