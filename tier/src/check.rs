//! `fsck.pktfs --remote`: every remote record's object exists, is a
//! segment pktfs wrote, and holds the record's bytes with the record's CRC;
//! objects nothing references are listed as orphans.
//!
//! Without reading payloads: a segment's index names each payload's
//! offset, length and CRC32C, and is itself checksummed; a record that
//! matches an index entry exactly is vouched for by the index, and the
//! index by the object's CRC32C the store verified on upload (when the
//! store reports a full-object CRC32C, it must equal the CRC combined from
//! the index's entries and the tail). A record that names part of a
//! payload (a remnant of an overwrite) has a CRC of its own, so its bytes
//! are fetched and checked. `deep` fetches and checks every record.

use std::collections::{BTreeMap, BTreeSet};

use pktfs_fs::{RemoteRecordInfo, Volume};

use crate::s3::ObjectStore;
use crate::segment::{
    object_key_rel, parse_footer, parse_index, parse_object_key_rel, Entry, FOOTER_BYTES,
    INDEX_ENTRY_BYTES,
};
use crate::snapshot::{self, parse_snapshot_key_rel, snapshot_key_rel};
use crate::target::TierTarget;

/// One problem found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RemoteFinding {
    pub object: u64,
    /// The file and range concerned, when a record is.
    pub ino: Option<u64>,
    pub file_range: Option<(u64, u64)>,
    pub what: String,
}

/// What the check found.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteReport {
    pub records: u64,
    pub record_bytes: u64,
    pub objects_referenced: u64,
    pub objects_listed: u64,
    /// Records whose bytes were fetched and checked.
    pub records_fetched: u64,
    pub errors: Vec<RemoteFinding>,
    /// Objects no record and no kept snapshot references: (object, size).
    pub orphans: Vec<(u64, u64)>,
    pub snapshots: Vec<u64>,
}

impl RemoteReport {
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn to_text(&self) -> String {
        let mut s = format!(
            "remote: {} records ({} bytes) in {} objects; {} objects in the bucket; {} records \
             fetched and checked; snapshots {:?}\n",
            self.records,
            self.record_bytes,
            self.objects_referenced,
            self.objects_listed,
            self.records_fetched,
            self.snapshots
        );
        for e in &self.errors {
            s += &format!("ERROR object {}: {}", e.object, e.what);
            if let (Some(i), Some((a, b))) = (e.ino, e.file_range) {
                s += &format!(" (inode {i} bytes [{a}, {b}))");
            }
            s.push('\n');
        }
        for (o, size) in &self.orphans {
            s += &format!(
                "orphan: {} ({size} bytes): no record or kept snapshot references it\n",
                object_key_rel(*o)
            );
        }
        if self.errors.is_empty() {
            s += "remote: clean\n";
        }
        s
    }
}

/// Check `vol`'s remote records against the objects under `target`.
pub fn check_remote(
    vol: &Volume,
    store: &ObjectStore,
    target: &TierTarget,
    deep: bool,
) -> Result<RemoteReport, crate::s3::StoreError> {
    let mut rep = RemoteReport::default();
    let recs = vol.remote_records();
    rep.records = recs.len() as u64;
    rep.record_bytes = recs.iter().map(|r| r.len as u64).sum();
    let mut by_obj: BTreeMap<u64, Vec<RemoteRecordInfo>> = BTreeMap::new();
    for r in recs {
        by_obj.entry(r.obj).or_default().push(r);
    }
    rep.objects_referenced = by_obj.len() as u64;
    let mut listed: BTreeMap<u64, u64> = BTreeMap::new();
    for o in store.list(&target.key("seg/"))? {
        if let Some(n) = target.rel(&o.key).and_then(parse_object_key_rel) {
            listed.insert(n, o.size);
        }
    }
    rep.objects_listed = listed.len() as u64;
    let mut snap_refs = BTreeSet::new();
    for o in store.list(&target.key("snap/"))? {
        if let Some(s) = target.rel(&o.key).and_then(parse_snapshot_key_rel) {
            rep.snapshots.push(s);
            let b = store.get(&target.key(&snapshot_key_rel(s)))?;
            match snapshot::referenced_objects(&b) {
                Ok(r) => snap_refs.extend(r),
                Err(e) => rep.errors.push(RemoteFinding {
                    object: 0,
                    ino: None,
                    file_range: None,
                    what: format!("snapshot {s} does not parse: {e}"),
                }),
            }
        }
    }
    rep.snapshots.sort_unstable();
    for (&obj, recs) in &by_obj {
        let finding = |r: Option<&RemoteRecordInfo>, what: String| RemoteFinding {
            object: obj,
            ino: r.map(|r| r.ino),
            file_range: r.map(|r| (r.file_off, r.file_off + r.len as u64)),
            what,
        };
        let Some(&size) = listed.get(&obj) else {
            rep.errors.push(finding(
                recs.first(),
                format!(
                    "{} is missing from the bucket; {} records ({} files) name it",
                    object_key_rel(obj),
                    recs.len(),
                    recs.iter().map(|r| r.ino).collect::<BTreeSet<_>>().len()
                ),
            ));
            continue;
        };
        let key = target.key(&object_key_rel(obj));
        let entries = match read_index(store, &key, obj, size) {
            Ok(e) => e,
            Err(what) => {
                rep.errors.push(finding(recs.first(), what));
                continue;
            }
        };
        // The store's own full-object CRC, when it keeps one, must be the
        // one the index implies (payloads tile the object before the tail).
        if let Ok(Some(info)) = store.head(&key) {
            if let (Some(stored), Some(want)) = (
                info.crc32c_full_object(),
                implied_crc(store, &key, &entries, size),
            ) {
                if stored != want {
                    rep.errors.push(finding(
                        None,
                        format!("the store's CRC32C {stored:#010x} is not the {want:#010x} the index implies"),
                    ));
                }
            }
        }
        for r in recs {
            let exact = entries
                .binary_search_by_key(&r.obj_off, |e| e.obj_off)
                .ok()
                .map(|k| entries[k]);
            let within = entries.iter().any(|e| {
                r.obj_off >= e.obj_off && r.obj_off + r.len as u64 <= e.obj_off + e.len as u64
            });
            if !within {
                rep.errors.push(finding(
                    Some(r),
                    format!(
                        "bytes [{}, {}) of the object are not a payload of it",
                        r.obj_off,
                        r.obj_off + r.len as u64
                    ),
                ));
                continue;
            }
            let vouched = exact.is_some_and(|e| e.len == r.len && e.crc32c == r.crc32c);
            if exact.is_some_and(|e| e.len == r.len && e.crc32c != r.crc32c) {
                rep.errors.push(finding(
                    Some(r),
                    "the index gives this payload another CRC32C than the record".into(),
                ));
                continue;
            }
            if deep || !vouched {
                rep.records_fetched += 1;
                match store.get_range(&key, r.obj_off, r.len as u64) {
                    Ok(b) if b.len() == r.len as usize && pktfs_layout::crc32c(&b) == r.crc32c => {}
                    Ok(_) => rep.errors.push(finding(
                        Some(r),
                        "the object's bytes do not match the record's CRC32C".into(),
                    )),
                    Err(e) => rep.errors.push(finding(Some(r), format!("fetch: {e}"))),
                }
            }
        }
    }
    for (&obj, &size) in &listed {
        if !by_obj.contains_key(&obj) && !snap_refs.contains(&obj) {
            rep.orphans.push((obj, size));
        }
    }
    Ok(rep)
}

