//! The file-descriptor limit: on the loops a connection costs one fd and
//! no thread, so RLIMIT_NOFILE is what bounds the connections.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Fds kept for everything but connections (the image, listeners, rings,
/// logs, the control socket, a mount).
pub const RESERVED_FDS: u64 = 64;

/// Raise the soft RLIMIT_NOFILE to the hard limit (as far as allowed).
/// Returns the soft limit in force afterwards.
pub fn raise_nofile() -> u64 {
    let lim = getrlimit(Resource::Nofile);
    let cur = lim.current.unwrap_or(u64::MAX);
    let max = lim.maximum;
    if lim.current.is_some() && max.is_none_or(|m| m > cur) {
        let want = Rlimit {
            current: max,
            maximum: max,
        };
        match setrlimit(Resource::Nofile, want) {
            Ok(()) => {}
            Err(e) => tracing::warn!("cannot raise RLIMIT_NOFILE from {cur}: {e}"),
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Connections the loops take with `nofile` fds: one fd each.
pub fn connection_limit(nofile: u64) -> usize {
    nofile
        .saturating_sub(RESERVED_FDS)
        .clamp(1, usize::MAX as u64) as usize
}

/// The grain in which a session's DRAM is charged to the shared budget:
/// the shared counter moves once per this much growth or shrinkage, not
/// per request.
pub const DRAM_GRAIN: u64 = 16 << 10;

/// A session's share of the loops' DRAM budget (`LoopShared::dram`,
/// `Config::max_inflight_bytes`): what it holds beyond its uncounted
/// `free` bytes, charged in grains. Checking costs a compare while the
/// session's DRAM stays within what it already holds.
#[derive(Debug, Default)]
pub struct DramCharge {
    /// Bytes charged to the shared counter.
    held: u64,
}

impl DramCharge {
    /// Bring the charge in line with `used` bytes of DRAM (`free` of them
    /// uncounted, `budget` the shared limit). False: more was needed and
    /// the budget has no room (what was held stays held).
    #[inline]
    pub fn account(
        &mut self,
        shared: &std::sync::atomic::AtomicU64,
        used: u64,
        free: u64,
        budget: u64,
    ) -> bool {
        let want = used.saturating_sub(free);
        if want <= self.held && want + 2 * DRAM_GRAIN > self.held {
            return true;
        }
        self.slow(shared, want, budget)
    }

    #[cold]
    fn slow(&mut self, shared: &std::sync::atomic::AtomicU64, want: u64, budget: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let target = want.div_ceil(DRAM_GRAIN) * DRAM_GRAIN;
        if target < self.held {
            shared.fetch_sub(self.held - target, Relaxed);
            self.held = target;
            return true;
        }
        let more = target - self.held;
        let before = shared.fetch_add(more, Relaxed);
        if before + more > budget {
            shared.fetch_sub(more, Relaxed);
            return false;
        }
        self.held = target;
        true
    }

    /// Give everything back (the session ends).
    pub fn release(&mut self, shared: &std::sync::atomic::AtomicU64) {
        if self.held > 0 {
            shared.fetch_sub(self.held, std::sync::atomic::Ordering::Relaxed);
            self.held = 0;
        }
    }

    /// Bytes charged now.
    pub fn held(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn dram_is_charged_in_grains_within_the_budget() {
        let shared = AtomicU64::new(0);
        let (free, budget) = (4096, 3 * DRAM_GRAIN);
        let mut a = DramCharge::default();
        // Within the free allowance: nothing charged.
        assert!(a.account(&shared, 4000, free, budget));
        assert_eq!(shared.load(Ordering::Relaxed), 0);
        assert!(a.account(&shared, free + 1, free, budget));
        assert_eq!(shared.load(Ordering::Relaxed), DRAM_GRAIN);
        let mut b = DramCharge::default();
        assert!(b.account(&shared, free + 2 * DRAM_GRAIN, free, budget));
        assert_eq!(shared.load(Ordering::Relaxed), 3 * DRAM_GRAIN);
        // No room left: refused, nothing more charged.
        assert!(!a.account(&shared, free + DRAM_GRAIN + 1, free, budget));
        assert_eq!(shared.load(Ordering::Relaxed), 3 * DRAM_GRAIN);
        // Shrinking far enough gives grains back.
        assert!(b.account(&shared, 0, free, budget));
        assert_eq!(b.held(), 0);
        assert!(a.account(&shared, free + DRAM_GRAIN + 1, free, budget));
        a.release(&shared);
        assert_eq!(shared.load(Ordering::Relaxed), 0);
    }
}
