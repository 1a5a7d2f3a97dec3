//! Remote records through the Volume API, with an in-memory object source
//! (the tier engine's tests run the same paths against real Garage).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::tests::{fresh, reopen};
use super::*;

/// Objects in DRAM; `corrupt` flips a byte of every fetch.
#[derive(Debug, Default)]
struct MemStore {
    objs: Mutex<HashMap<u64, Vec<u8>>>,
    corrupt: std::sync::atomic::AtomicBool,
    fetches: std::sync::atomic::AtomicU64,
}

impl RemoteSource for MemStore {
    fn fetch(
        &self,
        _ino: u64,
        obj: u64,
        off: u64,
        len: u32,
    ) -> std::result::Result<RemoteBytes, String> {
        self.fetches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let o = self.objs.lock().unwrap();
        let b = o
            .get(&obj)
            .ok_or_else(|| format!("object {obj} not found"))?;
        let end = off as usize + len as usize;
        if end > b.len() {
            return Err(format!("object {obj} is {} bytes, asked to {end}", b.len()));
        }
        let mut v = b[off as usize..end].to_vec();
        if self.corrupt.load(std::sync::atomic::Ordering::Relaxed) {
            v[0] ^= 1;
        }
        Ok(RemoteBytes::new(v))
    }
}

/// Tier file `ino` out into object `obj` (its extents back to back).
fn tier(v: &Volume, store: &MemStore, ino: u64, obj: u64) -> SwitchReport {
    let out = v.tier_begin(ino, u64::MAX).unwrap();
    let mut body = Vec::new();
    let mut placed = Vec::new();
    for k in 0..out.extents().len() {
        placed.push((obj, body.len() as u64));
        body.extend_from_slice(out.bytes(k).unwrap());
    }
    store.objs.lock().unwrap().insert(obj, body);
    v.tier_switch(out, &placed).unwrap()
}

fn data(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}

#[test]
fn tier_out_frees_pm_reads_back_and_survives_reopen() {
    let v = fresh(32 << 20);
    let store = Arc::new(MemStore::default());
    assert!(v.set_remote_source(store.clone()));
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    let want = data(3 << 20, 1);
    v.write(f.ino, 0, &want).unwrap();
    let digest = v.content_digest(f.ino).unwrap();
    let chain_before = v.chain(f.ino).unwrap();
    let free_before = v.statfs().blocks_free;
    let rep = tier(&v, &store, f.ino, 7);
    assert_eq!(rep.bytes, 3 << 20);
    assert_eq!(rep.records as usize, chain_before.len());
    v.check_invariants().unwrap();
    assert!(v.statfs().blocks_free > free_before, "PM space freed");
    // The chain keeps everything but where the bytes are.
    let chain = v.chain(f.ino).unwrap();
    for (a, b) in chain.iter().zip(&chain_before) {
        assert_eq!(
            (a.file_off, a.len, a.payload_crc, a.seq, a.timestamp_ns),
            (b.file_off, b.len, b.payload_crc, b.seq, b.timestamp_ns)
        );
        assert_eq!(a.remote.map(|r| r.0), Some(7));
    }
    assert_eq!(v.content_digest(f.ino).unwrap().crc32c, digest.crc32c);
    assert_eq!(v.read(f.ino, 0, 4 << 20).unwrap(), want);
    assert_eq!(
        v.read(f.ino, 1_000_000, 77).unwrap(),
        &want[1_000_000..1_000_077]
    );
    assert_eq!(v.remote_objects()[&7].bytes, 3 << 20);
    assert!(v
        .superblock()
        .incompat
        .contains(pktfs_layout::superblock::Features::REMOTE_RECORDS));
    // Reopen: the records are remote on the media; the liveness is rebuilt.
    let v = reopen(v);
    v.check_invariants().unwrap();
    assert_eq!(v.remote_objects()[&7].bytes, 3 << 20);
    // Without a source the bytes cannot come back: EIO, never zeros.
    let e = v.read(f.ino, 0, 10).unwrap_err();
    assert!(matches!(e, FsError::Remote(_)), "{e}");
    assert_eq!(e.errno(), libc::EIO);
    v.set_remote_source(store.clone());
    assert_eq!(v.read(f.ino, 0, 4 << 20).unwrap(), want);
}