/// The object's index, read from its tail (two small ranged GETs).
fn read_index(store: &ObjectStore, key: &str, obj: u64, size: u64) -> Result<Vec<Entry>, String> {
    if size < FOOTER_BYTES as u64 {
        return Err(format!("{key} is {size} bytes: too short to be a segment"));
    }
    let foot = store
        .get_range(key, size - FOOTER_BYTES as u64, FOOTER_BYTES as u64)
        .map_err(|e| e.to_string())?;
    let (n, icrc) = parse_footer(obj, &foot).map_err(|e| e.to_string())?;
    let (istart, ilen) = index_span(key, n, size)?;
    let index = if ilen == 0 {
        Vec::new()
    } else {
        store
            .get_range(key, istart, ilen)
            .map_err(|e| e.to_string())?
            .to_vec()
    };
    parse_index(obj, size, &index, icrc).map_err(|e| e.to_string())
}

/// Where the index of `n` entries lies in an object of `size` bytes,
/// checked before anything is fetched or allocated for it: the footer's
/// count comes from the store, which may be hostile, so an index (and one
/// byte of payload per entry: a record is never empty) that cannot fit in
/// the object is refused rather than read.
fn index_span(key: &str, n: u32, size: u64) -> Result<(u64, u64), String> {
    let ilen = n as u64 * INDEX_ENTRY_BYTES as u64;
    let need = ilen + n as u64 + FOOTER_BYTES as u64;
    if need > size {
        return Err(format!(
            "{key}: its footer claims {n} index entries, which do not fit in its {size} bytes"
        ));
    }
    Ok((size - FOOTER_BYTES as u64 - ilen, ilen))
}

/// The whole object's CRC the index implies, if the payloads tile it.
fn implied_crc(store: &ObjectStore, key: &str, entries: &[Entry], size: u64) -> Option<u32> {
    let mut crc = 0u32;
    let mut at = 0u64;
    for e in entries {
        if e.obj_off != at {
            return None;
        }
        crc = crate::segment::combine(crc, e.crc32c, e.len as u64);
        at += e.len as u64;
    }
    let tail = store.get_range(key, at, size - at).ok()?;
    Some(crate::segment::combine(
        crc,
        pktfs_layout::crc32c(&tail),
        tail.len() as u64,
    ))
}

#[cfg(test)]
mod bounds_tests {
    use super::*;

    #[test]
    fn a_hostile_footer_count_is_refused_before_reading() {
        // 4 entries of 1 byte each plus their index and the footer.
        let size = 4 + 4 * INDEX_ENTRY_BYTES as u64 + FOOTER_BYTES as u64;
        assert_eq!(index_span("k", 4, size), Ok((4, 128)));
        assert!(index_span("k", 5, size).is_err());
        let e = index_span("k", u32::MAX, 1 << 20).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
        assert!(index_span("k", u32::MAX, u64::MAX).is_ok(), "no overflow");
        assert_eq!(
            index_span("k", 0, FOOTER_BYTES as u64),
            Ok((0, 0)),
            "an empty index"
        );
    }
}
