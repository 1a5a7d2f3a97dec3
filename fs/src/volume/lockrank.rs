//! The Volume's lock order, checked on every acquisition in debug builds.
//!
//! Why: a lock-order inversion deadlocks only when two threads meet at the
//! wrong instant, so tests that race find it rarely and CI pays for it
//! with a hang (an invariant checker that takes the inode table's shards
//! and then inode locks, against a free that holds an inode and takes its
//! shard, is such a pair). Here every lock carries a
//! [`Rank`], each thread keeps the locks it holds, and taking a lock that
//! may wait while holding one of a later rank panics at once with both
//! names, in every test that merely passes through the two paths, whoever
//! else is running.
//!
//! The rule: a thread may *wait* for a lock only if every lock it holds
//! ranks before it; inodes, which share a rank, only in ascending inode
//! number. A try-lock never waits, so it may be taken out of order (the
//! namespace fast paths do so); what it holds counts against the locks
//! taken after it. With every wait going up the order, no cycle of
//! waiting threads can form. Taking a lock the thread already holds (a
//! second read lock of one inode, which std's `RwLock` may deadlock on
//! when a writer is queued) breaks the rule too.
//!
//! Release builds carry the rank in each lock and nothing else: no
//! thread-local list, no check.

use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::{
    Condvar, LockResult, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError,
};

/// The Volume's locks, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// `Volume::renames`: a rename between directories holds it throughout.
    Renames,
    /// An inode; several only in ascending number (try-locks excepted).
    Inode,
    /// `Volume::sb`.
    Superblock,
    /// `Volume::alloc`.
    Alloc,
    /// The journal's free-slot list (`JournalSlots`).
    JournalSlots,
    /// `RemoteState::live`: remote bytes per object.
    RemoteLive,
    /// `RemoteState::verified`: remote records lately checked.
    RemoteVerified,
    /// `Volume::ns`: which directory is in which (a map access).
    Namespace,
    /// A shard of the inode table (inside `InodeTable`'s methods only).
    InodeTable,
}

/// A lock guard that keeps its rank on the thread's list while it lives.
/// Derefs to what the guard `G` derefs to.
pub(crate) struct Ranked<G> {
    // Declared first so the lock is released before the list forgets it
    // (a thread that drops a guard and takes another never finds the list
    // claiming less than it holds).
    g: G,
    #[cfg(debug_assertions)]
    token: held::Token,
}

impl<G> Ranked<G> {
    /// Wrap a guard just taken at `at` (the order was checked before any
    /// wait).
    fn new(g: G, rank: Rank, key: u64, at: &'static Location<'static>) -> Ranked<G> {
        #[cfg(not(debug_assertions))]
        let _ = (rank, key, at);
        Ranked {
            g,
            #[cfg(debug_assertions)]
            token: held::record(rank, key, at),
        }
    }
}

impl<G: Deref> Deref for Ranked<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.g
    }
}

impl<G: DerefMut> DerefMut for Ranked<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.g
    }
}

impl<G: std::fmt::Debug> std::fmt::Debug for Ranked<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.g.fmt(f)
    }
}

/// Check the rule before a lock that may wait is taken (the guard is
/// recorded by `Ranked::new` after).
#[track_caller]
fn before_wait(rank: Rank, key: u64) {
    #[cfg(debug_assertions)]
    held::check(rank, key);
    #[cfg(not(debug_assertions))]
    let _ = (rank, key);
}

fn map_poison<G, H>(r: LockResult<G>, f: impl FnOnce(G) -> H) -> LockResult<H> {
    match r {
        Ok(g) => Ok(f(g)),
        Err(e) => Err(PoisonError::new(f(e.into_inner()))),
    }
}

/// A `Mutex` with a rank.
#[derive(Debug)]
pub(crate) struct RankedMutex<T> {
    rank: Rank,
    m: Mutex<T>,
}

impl<T> RankedMutex<T> {
    pub const fn new(rank: Rank, v: T) -> RankedMutex<T> {
        RankedMutex {
            rank,
            m: Mutex::new(v),
        }
    }

    /// `Mutex::lock`, after the order is checked.
    #[track_caller]
    pub fn lock(&self) -> LockResult<Ranked<MutexGuard<'_, T>>> {
        let (r, at) = (self.rank, Location::caller());
        before_wait(r, 0);
        map_poison(self.m.lock(), |g| Ranked::new(g, r, 0, at))
    }
}

