//! The image, mapped read-only: every access to its bytes, and all of the
//! crate's `unsafe` but the lending of held bytes (`lend`).
//!
//! # What may happen to these bytes, and how they are read
//! The holder (another process) writes the image while this process maps
//! it. So no Rust reference to the mapping's bytes is ever made here:
//! - metadata (records, inode words, live words) is read as aligned 8-byte
//!   atomic loads: every structure a reader parses is 8-aligned in the
//!   image, so these loads race with nothing the memory model forbids;
//! - file bytes are copied out with `ptr::copy_nonoverlapping` from the
//!   raw mapping into memory of this process. That copy can race with the
//!   holder reusing the bytes; it is the seqlock pattern (the reader
//!   validates its section after the copy and throws the copy away if
//!   anything moved, docs/DIRECT.md), whose copy Rust has no atomic form
//!   of yet (the atomic memcpy RFC, 3301). Nothing in this crate looks at
//!   copied bytes before the section that made them is validated, except
//!   to checksum them, and no byte copied is ever used as an index or a
//!   length; and the source is memory shared with another process, which
//!   the compiler cannot assume anything about.
//!
//! The mapping is `PROT_READ`: a reader can never damage the image.

#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};

/// What backs the mapping (held for its Drop: the unmap, or the free).
#[allow(dead_code)]
enum Backing {
    /// An image file mapped read-only and shared (what the holder writes
    /// shows through).
    File(memmap2::MmapRaw),
    /// A copy in this process's memory (tests, snapshots of an image).
    Owned(Box<[AtomicU64]>),
}

/// The image's bytes, read-only, with bounds-checked loads and copies.
pub(crate) struct Mapping {
    base: *const u8,
    len: u64,
    _backing: Backing,
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping").field("len", &self.len).finish()
    }
}

// SAFETY: the mapping is read-only in this process and every access is a
// bounds-checked atomic load or a raw copy (see the module's contract), so
// sharing it between threads adds nothing a single thread could not do.
unsafe impl Send for Mapping {}
// SAFETY: as for Send.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `file` read-only, shared. `file` may be opened read-only.
    pub fn map_file(file: &File) -> std::io::Result<Mapping> {
        let map = memmap2::MmapOptions::new().map_raw_read_only(file)?;
        Ok(Mapping {
            base: map.as_ptr(),
            len: map.len() as u64,
            _backing: Backing::File(map),
        })
    }

    /// A private copy of `bytes` (an image snapshot).
    pub fn from_bytes(bytes: &[u8]) -> Mapping {
        let words: Box<[AtomicU64]> = bytes
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                AtomicU64::new(u64::from_ne_bytes(w))
            })
            .collect();
        Mapping {
            base: words.as_ptr() as *const u8,
            len: bytes.len() as u64,
            _backing: Backing::Owned(words),
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether `[off, off+len)` lies inside the mapping.
    pub fn contains(&self, off: u64, len: u64) -> bool {
        off.checked_add(len).is_some_and(|e| e <= self.len)
    }

    /// The little-endian 8-byte word at `off` (8-aligned, inside), loaded
    /// atomically with Acquire; `None` outside or unaligned.
    pub fn load_u64(&self, off: u64) -> Option<u64> {
        if !off.is_multiple_of(8) || !self.contains(off, 8) {
            return None;
        }
        // SAFETY: in bounds and 8-aligned (checked; the base is page
        // aligned, or an AtomicU64 array), so a valid AtomicU64 for the
        // mapping's lifetime; every access to it in this process is atomic.
        let a = unsafe { &*(self.base.add(off as usize) as *const AtomicU64) };
        Some(u64::from_le(a.load(Ordering::Acquire)))
    }

    /// `out.len()` bytes at `off` (8-aligned, `out.len()` a multiple of 8)
    /// as a sequence of atomic word loads: a structure's bytes, each word
    /// as it was at some moment. False outside or unaligned.
    pub fn load_words(&self, off: u64, out: &mut [u8]) -> bool {
        if !out.len().is_multiple_of(8) || !off.is_multiple_of(8) {
            return false;
        }
        if !self.contains(off, out.len() as u64) {
            return false;
        }
        for (k, chunk) in out.chunks_exact_mut(8).enumerate() {
            let w = self.load_u64(off + 8 * k as u64).expect("checked above");
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        true
    }

    /// Copy `dst.len()` bytes at `off` into `dst` (see the module's
    /// contract: the copy may be torn, and is validated by the caller's
    /// section before it counts). False outside the mapping.
    pub fn copy_out(&self, off: u64, dst: &mut [u8]) -> bool {
        if !self.contains(off, dst.len() as u64) {
            return false;
        }
        // SAFETY: the source range is inside the mapping (checked), which
        // lives as long as `self`; `dst` is a distinct allocation of this
        // process (a `&mut` cannot alias the read-only mapping). The copy
        // may race with the holder's writes: see the module's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(off as usize), dst.as_mut_ptr(), dst.len())
        };
        true
    }

    /// The mapping's bytes `[off, off+len)` as a slice.
    ///
    /// # Safety
    /// The range must be inside the mapping, and nothing may write those
    /// bytes for as long as the slice lives: the holder holds them for
    /// this reader (`lend`), or no writer can exist (the reader holds the
    /// image's shared lock).
    pub unsafe fn slice(&self, off: u64, len: usize) -> &[u8] {
        debug_assert!(self.contains(off, len as u64));
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(self.base.add(off as usize), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_and_copies_are_bounds_checked() {
        let bytes: Vec<u8> = (0..100u8).collect();
        let m = Mapping::from_bytes(&bytes);
        assert_eq!(m.len(), 100);
        assert_eq!(
            m.load_u64(8),
            Some(u64::from_le_bytes(bytes[8..16].try_into().unwrap()))
        );
        assert_eq!(m.load_u64(3), None, "unaligned");
        assert_eq!(m.load_u64(96), None, "past the end");
        let mut out = [0u8; 16];
        assert!(m.load_words(16, &mut out));
        assert_eq!(&out[..], &bytes[16..32]);
        assert!(!m.load_words(88, &mut out));
        let mut c = [0u8; 7];
        assert!(m.copy_out(93, &mut c));
        assert_eq!(&c[..], &bytes[93..100]);
        assert!(!m.copy_out(94, &mut c));
        assert!(!m.copy_out(u64::MAX - 2, &mut c));
    }
}
