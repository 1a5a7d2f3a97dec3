//! DRAM-only allocation state: free inodes, free records, free packet-buffer
//! space. Nothing here is persisted: at mount it is rebuilt from what the
//! chains reach (what is reachable is allocated, everything else is free).
//!
//! Buffer space is reference-counted per buffer. A record holds one
//! reference on every buffer its slice touches, so split records (two
//! records into the same buffer, like sk_buff clones) and small payloads that
//! share a buffer keep it alive until the last record naming it is unlinked.

use std::collections::{BTreeMap, BTreeSet};

/// A slice of the packet-buffer region: `<buffer, buf_off, len>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    pub buffer: u32,
    pub buf_off: u32,
    pub len: u32,
}

impl Slice {
    /// Buffers `[first, last]` this slice touches.
    pub fn buffers(&self, bs: u32) -> (u32, u32) {
        let start = self.buf_off as u64;
        let end = start + self.len.max(1) as u64 - 1;
        (
            self.buffer + (start / bs as u64) as u32,
            self.buffer + (end / bs as u64) as u32,
        )
    }

    /// The sub-slice starting `skip` bytes in, `len` long, normalised so that
    /// `buf_off < bs`.
    pub fn sub(&self, skip: u32, len: u32, bs: u32) -> Slice {
        let pos = self.buf_off as u64 + skip as u64;
        Slice {
            buffer: self.buffer + (pos / bs as u64) as u32,
            buf_off: (pos % bs as u64) as u32,
            len,
        }
    }
}

#[derive(Debug)]
pub struct Alloc {
    bs: u32,
    /// Free inode numbers; popped from the end (lowest numbers last pushed).
    free_inodes: Vec<u32>,
    free_records: Vec<u64>,
    /// Per-buffer reference counts.
    refs: Vec<u32>,
    /// Free runs of whole buffers: start -> length, and (length, start).
    runs: BTreeMap<u32, u32>,
    by_len: BTreeSet<(u32, u32)>,
    free_buffers: u64,
    /// The buffer small payloads are currently packed into, and how much of
    /// it is used. The allocator holds one reference on it.
    small: Option<(u32, u32)>,
    /// Bytes handed out by `alloc_payload` and `alloc_run` since mount:
    /// a clock of client writes (see `Volume::payload_allocated_bytes`).
    allocated_bytes: u64,
}

/// Longest slice one record names. Large writes still need few records, and
/// a partial overwrite re-checksums at most this much of the record it
/// splits (a record of 512 MiB from one fallocate would cost a 512 MiB CRC
/// per small write into it).
pub const MAX_RECORD_BYTES: u32 = 256 << 10;

/// Payloads up to this fraction of a buffer share buffers.
pub fn is_small(len: u32, bs: u32) -> bool {
    len <= bs / 2
}

impl Alloc {
    /// Build from mount-time reachability: `inode_used[i]`, `record_used[r]`
    /// and per-buffer reference counts.
    pub fn rebuild(bs: u32, inode_used: &[bool], record_used: &[bool], refs: Vec<u32>) -> Alloc {
        let free_inodes = (1..inode_used.len() as u32)
            .rev()
            .filter(|&i| !inode_used[i as usize])
            .collect();
        let free_records = (1..record_used.len() as u64)
            .rev()
            .filter(|&r| !record_used[r as usize])
            .collect();
        let mut a = Alloc {
            bs,
            free_inodes,
            free_records,
            refs,
            runs: BTreeMap::new(),
            by_len: BTreeSet::new(),
            free_buffers: 0,
            small: None,
            allocated_bytes: 0,
        };
        let n = a.refs.len() as u32;
        let mut b = 0u32;
        while b < n {
            if a.refs[b as usize] == 0 {
                let start = b;
                while b < n && a.refs[b as usize] == 0 {
                    b += 1;
                }
                a.insert_run(start, b - start);
            } else {
                b += 1;
            }
        }
        a
    }

    fn insert_run(&mut self, start: u32, len: u32) {
        self.runs.insert(start, len);
        self.by_len.insert((len, start));
        self.free_buffers += len as u64;
    }

    fn remove_run(&mut self, start: u32) -> u32 {
        let len = self.runs.remove(&start).expect("run exists");
        self.by_len.remove(&(len, start));
        self.free_buffers -= len as u64;
        len
    }

    /// Return buffer `b` (refcount just reached 0) to the free runs, merging
    /// with its neighbours.
    fn free_buffer(&mut self, b: u32) {
        let mut start = b;
        let mut len = 1;
        if let Some((&ps, &pl)) = self.runs.range(..b).next_back() {
            if ps + pl == b {
                self.remove_run(ps);
                start = ps;
                len += pl;
            }
        }
        if self.runs.contains_key(&(b + 1)) {
            len += self.remove_run(b + 1);
        }
        self.insert_run(start, len);
    }

