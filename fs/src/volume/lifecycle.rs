//! A Volume's life: format (an empty image), open (recovery is
//! `recover`), close (marking the image clean), and the superblock writes
//! they share. Every operation is durable when it returns; close only
//! records that the shutdown was orderly.

use std::path::Path;

use pktfs_layout::superblock::{self, STATE_CLEAN};
use pktfs_layout::{AttrSlot, FileType, Geometry, GeometryParams, RecordId, Superblock, ROOT_INO};
use rustc_hash::FxHashMap;

use super::alloc::Alloc;
use super::commit::JournalSlots;
use super::lockrank::{Rank, RankedMutex};
use super::superblocks::write_superblocks;
use super::{
    itable, now_ns, recover, remote, verify, write_new_inode, FormatOptions, InodeRef, Namespace,
    OpenOptions, OpenReport, Volume,
};
use crate::error::{FsError, Result};
use crate::media::{MapOptions, Pm};

fn uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut u);
    }
    u
}

impl Volume {
    /// Format `pm` as an empty pktfs image. Overwrites whatever was there;
    /// the "refuse to format an existing image" policy belongs to mkfs.
    /// `progress` is called with (done, total) bytes while zeroing tables.
    pub fn format_pm(
        pm: &mut Pm,
        opts: &FormatOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Geometry> {
        let mut params = opts.params.clone();
        params.image_len_bytes = params.image_len_bytes.min(pm.len());
        let g = Geometry::compute(&params).map_err(|msg| FsError::Refused {
            path: "image".into(),
            msg,
        })?;
        // Invalidate any old superblock first so a crash mid-format leaves
        // an image nothing will mistake for a valid one.
        pm.write(superblock::PRIMARY_OFFSET, &[0u8; 256]);
        pm.write(superblock::BACKUP_OFFSET, &[0u8; 256]);
        pm.persist(0, 8192);
        // Journal slots, the inode table and the record table must start
        // zeroed: no committed journal entries, null links.
        let table_end = g.buffer_offset;
        let total = table_end - g.journal_offset;
        let mut off = g.journal_offset;
        const STEP: u64 = 8 << 20;
        while off < table_end {
            let n = STEP.min(table_end - off);
            pm.zero(off, n);
            pm.flush(off, n);
            off += n;
            progress(off - g.journal_offset, total);
        }
        pm.fence();
        // Root directory.
        let now = now_ns();
        let root = AttrSlot {
            kind: FileType::Directory,
            mode: 0o755,
            uid: 0,
            gid: 0,
            nlink: 2,
            size: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            rdev: 0,
            parent: ROOT_INO,
        };
        // Whatever the file held before, readers mapping it see a new epoch.
        super::live::epoch_fresh(pm, &g);
        write_new_inode(pm, &g, ROOT_INO, &root, RecordId::NONE);
        pm.fence();
        let mut sb = Superblock::new(g, uuid(), now as u64);
        if let Some(l) = &opts.label {
            let b = l.as_bytes();
            let n = b.len().min(31);
            sb.label[..n].copy_from_slice(&b[..n]);
        }
        write_superblocks(pm, &sb);
        Ok(g)
    }

    /// Create (or resize) the file at `path`, allocate all of it, and format
    /// it. Refuses before touching the file when the geometry is impossible,
    /// the file system holding it lacks the room, or another process has it
    /// open ([`Pm::create`]); a file this call created is removed again if
    /// formatting fails.
    pub fn format(
        path: &Path,
        opts: &FormatOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Geometry> {
        Geometry::compute(&opts.params).map_err(|msg| FsError::Refused {
            path: path.to_path_buf(),
            msg,
        })?;
        let existed = std::fs::symlink_metadata(path).is_ok();
        let mut pm = Pm::create(path, opts.params.image_len_bytes)?;
        let r = Self::format_pm(&mut pm, opts, progress).and_then(|g| {
            pm.sync_all().map_err(|source| FsError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            Ok(g)
        });
        drop(pm);
        if r.is_err() && !existed {
            let _ = std::fs::remove_file(path);
        }
        r
    }

    /// Open an image file: validate, recover, and mark it mounted.
    pub fn open(path: &Path, opts: &OpenOptions) -> Result<Volume> {
        let pm = Pm::open(
            path,
            &MapOptions {
                persist: opts.persist,
                read_only: opts.read_only,
                no_populate: opts.no_populate,
                no_lock: opts.no_lock,
            },
        )?;
        let v = Self::open_pm(pm, opts.read_only)?;
        v.set_verify_mode(opts.verify);
        Ok(v)
    }

    /// A freshly formatted image of `params.image_len_bytes` in heap memory
    /// (no file, nothing persists): for tests, tools and examples.
    pub fn format_in_memory(params: GeometryParams) -> Result<Pm> {
        let mut pm = Pm::from_bytes(vec![0u8; params.image_len_bytes as usize]);
        Self::format_pm(
            &mut pm,
            &FormatOptions {
                params,
                label: None,
            },
            &mut |_, _| {},
        )?;
        Ok(pm)
    }

    /// A volume on a freshly formatted image in heap memory
    /// ([`Self::format_in_memory`]), open read-write.
    pub fn in_memory(params: GeometryParams) -> Result<Volume> {
        Self::open_pm(Self::format_in_memory(params)?, false)
    }

    /// Open a volume on an already-mapped region (tests, crash images).
    pub fn open_pm(pm: Pm, read_only: bool) -> Result<Volume> {
        recover::open(pm, read_only)
    }

    /// Mark the image clean. Every operation is already durable; this only
    /// records that the close was orderly.
    pub fn close(self) -> Result<()> {
        self.mark_clean()
    }

    fn mark_clean(&self) -> Result<()> {
        if self.read_only || self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(why) = self.failure() {
            // Stopped after a fault: write nothing more, and leave the
            // image marked as in use so the next open treats it as after
            // a crash.
            return Err(FsError::Failed(why));
        }
        // Not `or_stop`: this runs in Drop, where a panic could abort.
        let Ok(mut sb) = self.sb.lock() else {
            return Err(FsError::Failed("the superblock lock was poisoned".into()));
        };
        sb.state = STATE_CLEAN;
        write_superblocks(&self.pm, &sb);
        // No holder publishes a verify mode any more.
        self.publish_verify_hint(pktfs_layout::live::VERIFY_HINT_NONE);
        self.pm.sync_all().map_err(|source| FsError::Io {
            path: "image".into(),
            source,
        })?;
        Ok(())
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        // Dropping without close() is fine (everything is durable), but an
        // orderly drop still records a clean shutdown.
        let _ = self.mark_clean();
    }
}

impl Volume {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new_from_parts(
        pm: Pm,
        geo: Geometry,
        sb: Superblock,
        alloc: Alloc,
        inodes: FxHashMap<u32, InodeRef>,
        ns: Namespace,
        read_only: bool,
        report: OpenReport,
    ) -> Volume {
        let remote = remote::RemoteState::default();
        for a in inodes.values() {
            // Freshly built by open: nobody else holds these locks.
            if let Some(i) = a.try_read() {
                remote.count(&i.data);
            }
        }
        Volume {
            pm,
            geo,
            sb: RankedMutex::new(Rank::Superblock, sb),
            alloc: RankedMutex::new(Rank::Alloc, alloc),
            journal: JournalSlots::new(geo.journal_slots),
            ns: RankedMutex::new(Rank::Namespace, ns),
            renames: RankedMutex::new(Rank::Renames, ()),
            inodes: itable::InodeTable::new(inodes),
            read_only,
            report,
            closed: false.into(),
            verify: verify::Verifier::new(geo.record_count),
            fail_state: Default::default(),
            damaged_inodes: Default::default(),
            remote,
            s3_keys_version: Default::default(),
        }
    }
}