impl<'a, T> Ranked<MutexGuard<'a, T>> {
    /// `Condvar::wait` on this guard's mutex. The thread keeps the rank on
    /// its list while it waits (it takes no other lock meanwhile).
    pub fn wait(self, cv: &Condvar) -> LockResult<Self> {
        let Ranked {
            g,
            #[cfg(debug_assertions)]
            token,
        } = self;
        map_poison(cv.wait(g), |g| Ranked {
            g,
            #[cfg(debug_assertions)]
            token,
        })
    }
}

/// A `RwLock` with a rank (the inode table's shards).
#[derive(Debug, Default)]
pub(crate) struct RankedRwLock<T> {
    m: RwLock<T>,
}

impl<T> RankedRwLock<T> {
    const RANK: Rank = Rank::InodeTable;

    #[track_caller]
    pub fn read(&self) -> LockResult<Ranked<RwLockReadGuard<'_, T>>> {
        let at = Location::caller();
        before_wait(Self::RANK, 0);
        map_poison(self.m.read(), |g| Ranked::new(g, Self::RANK, 0, at))
    }

    #[track_caller]
    pub fn write(&self) -> LockResult<Ranked<RwLockWriteGuard<'_, T>>> {
        let at = Location::caller();
        before_wait(Self::RANK, 0);
        map_poison(self.m.write(), |g| Ranked::new(g, Self::RANK, 0, at))
    }
}

/// An inode's lock: a `RwLock` ranked by the inode's number, which it
/// carries so that the order can be checked before the lock is waited for.
#[derive(Debug)]
pub(crate) struct InodeLock<T> {
    ino: u32,
    l: RwLock<T>,
}

impl<T> InodeLock<T> {
    pub fn new(ino: u32, v: T) -> InodeLock<T> {
        InodeLock {
            ino,
            l: RwLock::new(v),
        }
    }

    #[track_caller]
    pub fn read(&self) -> LockResult<Ranked<RwLockReadGuard<'_, T>>> {
        let (k, at) = (self.ino as u64, Location::caller());
        before_wait(Rank::Inode, k);
        map_poison(self.l.read(), |g| Ranked::new(g, Rank::Inode, k, at))
    }

    #[track_caller]
    pub fn write(&self) -> LockResult<Ranked<RwLockWriteGuard<'_, T>>> {
        let (k, at) = (self.ino as u64, Location::caller());
        before_wait(Rank::Inode, k);
        map_poison(self.l.write(), |g| Ranked::new(g, Rank::Inode, k, at))
    }

    /// The read lock if it is free now (never waits, so never out of
    /// order); `None` if write-locked or poisoned.
    #[track_caller]
    pub fn try_read(&self) -> Option<Ranked<RwLockReadGuard<'_, T>>> {
        match self.l.try_read() {
            Ok(g) => Some(Ranked::new(
                g,
                Rank::Inode,
                self.ino as u64,
                Location::caller(),
            )),
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => None,
        }
    }

    /// The write lock if it is free now; `None` if taken or poisoned.
    #[track_caller]
    pub fn try_write(&self) -> Option<Ranked<RwLockWriteGuard<'_, T>>> {
        match self.l.try_write() {
            Ok(g) => Some(Ranked::new(
                g,
                Rank::Inode,
                self.ino as u64,
                Location::caller(),
            )),
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => None,
        }
    }

    /// Whether a lock call would wait now (for tests that watch one inode).
    #[cfg(test)]
    pub fn is_taken(&self, write: bool) -> bool {
        if write {
            self.l.try_write().is_err()
        } else {
            self.l.try_read().is_err()
        }
    }
}

#[cfg(debug_assertions)]
mod held {
    use super::Rank;
    use std::cell::RefCell;
    use std::panic::Location;

    /// One held lock: its rank, key (inode number), where it was taken,
    /// and an id to find it again when its guard drops.
    struct Held {
        rank: Rank,
        key: u64,
        at: &'static Location<'static>,
        id: u64,
    }

    thread_local! {
        static HELD: RefCell<(Vec<Held>, u64)> = const { RefCell::new((Vec::new(), 0)) };
    }

    /// Forgets its lock when dropped.
    pub(super) struct Token(u64);

    impl Drop for Token {
        fn drop(&mut self) {
            let id = self.0;
            // `try_with`: a guard dropped while the thread's locals are torn
            // down has nothing left to update.
            let _ = HELD.try_with(|h| {
                let mut h = h.borrow_mut();
                if let Some(k) = h.0.iter().rposition(|x| x.id == id) {
                    h.0.swap_remove(k);
                }
            });
        }
    }