    pub fn alloc_inode(&mut self) -> Option<u32> {
        self.free_inodes.pop()
    }
    pub fn free_inode(&mut self, ino: u32) {
        self.free_inodes.push(ino);
    }
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_bytes
    }
    pub fn free_inode_count(&self) -> u64 {
        self.free_inodes.len() as u64
    }

    /// `n` free records from the free list's tail, in list order (inline
    /// for the few a small operation needs).
    pub fn alloc_records(&mut self, n: usize) -> Option<smallvec::SmallVec<[u64; 4]>> {
        if self.free_records.len() < n {
            return None;
        }
        let at = self.free_records.len() - n;
        Some(self.free_records.drain(at..).collect())
    }
    pub fn free_record(&mut self, r: u64) {
        self.free_records.push(r);
    }
    pub fn free_record_count(&self) -> u64 {
        self.free_records.len() as u64
    }

    /// Free whole buffers (the small buffer's unused tail is not counted).
    pub fn free_buffer_count(&self) -> u64 {
        self.free_buffers
    }

    /// Take a reference on every buffer `s` touches.
    pub fn take_ref(&mut self, s: Slice) {
        let (a, b) = s.buffers(self.bs);
        for i in a..=b {
            self.refs[i as usize] += 1;
        }
    }

    /// Drop a reference on every buffer `s` touches; free those that reach 0.
    pub fn drop_ref(&mut self, s: Slice) {
        let (a, b) = s.buffers(self.bs);
        for i in a..=b {
            let r = &mut self.refs[i as usize];
            debug_assert!(*r > 0, "buffer {i} refcount underflow");
            *r -= 1;
            if *r == 0 {
                self.free_buffer(i);
            }
        }
    }

    /// Carve `n` whole buffers off a free run, best fit. Returns the first.
    fn take_run(&mut self, n: u32) -> Option<u32> {
        let &(len, start) = self.by_len.range((n, 0)..).next()?;
        self.remove_run(start);
        if len > n {
            self.insert_run(start + n, len - n);
        }
        Some(start)
    }

    /// Space for a payload of `len` bytes, as one or more slices (one
    /// record each). Each returned slice carries one reference per buffer.
    /// Small payloads are packed into a shared buffer; larger ones take
    /// contiguous whole buffers, split over several runs only when no single
    /// run is long enough. `None` (nothing taken) if the space is not there.
    pub fn alloc_payload(&mut self, len: u64) -> Option<Vec<Slice>> {
        let bs = self.bs;
        if len == 0 {
            return Some(Vec::new());
        }
        let out = self.alloc_payload_inner(len, bs)?;
        self.allocated_bytes += len;
        Some(out)
    }

    fn alloc_payload_inner(&mut self, len: u64, bs: u32) -> Option<Vec<Slice>> {
        if len <= u32::MAX as u64 && is_small(len as u32, bs) {
            let len = len as u32;
            if let Some((b, used)) = self.small {
                if used + len <= bs {
                    self.small = Some((b, used + len));
                    let s = Slice {
                        buffer: b,
                        buf_off: used,
                        len,
                    };
                    self.take_ref(s);
                    return Some(vec![s]);
                }
            }
            let b = self.take_run(1)?;
            self.refs[b as usize] = 1; // the allocator's own hold
            if let Some((old, _)) = self.small.replace((b, len)) {
                self.drop_ref(Slice {
                    buffer: old,
                    buf_off: 0,
                    len: 1,
                });
            }
            let s = Slice {
                buffer: b,
                buf_off: 0,
                len,
            };
            self.take_ref(s);
            return Some(vec![s]);
        }
        let need = len.div_ceil(bs as u64);
        if need > self.free_buffers {
            return None;
        }
        let max_run = (MAX_RECORD_BYTES / bs).max(1);
        let mut out = Vec::new();
        let mut left = len;
        while left > 0 {
            let want = (left.div_ceil(bs as u64)).min(max_run as u64) as u32;
            let (start, got) = match self.take_run(want) {
                Some(s) => (s, want),
                None => {
                    // No run that long: take the longest there is.
                    let Some(&(l, s)) = self.by_len.iter().next_back() else {
                        for sl in out.drain(..) {
                            self.drop_ref(sl);
                        }
                        return None;
                    };
                    self.remove_run(s);
                    (s, l)
                }
            };
            let bytes = (got as u64 * bs as u64).min(left) as u32;
            let s = Slice {
                buffer: start,
                buf_off: 0,
                len: bytes,
            };
            for i in start..start + got {
                self.refs[i as usize] += 1;
            }
            out.push(s);
            left -= bytes as u64;
        }
        Some(out)
    }

    /// Up to `max_bufs` contiguous whole buffers (the longest free run if
    /// none is that long), as one slice holding one reference per buffer.
    pub fn alloc_run(&mut self, max_bufs: u32) -> Option<Slice> {
        let max_bufs = max_bufs.clamp(1, (MAX_RECORD_BYTES / self.bs).max(1));
        let (start, n) = match self.take_run(max_bufs) {
            Some(s) => (s, max_bufs),
            None => {
                let &(l, s) = self.by_len.iter().next_back()?;
                self.remove_run(s);
                (s, l)
            }
        };
        for i in start..start + n {
            self.refs[i as usize] += 1;
        }
        self.allocated_bytes += n as u64 * self.bs as u64;
        Some(Slice {
            buffer: start,
            buf_off: 0,
            len: n * self.bs,
        })
    }

    /// Give back slices from `alloc_payload` that were never used.
    pub fn release_payload(&mut self, slices: &[Slice]) {
        for s in slices {
            self.drop_ref(*s);
        }
    }

    /// The buffer small payloads are packed into (the allocator holds one
    /// reference on it).
    pub fn small_buffer(&self) -> Option<u32> {
        self.small.map(|s| s.0)
    }

    pub fn refcount(&self, b: u32) -> u32 {
        self.refs[b as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(nbuf: usize) -> Alloc {
        Alloc::rebuild(
            2048,
            &[true, true, false, false],
            &[true, false, false, false],
            vec![0; nbuf],
        )
    }

    #[test]
    fn small_payloads_share_and_free() {
        let mut a = fresh(16);
        let x = a.alloc_payload(100).unwrap()[0];
        let y = a.alloc_payload(100).unwrap()[0];
        assert_eq!(x.buffer, y.buffer);
        assert_eq!(y.buf_off, 100);
        assert_eq!(a.free_buffer_count(), 15);
        a.drop_ref(x);
        a.drop_ref(y);
        assert_eq!(
            a.free_buffer_count(),
            15,
            "allocator still holds the small buffer"
        );
        // Filling the small buffer moves on and releases the old one.
        for _ in 0..21 {
            let s = a.alloc_payload(1000).unwrap()[0];
            a.drop_ref(s);
        }
        assert_eq!(a.free_buffer_count(), 15);
    }

    #[test]
    fn large_payloads_are_contiguous_or_split_when_fragmented() {
        let mut a = fresh(16);
        let s = a.alloc_payload(5000).unwrap();
        assert_eq!(
            s,
            vec![Slice {
                buffer: 0,
                buf_off: 0,
                len: 5000
            }]
        );
        assert_eq!(a.free_buffer_count(), 13);
        // Fragment: hold every other buffer.
        let mut held = Vec::new();
        while let Some(v) = a.alloc_payload(2048) {
            held.push(v[0]);
        }
        assert_eq!(a.free_buffer_count(), 0);
        assert!(a.alloc_payload(1).is_none());
        for (i, h) in held.iter().enumerate() {
            if i % 2 == 0 {
                a.drop_ref(*h);
            }
        }
        let free = a.free_buffer_count();
        let parts = a.alloc_payload(3 * 2048).unwrap();
        assert!(
            parts.len() >= 2,
            "fragmented space gives several slices: {parts:?}"
        );
        assert_eq!(parts.iter().map(|p| p.len as u64).sum::<u64>(), 3 * 2048);
        assert_eq!(a.free_buffer_count(), free - 3);
        // Too big: nothing taken.
        let before = a.free_buffer_count();
        assert!(a.alloc_payload(1 << 30).is_none());
        assert_eq!(a.free_buffer_count(), before);
    }

    #[test]
    fn split_records_keep_buffers_alive() {
        let mut a = fresh(8);
        let s = a.alloc_payload(3 * 2048).unwrap()[0];
        let left = s.sub(0, 100, 2048);
        let right = s.sub(5000, 1144, 2048);
        a.take_ref(left);
        a.take_ref(right);
        a.drop_ref(s);
        assert_eq!(a.refcount(0), 1);
        assert_eq!(a.refcount(1), 0);
        assert_eq!(a.refcount(2), 1);
        assert_eq!(
            right,
            Slice {
                buffer: 2,
                buf_off: 904,
                len: 1144
            }
        );
        a.drop_ref(left);
        a.drop_ref(right);
        assert_eq!(a.free_buffer_count(), 8);
    }
}
