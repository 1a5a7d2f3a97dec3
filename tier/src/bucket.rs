//! Rebuilding an image from the bucket alone: find the snapshot, fetch it,
//! and restore from it (`pktfs restore`).

use std::path::Path;

use crate::restore::{restore_image, RestoreOptions, RestoreReport};
use crate::s3::ObjectStore;
use crate::snapshot::{parse_snapshot_key_rel, snapshot_key_rel};
use crate::target::TierTarget;

/// Why a restore from a bucket failed.
#[derive(Debug, thiserror::Error)]
pub enum BucketRestoreError {
    #[error("{0}")]
    Store(#[from] crate::s3::StoreError),
    #[error("{target}: no snapshot in the bucket (an image uploads one after its first tier-out); nothing to restore from")]
    NoSnapshot { target: String },
    #[error("{target}: no snapshot {seq} (there are: {have:?})")]
    NoSuchSnapshot {
        target: String,
        seq: u64,
        have: Vec<u64>,
    },
    #[error("{0}")]
    Restore(#[from] crate::restore::RestoreError),
}

/// Restore `image` from the newest snapshot under `target` (or `seq`).
pub fn restore_from_bucket(
    store: &ObjectStore,
    target: &TierTarget,
    image: &Path,
    size_bytes: Option<u64>,
    seq: Option<u64>,
    force: bool,
) -> Result<RestoreReport, BucketRestoreError> {
    let mut have: Vec<u64> = store
        .list(&target.key("snap/"))?
        .iter()
        .filter_map(|o| target.rel(&o.key).and_then(parse_snapshot_key_rel))
        .collect();
    have.sort_unstable();
    let seq = match seq {
        Some(s) if have.contains(&s) => s,
        Some(s) => {
            return Err(BucketRestoreError::NoSuchSnapshot {
                target: target.to_string(),
                seq: s,
                have,
            })
        }
        None => *have.last().ok_or_else(|| BucketRestoreError::NoSnapshot {
            target: target.to_string(),
        })?,
    };
    let bytes = store.get(&target.key(&snapshot_key_rel(seq)))?;
    let opts = RestoreOptions { force };
    Ok(restore_image(image, size_bytes, &bytes, &opts)?)
}