    /// Panics if waiting for (`rank`, `key`) could close a cycle.
    #[track_caller]
    pub(super) fn check(rank: Rank, key: u64) {
        let bad = HELD.with(|h| {
            h.borrow().0.iter().find_map(|x| {
                let ok = x.rank < rank || (x.rank == rank && rank == Rank::Inode && x.key < key);
                (!ok).then_some((x.rank, x.key, x.at))
            })
        });
        if let Some((r, k, at)) = bad {
            // Not while a panic unwinds already (a guard taken in a drop).
            if !std::thread::panicking() {
                panic!(
                    "lock order violated: waiting for {} at {} while holding {} taken at {at}",
                    name(rank, key),
                    Location::caller(),
                    name(r, k),
                );
            }
        }
    }

    fn name(r: Rank, k: u64) -> String {
        match r {
            Rank::Inode => format!("the lock of inode {k}"),
            r => format!("the {r:?} lock"),
        }
    }

    pub(super) fn record(rank: Rank, key: u64, at: &'static Location<'static>) -> Token {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            h.1 += 1;
            let id = h.1;
            h.0.push(Held { rank, key, at, id });
            Token(id)
        })
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let e = std::panic::catch_unwind(f).expect_err("should panic");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn going_up_the_order_is_allowed() {
        let (a, b) = (InodeLock::new(3, 0), InodeLock::new(7, 0));
        let alloc = RankedMutex::new(Rank::Alloc, 0);
        let ns = RankedMutex::new(Rank::Namespace, 0);
        let g1 = a.write().unwrap();
        let g2 = b.read().unwrap();
        let g3 = alloc.lock().unwrap();
        let g4 = ns.lock().unwrap();
        drop((g1, g2, g3, g4));
        // Released: the order starts again.
        let _g = ns.lock().unwrap();
    }

    #[test]
    fn waiting_for_an_earlier_rank_panics_with_both_names() {
        let a = InodeLock::new(5, 0);
        let table = RankedRwLock::<u8>::default();
        let m = panics(move || {
            let _s = table.read().unwrap();
            let _i = a.read().unwrap();
        });
        assert!(m.contains("waiting for the lock of inode 5"), "{m}");
        assert!(m.contains("holding the InodeTable lock"), "{m}");
        assert!(m.contains("lockrank.rs"), "{m}");
    }

    #[test]
    fn inodes_go_up_by_number_and_never_twice() {
        let (a, b) = (InodeLock::new(9, 0), InodeLock::new(4, 0));
        let m = panics(|| {
            let _g = a.write().unwrap();
            let _h = b.write().unwrap();
        });
        assert!(m.contains("inode 4") && m.contains("inode 9"), "{m}");
        // (A fresh lock: the panic above poisoned `a`.)
        let c = InodeLock::new(9, 0);
        let m = panics(|| {
            let _g = c.read().unwrap();
            let _h = c.read().unwrap();
        });
        assert!(m.contains("inode 9"), "{m}");
    }

    #[test]
    fn a_try_lock_may_go_down_but_counts_after() {
        let (a, b, c) = (
            InodeLock::new(9, 0),
            InodeLock::new(2, 0),
            InodeLock::new(1, 0),
        );
        let g = a.write().unwrap();
        let t = b.try_write().expect("free");
        drop(g);
        // Holding 2 (tried): waiting for 1 would go down.
        let m = panics(std::panic::AssertUnwindSafe(|| {
            let _h = c.write().unwrap();
        }));
        assert!(m.contains("inode 1") && m.contains("inode 2"), "{m}");
        drop(t);
        let _h = c.write().unwrap();
    }

    #[test]
    fn a_condvar_wait_keeps_the_rank() {
        let m = RankedMutex::new(Rank::JournalSlots, false);
        let cv = Condvar::new();
        std::thread::scope(|s| {
            s.spawn(|| {
                *m.lock().unwrap() = true;
                cv.notify_all();
            });
            let mut g = m.lock().unwrap();
            while !*g {
                g = g.wait(&cv).unwrap();
            }
            // Still held and ranked: an earlier rank now would panic.
            let a = InodeLock::new(1, 0);
            let msg = panics(std::panic::AssertUnwindSafe(|| {
                let _i = a.read().unwrap();
            }));
            assert!(msg.contains("JournalSlots"), "{msg}");
        });
    }
}
