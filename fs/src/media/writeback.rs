//! Write-backs asked for by `Pm::flush` and issued at the same thread's
//! next `Pm::fence`.
//!
//! Why: x86 orders CLWB and CLFLUSHOPT behind every later locked
//! read-modify-write (a mutex taken or released, an `Arc` cloned, an
//! atomic `fetch_or`), so the first such instruction after a write-back
//! waits until the line has reached the persistence domain, exactly as an
//! `sfence` would. An upload takes a dozen locks between its first flush
//! and its commit's fence (the allocator for the piece's reference and
//! its records, the verifier's bitmap, the inode table), and with each
//! flush issued at once every one of them became a fence: profiles of
//! small PUTs put most samples of `RxHeld::piece`, `new_dirent`,
//! `insert_inode` and `Commit::apply` on the instruction after such a
//! lock, five serial waits per upload where the persistence idiom needs
//! two (payload and records, then the publish). Queued here and issued
//! together right before the `sfence`, the lines are written back in
//! parallel and waited for once, and a small PUT costs the server about
//! what it costs in eADR mode (no write-back at all); docs/BENCHMARKS.md
//! has the figures.
//!
//! The contract is unchanged: `flush` starts a write-back that is durable
//! after the next fence *on the same thread*, which is all `sfence`
//! promises on hardware too (it orders its own core's write-backs). What
//! changes is that a flush followed by a lock release on thread A no
//! longer makes the line durable for a fence on thread B; the debug
//! tracker therefore treats a fence as completing only its own thread's
//! flushes (`tracker.rs`), so a publish relying on another thread's
//! unfenced flush fails the debug build's assertion.
//!
//! Only small ranges wait (a record, a dirent, an inode slot, a 1 KiB
//! body); a large piece is written back at once so the write-back overlaps
//! the receive of the next one, and a queue past its bound is issued
//! before it grows further. Entries are offsets into their own `Pm`'s
//! mapping, held by that `Pm` (one queue per thread that flushed it), so
//! they are only ever issued while the mapping lives; the `Pm`'s drop
//! issues what is left.

use std::cell::RefCell;

use smallvec::SmallVec;
use thread_local::ThreadLocal;

/// A flush of at most this many bytes is queued; a larger one is issued at
/// once (it has lines enough to keep the memory busy by itself).
pub(super) const QUEUE_MAX_RANGE_BYTES: usize = 16 << 10;
/// At most this many bytes wait on one thread; past it the queue is issued.
pub(super) const QUEUE_MAX_BYTES: usize = 64 << 10;
/// At most this many ranges wait on one thread.
pub(super) const QUEUE_MAX_RANGES: usize = 32;

/// Which thread's fence a flush waits for: a number given to each thread
/// on first use, never reused. Not `std::thread::current().id()`, which
/// clones an `Arc` (a locked instruction, the very thing that stalls
/// behind a write-back) on the upload's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushThread(u64);

impl FlushThread {
    #[inline]
    pub fn current() -> FlushThread {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            static ME: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        FlushThread(ME.with(|m| *m))
    }
}

/// One thread's queued write-backs: `(offset, len)` in the mapping.
#[derive(Debug, Default)]
struct Queue {
    ranges: SmallVec<[(usize, usize); QUEUE_MAX_RANGES]>,
    bytes: usize,
}

/// The queues of one mapping, one per thread that flushed it.
#[derive(Debug, Default)]
pub(super) struct WriteBacks {
    queues: ThreadLocal<RefCell<Queue>>,
}

impl WriteBacks {
    /// Queue `[off, off+len)` on this thread. `issue` is called with ranges
    /// to write back now: the queue when it is full, or the range itself
    /// when it is too large to wait.
    #[inline]
    pub(super) fn queue(&self, off: usize, len: usize, mut issue: impl FnMut(usize, usize)) {
        if len > QUEUE_MAX_RANGE_BYTES {
            issue(off, len);
            return;
        }
        let cell = self.queues.get_or_default();
        let mut q = cell.borrow_mut();
        if q.ranges.len() == QUEUE_MAX_RANGES || q.bytes + len > QUEUE_MAX_BYTES {
            for (o, l) in q.ranges.drain(..) {
                issue(o, l);
            }
            q.bytes = 0;
        }
        // A range right after the last one (a record after its payload's
        // tail, consecutive records) extends it: one entry, and a line
        // they share is written back once.
        if let Some(last) = q.ranges.last_mut() {
            if last.0 + last.1 == off {
                last.1 += len;
                q.bytes += len;
                return;
            }
        }
        q.ranges.push((off, len));
        q.bytes += len;
    }

