//! Debug-build bookkeeping of bytes written but not yet durable, so that a
//! publish can assert that what it makes reachable was persisted first
//! (`Pm::debug_assert_persisted`). Compiled to nothing in release builds.

#[cfg(debug_assertions)]
mod imp {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Disjoint half-open ranges keyed by start.
    #[derive(Default, Debug)]
    struct Ranges(BTreeMap<u64, u64>);

    impl Ranges {
        fn add(&mut self, mut s: u64, mut e: u64) {
            // Merge with any overlapping or touching ranges.
            let touching: Vec<(u64, u64)> = self
                .0
                .range(..=e)
                .rev()
                .take_while(|(_, &end)| end >= s)
                .map(|(&a, &b)| (a, b))
                .collect();
            for (a, b) in touching {
                self.0.remove(&a);
                s = s.min(a);
                e = e.max(b);
            }
            self.0.insert(s, e);
        }
        fn remove(&mut self, s: u64, e: u64) {
            let hit: Vec<(u64, u64)> = self
                .0
                .range(..e)
                .rev()
                .take_while(|(_, &end)| end > s)
                .map(|(&a, &b)| (a, b))
                .collect();
            for (a, b) in hit {
                self.0.remove(&a);
                if a < s {
                    self.0.insert(a, s);
                }
                if b > e {
                    self.0.insert(e, b);
                }
            }
        }
        fn overlaps(&self, s: u64, e: u64) -> Option<(u64, u64)> {
            self.0
                .range(..e)
                .next_back()
                .filter(|(_, &end)| end > s)
                .map(|(&a, &b)| (a, b))
        }
    }

    /// Dirty bytes are tracked exactly (so a neighbour's write into the
    /// same cache line is not mistaken for ours); a flush cleans whole lines,
    /// as clwb does. A fence on any thread completes every flush: lenient
    /// (sfence is per core), so it can miss a missing fence between threads
    /// but never reports one that is not missing.
    #[derive(Default, Debug)]
    pub struct Tracker {
        // (dirty: written, not flushed; unfenced: flushed, no fence since)
        state: Mutex<(Ranges, Ranges)>,
    }

    fn lines(off: u64, len: u64) -> (u64, u64) {
        (off & !63, (off + len + 63) & !63)
    }

    impl Tracker {
        pub fn dirty(&self, off: u64, len: u64) {
            let (s, e) = lines(off, len);
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .add(s, e);
        }
        pub fn flushed(&self, off: u64, len: u64) {
            let (s, e) = lines(off, len);
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.0.remove(s, e);
            st.1.add(s, e);
        }
        pub fn fenced(&self) {
            self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = Ranges::default();
        }
        #[track_caller]
        pub fn assert_clean(&self, off: u64, len: u64) {
            let (s, e) = (off, off + len);
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((a, b)) = st.0.overlaps(s, e) {
                panic!("bytes {a}..{b} reached by a publish are written but not durable (never flushed)");
            }
            if let Some((a, b)) = st.1.overlaps(s, e) {
                panic!("bytes {a}..{b} reached by a publish are flushed but not durable (no fence yet)");
            }
        }
    }
}

#[cfg(not(debug_assertions))]
mod imp {
    /// Nothing to track in release builds. A braced empty struct rather
    /// than a unit struct, so `Tracker::default()` reads the same in both
    /// builds (clippy flags `default()` on unit structs).
    #[derive(Default, Debug)]
    pub struct Tracker {}
    impl Tracker {
        #[inline]
        pub fn dirty(&self, _: u64, _: u64) {}
        #[inline]
        pub fn flushed(&self, _: u64, _: u64) {}
        #[inline]
        pub fn fenced(&self) {}
        #[inline]
        pub fn assert_clean(&self, _: u64, _: u64) {}
    }
}

pub use imp::Tracker;
