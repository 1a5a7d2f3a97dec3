//! Fetching tiered bytes for GETs, off the event loops: a small pool of
//! threads shared by the server, a bounded queue of windows to fetch, and
//! a budget of fetched bytes in DRAM across the server.
//!
//! Why a pool: a fetch is a GET from the object store (milliseconds to
//! seconds, or a timeout). On a loop's thread it would stall every other
//! connection of the loop; so a loop session hands the pool a window
//! ([`pktfs_fs::TxWindow`]) and hears through its [`Waker`] when the bytes
//! are in. The threaded transport fetches on its own connection's thread
//! (it blocks nothing else), charged against the same budget
//! ([`FetchPool::reserve`]).
//!
//! # Bounds
//! - At most `Config::tier_fetch_queue` windows wait; a session whose
//!   window finds the queue full keeps it and is woken when a place frees
//!   (the GET waits; it is refused only when its deadline passes).
//! - Fetched bytes held across the server (being fetched, fetched and
//!   waiting, being sent) stay within `Config::tier_fetch_bytes`: a window
//!   is fetched only once its bytes fit (or nothing else is held, so a
//!   window larger than the budget still goes, alone). A [`Charge`] is
//!   given back when the window's hold is dropped, i.e. once it is sent.
//! - A window that waited past its deadline (`Config::io_timeout` from
//!   when it was asked for) fails with [`FetchError::Deadline`].

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use pktfs_fs::{FsError, TxFetched, TxWindow, Volume};

use crate::loops::wake::Waker;

/// Why a window's bytes did not come.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("{0}")]
    Fs(#[from] FsError),
    #[error("no tier fetch within the deadline: the server's fetches are busy")]
    Deadline,
    #[error("the server is stopping")]
    Stopped,
}

/// What a fetched window comes back with: its bytes, and their charge
/// against the budget (none for a window with no remote record).
pub(crate) type Fetched = Result<(TxFetched, Option<Charge>), FetchError>;

/// A window on its way: filled by a fetch thread, taken by the session.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Mutex<SlotState>,
    waker: Option<Waker>,
}

#[derive(Debug)]
enum SlotState {
    Pending,
    Done(Fetched),
    /// Taken, or its connection went away: a result is dropped at once
    /// (its charge given back).
    Gone,
}

impl Slot {
    pub(crate) fn new(waker: Option<Waker>) -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(SlotState::Pending),
            waker,
        })
    }

    /// A slot already filled (a window with nothing to fetch).
    pub(crate) fn ready(r: Fetched) -> Arc<Slot> {
        Arc::new(Slot {
            state: Mutex::new(SlotState::Done(r)),
            waker: None,
        })
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The result, once there (then the slot is spent).
    pub(crate) fn take(&self) -> Option<Fetched> {
        let mut s = self.lock();
        match std::mem::replace(&mut *s, SlotState::Gone) {
            SlotState::Done(r) => Some(r),
            other => {
                *s = other;
                None
            }
        }
    }

    /// Nobody will take the result: drop it now and any that comes.
    pub(crate) fn cancel(&self) {
        let old = std::mem::replace(&mut *self.lock(), SlotState::Gone);
        drop(old);
    }

    fn cancelled(&self) -> bool {
        matches!(*self.lock(), SlotState::Gone)
    }

    fn finish(&self, r: Fetched) {
        let mut s = self.lock();
        if matches!(*s, SlotState::Pending) {
            *s = SlotState::Done(r);
            drop(s);
            if let Some(w) = &self.waker {
                w.wake();
            }
        } else {
            // Cancelled: the bytes (and their charge) go now, outside
            // the slot's lock.
            drop(s);
            drop(r);
        }
    }
}

/// A window to fetch.
#[derive(Debug)]
pub(crate) struct Job {
    pub vol: Arc<Volume>,
    pub window: TxWindow,
    pub slot: Arc<Slot>,
    pub deadline: Instant,
}

/// Bytes of the budget a window holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    inner: Arc<Inner>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut st = self.inner.lock();
        st.held -= self.bytes;
        drop(st);
        self.inner.work.notify_all();
        self.inner.room.notify_all();
    }
}

#[derive(Debug, Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Bytes charged now, and the most ever.
    held: u64,
    peak: u64,
    /// Sessions whose window found the queue full.
    waiting: Vec<Waker>,
    started: bool,
    stop: bool,
}

#[derive(Debug)]
struct Inner {
    st: Mutex<State>,
    /// Fetch threads wait here for a job, or for room in the budget.
    work: Condvar,
    /// Threaded connections wait here for room in the budget.
    room: Condvar,
    budget: u64,
    queue: usize,
    threads: usize,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fits(&self, st: &State, bytes: u64) -> bool {
        st.held == 0 || st.held + bytes <= self.budget
    }

    fn charge(self: &Arc<Self>, st: &mut State, bytes: u64) -> Charge {
        st.held += bytes;
        st.peak = st.peak.max(st.held);
        Charge {
            inner: self.clone(),
            bytes,
        }
    }
}

