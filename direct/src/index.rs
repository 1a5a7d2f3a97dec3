//! A file's chain as a direct reader indexes it: the data records, in
//! file order, with where their bytes are, built by one walk of the chain
//! inside a section and kept for as long as the section's words stay the
//! same (the change counter moves with every change to the chain).

use std::sync::atomic::{AtomicBool, Ordering};

use pktfs_layout::record::{FLAG_DAMAGED, FLAG_DIR_TIME};
use pktfs_layout::{AttrSlot, FileType, Record, RecordId, RecordKind};

use crate::base::Base;
use crate::error::Result;
use crate::inode::corrupt;
use crate::section::Section;
use crate::verify::VerifyMode;

/// Where an extent's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// In the buffer region, at this image offset (a slice may run on
    /// into the following buffers, which are contiguous).
    Local(u64),
    /// In the tier: only the holder can fetch it.
    Remote,
}

/// One data record.
#[derive(Debug)]
pub(crate) struct Extent {
    pub file_off: u64,
    pub len: u64,
    pub loc: Loc,
    pub payload_crc: u32,
    pub damaged: bool,
    /// The record's number and its own CRC: together, which bytes were
    /// verified (a record number is reused only with other contents).
    pub rec: u64,
    pub rec_crc: u32,
    /// Its bytes matched `payload_crc` in this process.
    pub verified: AtomicBool,
}

impl Extent {
    pub fn end(&self) -> u64 {
        self.file_off + self.len
    }
}

/// A file (or directory) as one section saw it.
#[derive(Debug)]
pub(crate) struct Index {
    pub section: Section,
    pub attr: AttrSlot,
    pub birth: u64,
    /// Regular files and symlinks: the data records by file offset.
    pub extents: Vec<Extent>,
    /// Directories: the entries, in readdir order.
    pub dirents: Vec<Dirent>,
    /// Directories: name -> position in `dirents`.
    pub names: std::collections::HashMap<Box<[u8]>, usize>,
    /// Sum of the data records' lengths (for `blocks`).
    pub data_bytes: u64,
    /// Directories: the latest `FLAG_DIR_TIME` dirent's timestamp.
    pub dir_time: Option<i64>,
}

/// A directory entry as indexed (its name copied out and checked).
#[derive(Debug, Clone)]
pub(crate) struct Dirent {
    pub name: Box<[u8]>,
    pub ino: u32,
    pub dtype: u8,
    pub cookie: u64,
}

/// How often (in records) a long walk checks that its section still holds,
/// so a chain rewritten under it is given up early.
const RECHECK_EVERY: u64 = 1024;

impl Base {
    /// Index inode `ino` in section `s` (errors are real only if `s` holds).
    pub(crate) fn index(&self, ino: u32, s: &Section) -> Result<Index> {
        let v = self.inode(ino)?;
        let mut ix = Index {
            section: *s,
            attr: v.attr,
            birth: v.birth,
            extents: Vec::new(),
            dirents: Vec::new(),
            names: Default::default(),
            data_bytes: 0,
            dir_time: None,
        };
        let dir = v.attr.kind == FileType::Directory;
        let mut next = v.data_head;
        let mut end = 0u64; // data: where the previous record ends
        let mut walked = 0u64;
        let mut buf = [0u8; 64];
        while next != 0 {
            walked += 1;
            if walked > self.g.record_count {
                return Err(corrupt(ino, "the data chain loops"));
            }
            if walked.is_multiple_of(RECHECK_EVERY) && !self.still(ino, s) {
                // Torn: whatever is returned is thrown away.
                return Err(corrupt(ino, "changed while indexed"));
            }
            let pos = self.g.record_pos(RecordId(next));
            if !self.map.load_words(pos.0, &mut buf) {
                return Err(corrupt(ino, "a record lies outside the image"));
            }
            let (r, n) =
                Record::from_bytes(&buf, pos, &self.g).map_err(|e| corrupt(ino, &e.to_string()))?;
            let rec_crc = u32::from_le_bytes(buf[60..64].try_into().expect("4 bytes"));
            if dir {
                self.index_dirent(ino, &mut ix, &r, next, rec_crc)?;
            } else {
                self.index_data(ino, &mut ix, &r, next, rec_crc, &mut end)?;
            }
            next = n.0;
        }
        if dir {
            fold_dir_times(&mut ix);
        } else if end > ix.attr.size && ix.attr.kind == FileType::Regular {
            return Err(corrupt(ino, "a record reaches past the end of the file"));
        }
        Ok(ix)
    }

