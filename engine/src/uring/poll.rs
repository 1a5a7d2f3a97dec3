//! Busy polling a ring for its next completion, within a time budget.
//!
//! Why a module of its own: the loop's one hard rule (it ends when the
//! budget is spent, whatever the ring's flags say) is tested here against
//! a ring whose flags lie, which a real ring does only by a race.

use std::io;
use std::time::{Duration, Instant};

use super::NetRing;

/// Busy polling reads the clock once per this many looks at the ring.
/// Why: a clock read (the vDSO's, under a hypervisor's clock) costs more
/// than a look at the ring: reading it at every look, the clock took a
/// large share of a polling loop's samples. 32 looks with their PAUSEs take well
/// under a microsecond, which is all a poll's budget overshoots by.
const SPINS_PER_CLOCK: u32 = 32;

/// What polling needs of a ring.
pub(crate) trait Polled {
    /// Requests are queued and not yet submitted.
    fn queued(&mut self) -> bool;
    /// A completion is posted.
    fn posted(&mut self) -> bool;
    /// The kernel says it has work for the ring (IORING_SQ_TASKRUN), or
    /// holds completions back because the CQ was full
    /// (IORING_SQ_CQ_OVERFLOW); entering with GETEVENTS runs or flushes
    /// them.
    fn flagged(&mut self) -> bool;
    /// One `io_uring_enter` that submits what is queued and runs pending
    /// task work, not waiting.
    fn enter(&mut self) -> io::Result<()>;
}

impl Polled for NetRing {
    fn queued(&mut self) -> bool {
        !self.ring.submission().is_empty()
    }
    fn posted(&mut self) -> bool {
        !self.ring.completion().is_empty()
    }
    fn flagged(&mut self) -> bool {
        let sq = self.ring.submission();
        sq.taskrun() || sq.cq_overflow()
    }
    fn enter(&mut self) -> io::Result<()> {
        self.enter_nowait()
    }
}

/// Submit what is queued, then look for a completion without sleeping
/// for at most `budget`; returns whether one was posted. See
/// `NetRing::submit_and_poll` for why.
pub(crate) fn poll(ring: &mut impl Polled, budget: Duration) -> io::Result<bool> {
    let start = Instant::now();
    // Nothing queued: the loop below enters when the kernel has work for
    // the ring, so an enter now would be a syscall for nothing (one per
    // request at one connection).
    if ring.queued() {
        ring.enter()?;
    }
    let mut spins: u32 = 0;
    loop {
        if ring.posted() {
            return Ok(true);
        }
        if ring.flagged() {
            ring.enter()?;
            if ring.posted() {
                return Ok(true);
            }
            // The flag can outlive the work it announced: the kernel
            // queues task work first and raises IORING_SQ_TASKRUN after,
            // so a run between the two leaves the flag up over an empty
            // list, and no enter clears it until more work comes (seen on
            // 6.18: a loop entering without end after its last client
            // left, deaf to its stop flag). An enter that posted nothing
            // therefore still counts against the budget.
            if start.elapsed() >= budget {
                return Ok(false);
            }
            continue;
        }
        spins += 1;
        if spins.is_multiple_of(SPINS_PER_CLOCK) && start.elapsed() >= budget {
            return Ok(false);
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring whose flag is stuck up and whose enters post nothing (the
    /// state the kernel's race leaves), or that posts after `post_after`
    /// enters.
    struct Fake {
        flag: bool,
        enters: u32,
        post_after: Option<u32>,
    }

    impl Polled for Fake {
        fn queued(&mut self) -> bool {
            false
        }
        fn posted(&mut self) -> bool {
            self.post_after.is_some_and(|n| self.enters >= n)
        }
        fn flagged(&mut self) -> bool {
            self.flag
        }
        fn enter(&mut self) -> io::Result<()> {
            self.enters += 1;
            Ok(())
        }
    }

    #[test]
    fn a_stale_flag_does_not_outlast_the_budget() {
        // On a thread, so that a poll that never returns fails the test
        // instead of hanging the suite (as it hung CI before the fix).
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = Fake {
                flag: true,
                enters: 0,
                post_after: None,
            };
            let t = Instant::now();
            let found = poll(&mut r, Duration::from_millis(20)).unwrap();
            let _ = tx.send((found, t.elapsed(), r.enters));
        });
        let (found, took, enters) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a poll with a stale flag never returned");
        assert!(!found);
        assert!(took >= Duration::from_millis(20), "{took:?}");
        assert!(enters > 1, "each look with the flag up enters");
    }

    #[test]
    fn an_enter_that_posts_ends_the_poll() {
        let mut r = Fake {
            flag: true,
            enters: 0,
            post_after: Some(3),
        };
        assert!(poll(&mut r, Duration::from_secs(60)).unwrap());
        assert_eq!(r.enters, 3);
    }

    #[test]
    fn nothing_flagged_spins_without_entering() {
        let mut r = Fake {
            flag: false,
            enters: 0,
            post_after: None,
        };
        assert!(!poll(&mut r, Duration::from_millis(5)).unwrap());
        assert_eq!(r.enters, 0);
    }
}