/// The server's fetch threads (started on the first window) and budget.
#[derive(Debug)]
pub(crate) struct FetchPool {
    inner: Arc<Inner>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

/// Fetched bytes held now and the most held at once, across the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FetchStats {
    pub held: u64,
    pub peak: u64,
}

impl FetchPool {
    pub(crate) fn new(threads: usize, queue: usize, budget: u64) -> FetchPool {
        FetchPool {
            inner: Arc::new(Inner {
                st: Mutex::default(),
                work: Condvar::new(),
                room: Condvar::new(),
                budget: budget.max(1),
                queue: queue.max(1),
                threads: threads.max(1),
            }),
            handles: Mutex::default(),
        }
    }

    pub(crate) fn stats(&self) -> FetchStats {
        let st = self.inner.lock();
        FetchStats {
            held: st.held,
            peak: st.peak,
        }
    }

    /// Queue `job`; a full queue hands it back (the slot's waker is woken
    /// when a place frees).
    pub(crate) fn try_submit(&self, job: Job) -> Result<(), Job> {
        let mut st = self.inner.lock();
        if st.stop {
            job.slot.finish(Err(FetchError::Stopped));
            return Ok(());
        }
        if st.jobs.len() >= self.inner.queue {
            if let Some(w) = &job.slot.waker {
                st.waiting.push(w.clone());
            }
            return Err(job);
        }
        if !st.started {
            st.started = true;
            self.start(&mut st);
        }
        st.jobs.push_back(job);
        drop(st);
        self.inner.work.notify_one();
        Ok(())
    }

    fn start(&self, st: &mut State) {
        let mut hs = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        for k in 0..self.inner.threads {
            let inner = self.inner.clone();
            match std::thread::Builder::new()
                .name(format!("pktfs-fetch-{k}"))
                .spawn(move || worker(inner))
            {
                Ok(h) => hs.push(h),
                Err(e) => tracing::error!("starting a tier fetch thread: {e}"),
            }
        }
        if hs.is_empty() {
            // No thread to fetch: fail what would wait forever.
            st.stop = true;
        }
    }

    /// Room for `bytes` of fetched data, waiting for it at most until
    /// `deadline` (the threaded transport, which fetches on its own
    /// thread).
    pub(crate) fn reserve(&self, bytes: u64, deadline: Instant) -> Result<Charge, FetchError> {
        let mut st = self.inner.lock();
        loop {
            if st.stop {
                return Err(FetchError::Stopped);
            }
            if self.inner.fits(&st, bytes) {
                return Ok(self.inner.charge(&mut st, bytes));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(FetchError::Deadline);
            }
            st = self
                .inner
                .room
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stop: queued windows fail, the threads end after the fetch they
    /// are in (not waited for: a store that hangs must not hang the
    /// shutdown).
    pub(crate) fn stop(&self) {
        let jobs = {
            let mut st = self.inner.lock();
            st.stop = true;
            std::mem::take(&mut st.jobs)
        };
        for j in jobs {
            j.slot.finish(Err(FetchError::Stopped));
        }
        self.inner.work.notify_all();
        self.inner.room.notify_all();
        self.handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl Drop for FetchPool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A fetch thread: the oldest window whose bytes fit the budget, fetched
/// and checked, then handed to its slot.
fn worker(inner: Arc<Inner>) {
    loop {
        let mut failed = Vec::new();
        let mut st = inner.lock();
        let picked = loop {
            if st.stop {
                return;
            }
            let now = Instant::now();
            // Windows nobody waits for any more, or past their deadline,
            // leave the queue without a fetch.
            while let Some(j) = st.jobs.front() {
                if j.slot.cancelled() {
                    st.jobs.pop_front();
                } else if j.deadline <= now {
                    failed.extend(st.jobs.pop_front());
                } else {
                    break;
                }
            }
            if !failed.is_empty() {
                break None;
            }
            let Some(j) = st.jobs.front() else {
                st = inner.work.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let bytes = j.window.fetch_bytes();
            if inner.fits(&st, bytes) {
                let j = st.jobs.pop_front().expect("looked at");
                let c = inner.charge(&mut st, bytes);
                break Some((j, c));
            }
            // Wait for a charge to be given back, or the deadline.
            let wait = j.deadline.saturating_duration_since(now);
            st = inner
                .work
                .wait_timeout(st, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        // A place in the queue freed: a session that found it full tries
        // again.
        let waiting = std::mem::take(&mut st.waiting);
        drop(st);
        for w in waiting {
            w.wake();
        }
        for j in failed {
            j.slot.finish(Err(FetchError::Deadline));
        }
        let Some((job, charge)) = picked else {
            continue;
        };
        let r = job.vol.tx_fetch(&job.window);
        // The volume is let go before the result is handed over: a stopped
        // server's last reference must not stay with an idle thread.
        drop(job.vol);
        job.slot.finish(match r {
            Ok(f) => Ok((f, Some(charge))),
            Err(e) => Err(FetchError::Fs(e)),
        });
    }
}