#[test]
fn a_wrong_byte_from_the_store_is_eio_never_data() {
    let v = fresh(16 << 20);
    let store = Arc::new(MemStore::default());
    v.set_remote_source(store.clone());
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &data(100_000, 2)).unwrap();
    tier(&v, &store, f.ino, 1);
    store
        .corrupt
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let e = v.read(f.ino, 10, 10).unwrap_err();
    assert!(matches!(e, FsError::Damaged { .. }), "{e}");
    assert!(v.tx_hold(f.ino, 0, 100).is_err());
    // A write that splits a record needs its bytes: refused, file unchanged.
    assert!(v.write(f.ino, 50, b"x").is_err());
    store
        .corrupt
        .store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(v.read(f.ino, 0, 200_000).unwrap(), data(100_000, 2));
    v.check_invariants().unwrap();
}

#[test]
fn writes_truncates_copies_and_unlinks_of_tiered_files() {
    let v = fresh(32 << 20);
    let store = Arc::new(MemStore::default());
    v.set_remote_source(store.clone());
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    let mut want = data(1 << 20, 3);
    v.write(f.ino, 0, &want).unwrap();
    tier(&v, &store, f.ino, 5);
    // Overwrite in the middle of a remote record: remnants stay remote.
    v.write(f.ino, 1000, b"hello").unwrap();
    want[1000..1005].copy_from_slice(b"hello");
    assert_eq!(v.read(f.ino, 0, 2 << 20).unwrap(), want);
    let chain = v.chain(f.ino).unwrap();
    assert!(chain[0].remote.is_some() && chain[1].remote.is_none() && chain[2].remote.is_some());
    v.check_invariants().unwrap();
    // Truncate into a remote record.
    v.setattr(
        f.ino,
        &SetAttr {
            size: Some(700_001),
            ..Default::default()
        },
    )
    .unwrap();
    want.truncate(700_001);
    assert_eq!(v.read(f.ino, 0, 2 << 20).unwrap(), want);
    // copy_file_range of a remote range: shares the object slice.
    let g = v.create(v.root(), b"g", 0o644, 0, 0).unwrap();
    assert_eq!(
        v.copy_range(f.ino, 300_000, g.ino, 0, 300_000).unwrap(),
        300_000
    );
    assert_eq!(v.read(g.ino, 0, 1 << 20).unwrap(), &want[300_000..600_000]);
    let live = v.remote_objects()[&5];
    // A transmit hold carries the fetched bytes.
    let h = v.tx_hold(g.ino, 10, 1000).unwrap();
    assert!(h.segs().iter().all(|s| matches!(s, TxSeg::Fetched { .. })));
    let mut got = Vec::new();
    for s in h.segs() {
        if let TxSeg::Fetched { buf, skip, len } = *s {
            got.extend_from_slice(h.fetched(buf, skip, len));
        }
    }
    assert_eq!(got, &want[300_010..301_010]);
    drop(h);
    let v = reopen(v);
    v.set_remote_source(store.clone());
    v.check_invariants().unwrap();
    assert_eq!(v.remote_objects()[&5], live);
    assert_eq!(v.read(f.ino, 0, 2 << 20).unwrap(), want);
    // Unlinking both files leaves the object with no live record.
    v.unlink(v.root(), b"f").unwrap();
    v.unlink(v.root(), b"g").unwrap();
    assert!(v.remote_objects().is_empty());
    v.check_invariants().unwrap();
}

#[test]
fn a_switch_skips_records_changed_meanwhile() {
    let v = fresh(16 << 20);
    let store = Arc::new(MemStore::default());
    v.set_remote_source(store.clone());
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    let mut want = data(600_000, 4);
    v.write(f.ino, 0, &want).unwrap();
    let out = v.tier_begin(f.ino, u64::MAX).unwrap();
    let n = out.extents().len();
    assert!(n >= 3);
    let mut body = Vec::new();
    let mut placed = Vec::new();
    for k in 0..n {
        placed.push((9, body.len() as u64));
        body.extend_from_slice(out.bytes(k).unwrap());
    }
    store.objs.lock().unwrap().insert(9, body);
    // The second record is rewritten while the upload is in flight: its
    // held bytes stay intact (the hold references them), and the switch
    // leaves the new record alone.
    let second = out.extents()[1].file_off;
    v.write(f.ino, second + 10, b"new").unwrap();
    want[second as usize + 10..second as usize + 13].copy_from_slice(b"new");
    let rep = v.tier_switch(out, &placed).unwrap();
    assert_eq!(rep.skipped, 1);
    assert_eq!(rep.records as usize, n - 1);
    assert_eq!(v.read(f.ino, 0, 1 << 20).unwrap(), want);
    v.check_invariants().unwrap();
    assert_eq!(v.stray_buffer_refs(), 0);
    let v = reopen(v);
    v.set_remote_source(store);
    assert_eq!(v.read(f.ino, 0, 1 << 20).unwrap(), want);
}