    fn index_data(
        &self,
        ino: u32,
        ix: &mut Index,
        r: &Record,
        id: u64,
        rec_crc: u32,
        end: &mut u64,
    ) -> Result<()> {
        let loc = match r.kind {
            RecordKind::Data => Loc::Local(self.g.buffer_pos(r.buffer, r.buf_off).0),
            RecordKind::Remote => Loc::Remote,
            _ => return Err(corrupt(ino, "a data chain holds a record of another kind")),
        };
        if r.file_off < *end {
            return Err(corrupt(ino, "data records overlap or are out of order"));
        }
        *end = r.file_end();
        ix.data_bytes += r.len as u64;
        ix.extents.push(Extent {
            file_off: r.file_off,
            len: r.len as u64,
            loc,
            payload_crc: r.payload_crc,
            damaged: r.flags & FLAG_DAMAGED != 0,
            rec: id,
            rec_crc,
            verified: AtomicBool::new(self.verified.is(id, rec_crc)),
        });
        Ok(())
    }

    fn index_dirent(
        &self,
        ino: u32,
        ix: &mut Index,
        r: &Record,
        id: u64,
        rec_crc: u32,
    ) -> Result<()> {
        if r.kind != RecordKind::Dirent {
            return Err(corrupt(
                ino,
                "a directory holds a record that is not a dirent",
            ));
        }
        let mut name = vec![0u8; r.len as usize].into_boxed_slice();
        if !self
            .map
            .copy_out(self.g.buffer_pos(r.buffer, r.buf_off).0, &mut name)
        {
            return Err(corrupt(ino, "a dirent's name lies outside the image"));
        }
        let check = match self.verify_mode() {
            VerifyMode::Off => false,
            VerifyMode::Once => !self.verified.is(id, rec_crc),
            VerifyMode::Always => true,
        };
        if check {
            if pktfs_layout::crc32c(&name) != r.payload_crc {
                return Err(corrupt(ino, "a dirent's name fails its checksum"));
            }
            // Marked before the section is known to hold: a torn copy that
            // matched its CRC is the name's bytes all the same.
            self.verified.set(id, rec_crc);
        }
        ix.names.insert(name.clone(), ix.dirents.len());
        ix.dirents.push(Dirent {
            name,
            ino: r.dirent_ino(),
            dtype: r.dirent_dtype(),
            cookie: r.seq,
        });
        if r.flags & FLAG_DIR_TIME != 0 {
            // Kept as the directory's time when later than its ctime (below).
            if let Ok(t) = i64::try_from(r.timestamp_ns) {
                let latest = ix.dir_time.get_or_insert(t);
                *latest = (*latest).max(t);
            }
        }
        Ok(())
    }
}

/// A directory's mtime/ctime as the image defines them (FORMAT.md): the
/// live slot's, unless a dirent flagged `FLAG_DIR_TIME` is later than the
/// slot's ctime; then the latest such dirent's timestamp is both.
fn fold_dir_times(ix: &mut Index) {
    if let Some(t) = ix.dir_time.filter(|&t| t > ix.attr.ctime_ns) {
        ix.attr.mtime_ns = t;
        ix.attr.ctime_ns = t;
    }
}

impl Index {
    /// The first extent that ends after `off`.
    pub fn first_after(&self, off: u64) -> usize {
        self.extents.partition_point(|e| e.end() <= off)
    }

    /// Mark extent `k` verified (in this index and for the process).
    pub fn mark_verified(&self, k: usize, shared: &Base) {
        let e = &self.extents[k];
        e.verified.store(true, Ordering::Relaxed);
        shared.verified.set(e.rec, e.rec_crc);
    }
}