    /// Issue this thread's queue (the fence follows).
    #[inline]
    pub(super) fn issue_mine(&self, mut issue: impl FnMut(usize, usize)) {
        if let Some(cell) = self.queues.get() {
            let mut q = cell.borrow_mut();
            for (o, l) in q.ranges.drain(..) {
                issue(o, l);
            }
            q.bytes = 0;
        }
    }

    /// Issue every thread's queue (the mapping is about to go; no other
    /// thread can reach it, hence `&mut`).
    pub(super) fn issue_all(&mut self, mut issue: impl FnMut(usize, usize)) {
        for cell in self.queues.iter_mut() {
            let q = cell.get_mut();
            for (o, l) in q.ranges.drain(..) {
                issue(o, l);
            }
            q.bytes = 0;
        }
    }

    /// Ranges waiting on this thread (tests).
    #[cfg(test)]
    pub(super) fn mine(&self) -> Vec<(usize, usize)> {
        self.queues
            .get()
            .map(|c| c.borrow().ranges.to_vec())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issued(wb: &WriteBacks) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        wb.issue_mine(|o, l| v.push((o, l)));
        v
    }

    #[test]
    fn small_ranges_wait_for_the_fence_and_large_ones_do_not() {
        let wb = WriteBacks::default();
        let mut now = Vec::new();
        wb.queue(0, 64, |o, l| now.push((o, l)));
        wb.queue(4096, 1024, |o, l| now.push((o, l)));
        wb.queue(1 << 20, QUEUE_MAX_RANGE_BYTES + 1, |o, l| now.push((o, l)));
        assert_eq!(now, vec![(1 << 20, QUEUE_MAX_RANGE_BYTES + 1)]);
        assert_eq!(issued(&wb), vec![(0, 64), (4096, 1024)]);
        assert!(issued(&wb).is_empty(), "a fence issues a queue once");
    }

    #[test]
    fn adjacent_ranges_merge() {
        let wb = WriteBacks::default();
        wb.queue(0, 1000, |_, _| panic!("nothing is due"));
        wb.queue(1000, 24, |_, _| panic!("nothing is due"));
        wb.queue(2048, 64, |_, _| panic!("nothing is due"));
        assert_eq!(wb.mine(), vec![(0, 1024), (2048, 64)]);
    }

    #[test]
    fn a_full_queue_is_issued_before_it_grows() {
        let wb = WriteBacks::default();
        let mut now = Vec::new();
        for k in 0..QUEUE_MAX_RANGES + 1 {
            wb.queue(k * 128, 64, |o, l| now.push((o, l)));
        }
        assert_eq!(now.len(), QUEUE_MAX_RANGES, "the full queue went out");
        assert_eq!(wb.mine(), vec![(QUEUE_MAX_RANGES * 128, 64)]);
        now.clear();
        let wb = WriteBacks::default();
        let big = QUEUE_MAX_RANGE_BYTES;
        for k in 0..QUEUE_MAX_BYTES / big + 1 {
            wb.queue(k * 2 * big, big, |o, l| now.push((o, l)));
        }
        assert_eq!(now.len(), QUEUE_MAX_BYTES / big, "bounded by bytes too");
    }

    #[test]
    fn each_thread_issues_only_its_own() {
        let wb = WriteBacks::default();
        wb.queue(0, 64, |_, _| {});
        std::thread::scope(|s| {
            s.spawn(|| {
                wb.queue(128, 64, |_, _| {});
                assert_eq!(issued(&wb), vec![(128, 64)]);
            });
        });
        assert_eq!(issued(&wb), vec![(0, 64)]);
    }

    #[test]
    fn drop_time_issues_every_threads_queue() {
        let mut wb = WriteBacks::default();
        wb.queue(0, 64, |_, _| {});
        std::thread::scope(|s| {
            s.spawn(|| wb.queue(128, 64, |_, _| {}));
        });
        let mut all = Vec::new();
        wb.issue_all(|o, l| all.push((o, l)));
        all.sort();
        assert_eq!(all, vec![(0, 64), (128, 64)]);
    }
}
