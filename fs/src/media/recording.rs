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

/// The state at one crash point.
#[derive(Debug)]
pub struct CrashPoint<'a> {
    /// 0 = before the first fence; n = just after the n-th fence.
    pub fence: usize,
    /// The last `Mark` seen before this point, if any.
    pub last_mark: Option<u64>,
    /// What is certainly on the media.
    pub durable: &'a [u8],
    /// Lines written but not (yet) durable, with their latest contents: any
    /// subset of them may also be on the media.
    pub inflight: Vec<(u64, [u8; 64])>,
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
    /// order. One pass over the log: O(log + image * points).
    pub fn for_each_point(&self, mut visit: impl FnMut(&CrashPoint<'_>)) {
        let mut cache = (*self.base).clone();
        let mut durable = (*self.base).clone();
        // Lines scheduled for write-back, with the contents at flush time.
        let mut scheduled: BTreeMap<u64, [u8; 64]> = BTreeMap::new();
        // Lines whose cache copy may differ from the durable copy.
        let mut unsynced: BTreeSet<u64> = BTreeSet::new();
        let mut last_mark = None;
        let mut fence = 0usize;
        fn point<'d>(
            fence: usize,
            last_mark: Option<u64>,
            durable: &'d [u8],
            cache: &[u8],
            unsynced: &BTreeSet<u64>,
        ) -> CrashPoint<'d> {
            let inflight = unsynced
                .iter()
                .filter_map(|&l| {
                    let s = (l * LINE) as usize;
                    let mut b = [0u8; 64];
                    b.copy_from_slice(&cache[s..s + 64]);
                    (durable[s..s + 64] != b).then_some((l, b))
                })
                .collect();
            CrashPoint {
                fence,
                last_mark,
                durable,
                inflight,
            }
        }
        visit(&point(0, last_mark, &durable, &cache, &unsynced));
        for e in &self.events {
            match e {
                Event::Store { off, data } => {
                    let (s, n) = (*off as usize, data.len());
                    cache[s..s + n].copy_from_slice(data);
                    let mut l = *off / LINE;
                    while l * LINE < off + n as u64 {
                        unsynced.insert(l);
                        l += 1;
                    }
                }
                Event::Flush { line } => {
                    let s = (*line * LINE) as usize;
                    let mut b = [0u8; 64];
                    b.copy_from_slice(&cache[s..s + 64]);
                    scheduled.insert(*line, b);
                }
                Event::Fence => {
                    for (l, b) in std::mem::take(&mut scheduled) {
                        let s = (l * LINE) as usize;
                        durable[s..s + 64].copy_from_slice(&b);
                        if cache[s..s + 64] == b {
                            unsynced.remove(&l);
                        }
                    }
                    fence += 1;
                    visit(&point(fence, last_mark, &durable, &cache, &unsynced));
                }
                Event::Mark(t) => last_mark = Some(*t),
            }
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
    }
}
