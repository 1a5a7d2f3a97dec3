//! Debug-build bookkeeping of bytes written but not yet durable, so that a
//! publish can assert that what it makes reachable was persisted first
//! (`Pm::debug_assert_persisted`). Compiled to nothing in release builds.

#[cfg(debug_assertions)]
mod imp {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Mutex;
    use std::thread::ThreadId;

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
        /// The parts of `[s, e)` the ranges cover.
        fn covered(&self, s: u64, e: u64) -> Vec<(u64, u64)> {
            self.0
                .range(..e)
                .rev()
                .take_while(|(_, &end)| end > s)
                .map(|(&a, &b)| (a.max(s), b.min(e)))
                .collect()
        }
        /// Remove and return the parts of `[s, e)` the ranges cover.
        fn take(&mut self, s: u64, e: u64) -> Vec<(u64, u64)> {
            let hit = self.covered(s, e);
            self.remove(s, e);
            hit
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
    /// as clwb does: the bytes written in them become flushed, by this
    /// thread, together with what other threads flushed in them and have
    /// not fenced (bytes of the line already durable stay durable whoever
    /// flushes the line again). A fence completes only the flushes of its own thread,
    /// as `sfence` orders only its own core's write-backs and `Pm::fence`
    /// issues only its own thread's queued ones (`writeback.rs`); the lines
    /// it completes are durable whoever else also flushed them.
    #[derive(Default, Debug)]
    pub struct Tracker {
        // (dirty: written, not flushed; unfenced: flushed, no fence since,
        // by the thread that flushed)
        state: Mutex<(Ranges, HashMap<ThreadId, Ranges>)>,
    }

    fn lines(off: u64, len: u64) -> (u64, u64) {
        (off & !63, (off + len + 63) & !63)
    }

    impl Tracker {
        pub fn dirty(&self, off: u64, len: u64) {
            self.state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .add(off, off + len);
        }
        pub fn flushed(&self, off: u64, len: u64) {
            let (s, e) = lines(off, len);
            let me = std::thread::current().id();
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            // What the lines hold now goes back with this write-back: the
            // bytes written and not flushed, and those other threads
            // flushed and have not fenced yet (durable at whichever of the
            // two fences comes first, so they stay theirs too).
            let (dirty, unfenced) = &mut *st;
            let mut written = dirty.take(s, e);
            for (t, r) in unfenced.iter() {
                if *t != me {
                    written.extend(r.covered(s, e));
                }
            }
            if written.is_empty() {
                return;
            }
            let mine = unfenced.entry(me).or_default();
            for (a, b) in written {
                mine.add(a, b);
            }
        }
        pub fn fenced(&self) {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let Some(mine) = st.1.remove(&std::thread::current().id()) else {
                return;
            };
            for theirs in st.1.values_mut() {
                for (&a, &b) in &mine.0 {
                    theirs.remove(a, b);
                }
            }
            st.1.retain(|_, r| !r.0.is_empty());
        }
        #[track_caller]
        pub fn assert_clean(&self, off: u64, len: u64) {
            let (s, e) = (off, off + len);
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((a, b)) = st.0.overlaps(s, e) {
                panic!("bytes {a}..{b} reached by a publish are written but not durable (never flushed)");
            }
            for (t, r) in &st.1 {
                if let Some((a, b)) = r.overlaps(s, e) {
                    panic!("bytes {a}..{b} reached by a publish are flushed but not durable (no fence yet on the flushing thread, {t:?})");
                }
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
