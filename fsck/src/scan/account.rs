//! Buffer bytes named by more than one record, and space accounting.

use super::*;

impl Scan<'_> {
    // ---- overlaps and accounting -----------------------------------------

    pub(super) fn accounting(&mut self) {
        let bs = self.g.buffer_size_bytes as u64;
        // (start, end, record, kind, inode, bytes never read): a record
        // marked damaged fails every read before its bytes are touched, so
        // whatever else names them is only sharing them (a mark of a lost
        // range names bytes it never held, see `lost`).
        let mut spans: Vec<(u64, u64, u64, RecordKind, u32, bool)> = Vec::new();
        let c = &mut self.out.counts;
        for i in self.inodes.values() {
            c.inodes += 1;
            match i.attr.kind {
                FileType::Directory => c.directories += 1,
                FileType::Regular => c.regular_files += 1,
                FileType::Symlink => c.symlinks += 1,
                _ => c.special_files += 1,
            }
            for n in i
                .data
                .nodes
                .iter()
                .chain(i.xattr.nodes.iter())
                .filter(|n| n.keep)
            {
                c.records += 1;
                match n.rec.kind {
                    RecordKind::Data => {
                        c.data_records += 1;
                        c.stored_bytes += n.rec.len as u64;
                    }
                    RecordKind::Dirent => c.dirents += 1,
                    RecordKind::Xattr => c.xattrs += 1,
                    RecordKind::Remote => {
                        c.remote_records += 1;
                        c.remote_bytes += n.rec.len as u64;
                        // Its slice is in an object, not in the buffers.
                        continue;
                    }
                }
                let start = n.rec.buffer as u64 * bs + n.rec.buf_off as u64;
                let unread = n.rec.kind == RecordKind::Data && n.rec.flags & FLAG_DAMAGED != 0;
                spans.push((
                    start,
                    start + n.rec.len as u64,
                    n.id,
                    n.rec.kind,
                    i.ino,
                    unread,
                ));
            }
        }
        spans.sort_unstable_by_key(|s| (s.0, s.1, s.2));
        let mut shared = 0u64;
        let mut listed = 0usize;
        let mut warnings = Vec::new();
        // Sweep: the span reaching furthest so far.
        let mut far: Option<(u64, u64, RecordKind, u32, bool)> = None;
        for &(s, e, id, k, ino, unread) in &spans {
            if let Some((fe, fid, fk, fino, funread)) = far {
                if s < fe {
                    if (k == RecordKind::Data && fk == RecordKind::Data) || unread || funread {
                        shared += 1;
                    } else if listed < MAX_OVERLAP_FINDINGS {
                        listed += 1;
                        warnings.push((ino, id, format!("{k:?} record {id} names buffer bytes that {fk:?} record {fid} of inode {fino} also names")));
                    } else {
                        listed += 1;
                    }
                }
                if e > fe {
                    far = Some((e, id, k, ino, unread));
                }
            } else {
                far = Some((e, id, k, ino, unread));
            }
        }
        let used = self.used_buffers(false);
        let n_used = used.iter().filter(|u| **u).count() as u64;
        let c = &mut self.out.counts;
        c.shared_ranges = shared;
        c.buffers_used = n_used;
        c.buffers_free = self.g.buffer_count - n_used;
        c.records_free = self.g.record_count - c.records;
        c.inodes_free = self.g.inode_count as u64 - c.inodes;
        if shared > 0 {
            self.find(
                Severity::Info,
                "data.shared",
                None,
                None,
                None,
                format!(
                    "{shared} data record pair(s) share buffer bytes (copy_file_range reflinks)"
                ),
            );
        }
        for (ino, id, msg) in warnings {
            let path = self.inodes.get(&ino).map(|i| i.path.clone());
            self.find(
                Severity::Warning,
                "buffer.overlap",
                Some(ino),
                path.as_deref(),
                Some(id),
                msg,
            );
        }
        if listed > MAX_OVERLAP_FINDINGS {
            self.find(
                Severity::Warning,
                "buffer.overlap",
                None,
                None,
                None,
                format!("{} more overlaps not listed", listed - MAX_OVERLAP_FINDINGS),
            );
        }
        if let Some(pb) = &self.progress {
            pb.inc(self.progress_pending);
        }
    }
}
