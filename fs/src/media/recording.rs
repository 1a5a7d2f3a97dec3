//! The recording backend's log, and the crash images it can produce.
//!
//! Model (as Chipmunk and Yat use for PM file systems): a store changes the
//! CPU cache's copy of a line; a flush (clwb, or a non-temporal store)
//! schedules the line's current contents for write-back; a fence makes every
//! scheduled write-back durable. At a crash, the media holds everything made
//! durable, and *any subset* of the lines that were written since they were
//! last made durable may also have reached it (evicted by the cache on its
//! own) with their latest contents.

use std::collections::{BTreeMap, BTreeSet};

const LINE: u64 = 64;

#[derive(Clone, Debug)]
pub enum Event {
    Store { off: u64, data: Box<[u8]> },
    Flush { line: u64 },
    Fence,
    Mark(u64),
}

#[derive(Debug)]
pub(crate) struct Recorder {
    base: std::sync::Arc<Vec<u8>>,
    events: Vec<Event>,
}

impl Recorder {
    pub fn new(image: Vec<u8>) -> Recorder {
        Recorder {
            base: std::sync::Arc::new(image),
            events: Vec::new(),
        }
    }
    pub fn store(&mut self, off: u64, data: &[u8]) {
        self.events.push(Event::Store {
            off,
            data: data.into(),
        });
    }
    pub fn flush(&mut self, off: u64, len: u64) {
        let mut l = off / LINE;
        while l * LINE < off + len {
            self.events.push(Event::Flush { line: l });
            l += 1;
        }
    }
    pub fn fence(&mut self) {
        self.events.push(Event::Fence);
    }
    pub fn mark(&mut self, tag: u64) {
        self.events.push(Event::Mark(tag));
    }
    pub fn log(&self) -> CrashLog {
        CrashLog {
            base: self.base.clone(),
            events: self.events.clone(),
        }
    }
}

/// A recorded run: the image it started from and every event since.
#[derive(Clone, Debug)]
pub struct CrashLog {
    base: std::sync::Arc<Vec<u8>>,
    pub events: Vec<Event>,
}

/// The state at one crash instant.
#[derive(Debug)]
pub struct CrashPoint<'a> {
    /// Fences completed before this instant.
    pub fence: usize,
    /// Just before fence `fence + 1` (true), or just after fence `fence`.
    /// Before a fence, every line written since the last fence may or may
    /// not be on the media, flushed or not: nothing orders them yet. That
    /// is where a missing fence between a commit record and what it commits
    /// shows.
    pub pre: bool,
    /// The last `Mark` seen before this point, if any.
    pub last_mark: Option<u64>,
    /// What is certainly on the media.
    pub durable: &'a [u8],
    /// Lines written but not (yet) durable, with their latest contents, in
    /// line order: any subset of them may also be on the media.
    pub inflight: Vec<(u64, [u8; 64])>,
    /// The image the log started from.
    base: &'a [u8],
    /// Durable lines that differ from `base`.
    diff: &'a BTreeMap<u64, [u8; 64]>,
}

impl CrashPoint<'_> {
    /// The image with the durable state plus the chosen in-flight lines
    /// (indices into `inflight`).
    pub fn image_with(&self, chosen: &[usize]) -> Vec<u8> {
        let mut img = self.durable.to_vec();
        for &i in chosen {
            let (line, bytes) = &self.inflight[i];
            let s = (*line * LINE) as usize;
            img[s..s + 64].copy_from_slice(bytes);
        }
        img
    }

    /// A torn variant: only the in-flight lines at even positions of each
    /// contiguous run (large writes half on the media).
    pub fn torn_image(&self) -> Vec<u8> {
        let chosen: Vec<usize> = (0..self.inflight.len()).filter(|i| i % 2 == 0).collect();
        self.image_with(&chosen)
    }

    /// A hash of `image_with(chosen)` over the lines that differ from the
    /// starting image: equal for equal images of logs that share that
    /// starting image, so explorers can skip images already checked.
    pub fn key(&self, chosen: &[usize]) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut lines: BTreeMap<u64, &[u8; 64]> = self.diff.iter().map(|(l, b)| (*l, b)).collect();
        for &i in chosen {
            let (l, b) = &self.inflight[i];
            lines.insert(*l, b);
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (l, b) in lines {
            let s = (l * LINE) as usize;
            if &self.base[s..s + 64] != b.as_slice() {
                l.hash(&mut h);
                b.hash(&mut h);
            }
        }
        h.finish()
    }
}