#[test]
fn recall_brings_bytes_back_and_link_remote_rebuilds_a_file() {
    let v = fresh(16 << 20);
    let store = Arc::new(MemStore::default());
    v.set_remote_source(store.clone());
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    let want = data(700_000, 5);
    v.write(f.ino, 0, &want).unwrap();
    tier(&v, &store, f.ino, 3);
    let before = v.chain(f.ino).unwrap();
    // Rebuild the same file elsewhere from its remote records alone.
    let g = v.create(v.root(), b"g", 0o644, 0, 0).unwrap();
    let ext: Vec<RemoteExtent> = before
        .iter()
        .map(|c| RemoteExtent {
            file_off: c.file_off,
            obj: c.remote.unwrap().0,
            obj_off: c.remote.unwrap().1,
            len: c.len,
            crc32c: c.payload_crc,
            seq: c.seq,
            timestamp_ns: c.timestamp_ns,
            flags: 0,
        })
        .collect();
    v.link_remote(g.ino, &ext).unwrap();
    assert_eq!(v.getattr(g.ino).unwrap().size, 700_000);
    assert_eq!(v.read(g.ino, 0, 1 << 20).unwrap(), want);
    // Overlapping extents are refused, nothing changes.
    let mut bad = ext.clone();
    bad[1].file_off -= 1;
    assert!(v.link_remote(g.ino, &bad).is_err());
    // Recall: back in PM, same metadata, no fetch needed afterwards.
    assert_eq!(v.tier_recall(f.ino, u64::MAX).unwrap(), 700_000);
    let after = v.chain(f.ino).unwrap();
    assert!(after.iter().all(|c| c.remote.is_none()));
    assert_eq!(
        after
            .iter()
            .map(|c| (c.file_off, c.payload_crc, c.seq))
            .collect::<Vec<_>>(),
        before
            .iter()
            .map(|c| (c.file_off, c.payload_crc, c.seq))
            .collect::<Vec<_>>()
    );
    let n = store.fetches.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(v.read(f.ino, 0, 1 << 20).unwrap(), want);
    assert_eq!(store.fetches.load(std::sync::atomic::Ordering::Relaxed), n);
    v.check_invariants().unwrap();
    let v = reopen(v);
    v.check_invariants().unwrap();
    assert_eq!(v.remote_objects()[&3].records as usize, before.len());
}

#[test]
fn a_record_read_in_parts_is_fetched_and_checked_once() {
    use std::sync::atomic::Ordering::Relaxed;
    let v = fresh(16 << 20);
    let store = Arc::new(MemStore::default());
    v.set_remote_source(store.clone());
    let f = v.create(v.root(), b"f", 0o644, 0, 0).unwrap();
    let want = data(1 << 20, 5);
    v.write(f.ino, 0, &want).unwrap();
    tier(&v, &store, f.ino, 2);
    let records = v.chain(f.ino).unwrap().len() as u64;
    assert!(records >= 4, "1 MiB is several records ({records})");
    // As the kernel reads a FUSE file sequentially: in parts smaller than
    // a record. Each record is fetched (and checked) once, not per part.
    let n0 = store.fetches.load(Relaxed);
    let mut got = Vec::new();
    for off in (0..1u64 << 20).step_by(32 << 10) {
        got.extend(v.read(f.ino, off, 32 << 10).unwrap());
    }
    assert!(got == want, "the bytes come back");
    assert_eq!(store.fetches.load(Relaxed) - n0, records);
    // Bytes that were not checked yet still come from the store, and a
    // damaged copy there is still refused.
    let g = v.create(v.root(), b"g", 0o644, 0, 0).unwrap();
    v.write(g.ino, 0, &data(100_000, 6)).unwrap();
    tier(&v, &store, g.ino, 3);
    store.corrupt.store(true, Relaxed);
    let e = v.read(g.ino, 0, 10).unwrap_err();
    assert!(matches!(e, FsError::Damaged { .. }), "{e}");
}
