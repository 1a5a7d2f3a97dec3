//! Online scrub: check every payload CRC of a live Volume without stopping
//! service (as `zpool scrub` and `btrfs scrub` do).
//!
//! The scrub walks the tree from the root. For each file it takes, under the
//! file's read lock, a list of its records and a reference on the buffer
//! space they name (as a transmit hold does), then lets the lock go and
//! checksums the records. Writers are never blocked for longer than the
//! listing, and the references guarantee the bytes being checked cannot be
//! recycled meanwhile, so a mismatch is real damage, never a torn read of
//! space that was reused. A file changed since its listing is checked as it
//! was when listed. The verified-once bits are ignored: a scrub reads every
//! byte, which is its point; it marks what it checks as checked, and a
//! record it finds damaged fails later reads too.

use std::time::{Duration, Instant};

use pktfs_layout::record::FLAG_DAMAGED;
use pktfs_layout::FileType;

use super::alloc::Slice;
use super::failstop::OrStop;
use super::{Rec, Volume};
use crate::error::{FsError, Result};

/// How to scrub.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScrubOptions {
    /// At most this many payload bytes per second (None: as fast as the
    /// CPU checksums).
    pub rate_bytes_per_sec: Option<u64>,
}

/// One damaged range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubDamage {
    /// Path from the root, e.g. `/logs/a.bin`.
    pub path: String,
    pub ino: u64,
    /// What is damaged: `data` (a byte range of the file), `dirent` (a
    /// name in the directory), `xattr` (an attribute), or `inode`.
    pub what: &'static str,
    /// Byte range of the file (data), or 0..0.
    pub start: u64,
    pub end: u64,
    pub why: String,
}

/// Progress, reported after each file.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScrubProgress {
    pub files: u64,
    pub records: u64,
    pub bytes: u64,
    /// Payload bytes in use on the image (the total to expect).
    pub total_bytes: u64,
}

/// What a scrub found.
#[derive(Clone, Debug, Default)]
pub struct ScrubReport {
    pub progress: ScrubProgress,
    pub damage: Vec<ScrubDamage>,
    pub elapsed: Duration,
    /// Stopped early because `progress` returned false.
    pub cancelled: bool,
}

impl ScrubReport {
    pub fn to_json(&self) -> serde_json::Value {
        let p = &self.progress;
        serde_json::json!({
            "files": p.files, "records": p.records, "bytes": p.bytes,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "bytes_per_sec": (p.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)) as u64,
            "cancelled": self.cancelled,
            "damage": self.damage.iter().map(|d| serde_json::json!({
                "path": d.path, "ino": d.ino, "what": d.what,
                "start": d.start, "end": d.end, "why": d.why,
            })).collect::<Vec<_>>(),
        })
    }
}

/// Records of one inode, held (buffer references taken) for checking.
struct Held {
    recs: Vec<(Rec, &'static str)>,
    slices: Vec<Slice>,
}

impl Volume {
    /// Verify every payload CRC reachable from the root. `progress` is
    /// called after each file; returning false cancels.
    pub fn scrub(
        &self,
        opts: &ScrubOptions,
        progress: &mut dyn FnMut(&ScrubProgress) -> bool,
    ) -> Result<ScrubReport> {
        let t0 = Instant::now();
        let s = self.statfs();
        let mut rep = ScrubReport::default();
        rep.progress.total_bytes = (s.blocks - s.blocks_free) * s.block_size as u64;
        let mut stack: Vec<(u64, String)> = vec![(self.root(), String::new())];
        while let Some((dir, dpath)) = stack.pop() {
            self.scrub_inode(dir, &dpath, opts, t0, &mut rep)?;
            let entries = match self.list_dir(dir) {
                Ok(e) => e,
                Err(FsError::NotFound) => continue, // removed meanwhile
                Err(e) => return Err(e),
            };
            for e in entries {
                let path = format!("{dpath}/{}", String::from_utf8_lossy(&e.name));
                if e.kind == FileType::Directory {
                    stack.push((e.ino, path));
                    continue;
                }
                self.scrub_inode(e.ino, &path, opts, t0, &mut rep)?;
                rep.progress.files += 1;
                if !progress(&rep.progress) {
                    rep.cancelled = true;
                    rep.elapsed = t0.elapsed();
                    return Ok(rep);
                }
            }
        }
        rep.elapsed = t0.elapsed();
        Ok(rep)
    }

    /// List and hold an inode's records (data or dirents, and xattrs).
    fn scrub_hold(&self, ino: u64) -> Result<Held> {
        let arc = self.inode(ino)?;
        let i = super::rlock(&arc)?;
        let what = if i.attr.kind == FileType::Directory {
            "dirent"
        } else {
            "data"
        };
        // Remote records' bytes are in the tier: every fetch checks them,
        // and `fsck.pktfs --remote` checks the objects; scrub reads PM.
        let recs: Vec<(Rec, &'static str)> = i
            .data
            .values()
            .filter(|r| !r.r.is_remote())
            .map(|r| (*r, what))
            .chain(i.xattrs.values().map(|r| (*r, "xattr")))
            .collect();
        let slices: Vec<Slice> = recs.iter().map(|(r, _)| r.slice()).collect();
        let mut a = self.alloc.lock().or_stop();
        for s in &slices {
            a.take_ref(*s);
        }
        Ok(Held { recs, slices })
    }

    fn scrub_inode(
        &self,
        ino: u64,
        path: &str,
        opts: &ScrubOptions,
        t0: Instant,
        rep: &mut ScrubReport,
    ) -> Result<()> {
        let held = match self.scrub_hold(ino) {
            Ok(h) => h,
            Err(FsError::NotFound) => return Ok(()), // removed meanwhile
            Err(FsError::DamagedInode { why, .. }) => {
                rep.damage.push(ScrubDamage {
                    path: path.to_string(),
                    ino,
                    what: "inode",
                    start: 0,
                    end: 0,
                    why,
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for (r, what) in &held.recs {
            let bad = if r.r.flags & FLAG_DAMAGED != 0 {
                Some("marked damaged by fsck".to_string())
            } else {
                let got = pktfs_layout::crc32c(self.slice_bytes(r.slice()));
                (got != r.r.payload_crc).then(|| {
                    format!(
                        "payload checksum mismatch (stored {:#010x}, computed {got:#010x})",
                        r.r.payload_crc
                    )
                })
            };
            match bad {
                None => self.verify.mark_checked(r.id),
                Some(why) => {
                    self.verify.forget(r.id);
                    let (start, end) = if *what == "data" {
                        (r.r.file_off, r.r.file_end())
                    } else {
                        (0, 0)
                    };
                    tracing::error!("scrub: {path}: {what} bytes [{start}, {end}) damaged: {why}");
                    rep.damage.push(ScrubDamage {
                        path: path.to_string(),
                        ino,
                        what,
                        start,
                        end,
                        why,
                    });
                }
            }
            rep.progress.records += 1;
            rep.progress.bytes += r.r.len as u64;
            if let Some(rate) = opts.rate_bytes_per_sec.filter(|&r| r > 0) {
                let due = Duration::from_secs_f64(rep.progress.bytes as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(t0.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        let mut a = self.alloc.lock().or_stop();
        for s in held.slices {
            a.drop_ref(s);
        }
        Ok(())
    }
}