impl CrashLog {
    pub fn fence_count(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Fence))
            .count()
    }

    /// The final cache view (what a clean run ends with).
    pub fn final_image(&self) -> Vec<u8> {
        let mut img = (*self.base).clone();
        for e in &self.events {
            if let Event::Store { off, data } = e {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        img
    }

    /// Visit the crash point before the first fence and after every fence, in
    /// order (the instants just before each fence are left out; see
    /// [`CrashLog::for_each_instant`]).
    pub fn for_each_point(&self, mut visit: impl FnMut(&CrashPoint<'_>)) {
        walk(&self.base, &self.events, |p| {
            if !p.pre {
                visit(p)
            }
            true
        })
    }

    /// Visit every crash instant: the start, then just before and just
    /// after every fence. `visit` returns false to stop.
    pub fn for_each_instant(&self, visit: impl FnMut(&CrashPoint<'_>) -> bool) {
        walk(&self.base, &self.events, visit)
    }
}

/// Every crash instant of a log of `events` that started from `base`: the
/// start, then just before and just after every fence. One pass over the
/// log: O(log + image * points). `visit` returns false to stop.
pub fn walk(base: &[u8], events: &[Event], mut visit: impl FnMut(&CrashPoint<'_>) -> bool) {
    let mut cache = base.to_vec();
    let mut durable = base.to_vec();
    // Lines scheduled for write-back, with the contents at flush time.
    let mut scheduled: BTreeMap<u64, [u8; 64]> = BTreeMap::new();
    // Lines whose cache copy may differ from the durable copy.
    let mut dirty: BTreeSet<u64> = BTreeSet::new();
    let mut diff: BTreeMap<u64, [u8; 64]> = BTreeMap::new();
    let mut mark = None;
    let mut fence = 0usize;
    let line_of = |img: &[u8], l: u64| -> [u8; 64] {
        let s = (l * LINE) as usize;
        let mut b = [0u8; 64];
        b.copy_from_slice(&img[s..s + 64]);
        b
    };
    // Lines (sorted, unique) whose cache contents differ from the media.
    let inflight = |lines: BTreeSet<u64>, cache: &[u8], durable: &[u8]| -> Vec<(u64, [u8; 64])> {
        lines
            .into_iter()
            .filter_map(|l| {
                let c = line_of(cache, l);
                (c != line_of(durable, l)).then_some((l, c))
            })
            .collect()
    };
    let start = CrashPoint {
        fence,
        pre: false,
        last_mark: mark,
        durable: &durable,
        inflight: Vec::new(),
        base,
        diff: &diff,
    };
    if !visit(&start) {
        return;
    }
    for e in events {
        match e {
            Event::Store { off, data } => {
                let (s, n) = (*off as usize, data.len());
                cache[s..s + n].copy_from_slice(data);
                let mut l = *off / LINE;
                while l * LINE < off + n as u64 {
                    dirty.insert(l);
                    l += 1;
                }
            }
            Event::Flush { line } => {
                scheduled.insert(*line, line_of(&cache, *line));
            }
            Event::Fence => {
                let lines = dirty.iter().chain(scheduled.keys()).copied().collect();
                let before = CrashPoint {
                    fence,
                    pre: true,
                    last_mark: mark,
                    durable: &durable,
                    inflight: inflight(lines, &cache, &durable),
                    base,
                    diff: &diff,
                };
                if !visit(&before) {
                    return;
                }
                for (l, b) in std::mem::take(&mut scheduled) {
                    let s = (l * LINE) as usize;
                    durable[s..s + 64].copy_from_slice(&b);
                    if base[s..s + 64] == b {
                        diff.remove(&l);
                    } else {
                        diff.insert(l, b);
                    }
                }
                dirty.retain(|&l| line_of(&cache, l) != line_of(&durable, l));
                fence += 1;
                let after = CrashPoint {
                    fence,
                    pre: false,
                    last_mark: mark,
                    durable: &durable,
                    inflight: inflight(dirty.clone(), &cache, &durable),
                    base,
                    diff: &diff,
                };
                if !visit(&after) {
                    return;
                }
            }
            Event::Mark(t) => mark = Some(*t),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::media::Pm;

    #[test]
    fn crash_points_follow_the_persistence_model() {
        let pm = Pm::recording(vec![0u8; 4096]);
        pm.write(0, &[1; 64]); // line 0: stored, never flushed
        pm.write(64, &[2; 64]); // line 1: stored and persisted
        pm.persist(64, 64);
        pm.publish_u64(128, 7); // line 2: published
        let log = pm.crash_log().unwrap();
        assert_eq!(log.fence_count(), 2);
        let mut seen = Vec::new();
        log.for_each_point(|p| {
            seen.push((
                p.fence,
                p.durable[64],
                p.durable[128],
                p.inflight.iter().map(|x| x.0).collect::<Vec<_>>(),
            ));
            if p.fence == 2 {
                // Line 0 may or may not have made it.
                assert_eq!(p.image_with(&[0])[0], 1);
                assert_eq!(p.image_with(&[])[0], 0);
            }
        });
        assert_eq!(
            seen,
            vec![(0, 0, 0, vec![]), (1, 2, 0, vec![0]), (2, 2, 7, vec![0])],
            "durable lines and in-flight sets at each fence"
        );
        assert_eq!(log.final_image()[128], 7);
        // With the instants before each fence: there, every line written
        // since the last fence is in flight, flushed or not.
        let mut all = Vec::new();
        log.for_each_instant(|p| {
            all.push((
                p.fence,
                p.pre,
                p.inflight.iter().map(|x| x.0).collect::<Vec<_>>(),
            ));
            true
        });
        assert_eq!(
            all,
            vec![
                (0, false, vec![]),
                (0, true, vec![0, 1]),
                (1, false, vec![0]),
                (1, true, vec![0, 2]),
                (2, false, vec![0]),
            ]
        );
        // Stopping early, and images keyed by content.
        let mut keys = Vec::new();
        log.for_each_instant(|p| {
            keys.push((p.key(&[]), p.image_with(&[])));
            keys.len() < 3
        });
        assert_eq!(keys.len(), 3);
        assert_eq!(
            keys[0].0, keys[1].0,
            "nothing durable changed before fence 1"
        );
        assert_ne!(keys[1].0, keys[2].0, "fence 1 made line 1 durable");
        assert_ne!(keys[1].1, keys[2].1);
    }
}
