//! Walking an inode's chains: every record's CRC, kind, bounds, link and
//! claim, and what each kind of record must satisfy; payload CRCs (large
//! ones in parallel).

use super::*;

/// One walk along one chain: what it holds, where it has got to, and what
/// the checks of the next record build on.
struct ChainWalk {
    ino: u32,
    path: String,
    kind: FileType,
    xattr: bool,
    /// "data" or "xattr", for messages.
    which: &'static str,
    /// The record kind the chain holds (None: this kind of inode has no data chain).
    expected: Option<RecordKind>,
    /// A regular file's data chain that breaks loses the rest of the
    /// file: `lost` keeps that visible and links back what follows.
    file_data: bool,
    /// End of the last data record: a record may not reach back before it.
    prev_end: u64,
    /// Cookie of the last kept dirent: cookies only rise.
    prev_seq: Option<u64>,
    /// Names of the dirents or xattrs kept so far: no duplicates.
    names: HashSet<Vec<u8>>,
    /// A symlink's target is contiguous so far.
    sym_contig: bool,
    /// What links to the record being checked, for messages.
    from: String,
    c: Chain,
}

impl ChainWalk {
    /// Where a regular file's data chain has to stop (see `lost`); any
    /// other chain just ends.
    fn cut(&mut self, record: Option<u64>, follow: Option<u64>, why: String) {
        if self.file_data {
            self.c.cut = Some(lost::Cut::at(self.prev_end, record, follow, why));
        }
    }
}

impl Scan<'_> {
    // ---- chains ---------------------------------------------------------

    /// An error in a chain that makes what follows untrustworthy: a
    /// finding against the chain, which is then cut where it went wrong.
    fn chain_error(
        &mut self,
        c: &mut Chain,
        code: &'static str,
        ino: u32,
        path: &str,
        record: Option<u64>,
        msg: String,
    ) {
        let f = self.find(Severity::Error, code, Some(ino), Some(path), record, msg);
        c.findings.push(f);
        c.unsafe_reason = true;
    }

    /// Walk `i`'s data chain (or its xattr chain) from the head word,
    /// claiming each record, up to the first link that cannot be followed;
    /// each record's kind-specific checks decide whether it stays.
    pub(super) fn walk_chain(&mut self, i: &mut Ino, xattr: bool) -> Chain {
        let mut w = self.start_walk(i, xattr);
        let mut cur = w.c.head_raw;
        while cur != 0 {
            if !self.link_ok(&mut w, cur) {
                break;
            }
            let Some((r, next)) = self.decode_record(&mut w, cur) else {
                break;
            };
            if !self.kind_ok(&mut w, cur, &r) {
                break;
            }
            let keep = match r.kind {
                RecordKind::Data | RecordKind::Remote => {
                    let Some(keep) = self.walk_data(i, &mut w, cur, &r) else {
                        break;
                    };
                    keep
                }
                RecordKind::Dirent => self.walk_dirent(i, &mut w, cur, r),
                RecordKind::Xattr => self.walk_xattr(&mut w, cur, &r),
            };
            w.c.nodes.push(Node {
                id: cur,
                next_raw: next.0,
                keep,
                rec: r,
            });
            w.from = format!("record {cur}");
            cur = next.0;
        }
        if !xattr && w.kind == FileType::Symlink && !w.sym_contig {
            self.symlink_gap(i, &mut w.c);
        }
        w.c
    }

    /// The walk's starting state: the head word (as the journal overlay
    /// has it) and what the chain of this kind of inode may hold.
    fn start_walk(&self, i: &Ino, xattr: bool) -> ChainWalk {
        let head_addr =
            self.g.inode_pos(i.ino).0 + if xattr { XATTR_HEAD_OFF } else { DATA_HEAD_OFF };
        let head_raw = self.read_u64(head_addr).unwrap_or(0);
        let kind = i.attr.kind;
        let expected = if xattr {
            Some(RecordKind::Xattr)
        } else {
            match kind {
                FileType::Directory => Some(RecordKind::Dirent),
                FileType::Regular | FileType::Symlink => Some(RecordKind::Data),
                _ => None,
            }
        };
        ChainWalk {
            ino: i.ino,
            path: i.path.clone(),
            kind,
            xattr,
            which: if xattr { "xattr" } else { "data" },
            expected,
            file_data: !xattr && kind == FileType::Regular,
            prev_end: 0,
            prev_seq: None,
            names: HashSet::new(),
            sym_contig: true,
            from: "head".to_string(),
            c: Chain {
                head_addr,
                head_raw,
                ..Chain::default()
            },
        }
    }

    /// Whether the chain can go on to record `cur`: a link outside the
    /// record table, or to a record some chain already claimed (a cycle, or
    /// a record shared), ends it, so that every walk terminates.
    fn link_ok(&mut self, w: &mut ChainWalk, cur: u64) -> bool {
        let (which, from) = (w.which, &w.from);
        if !self.g.record_in_range(cur) {
            let msg =
                format!("{which} chain {from} links to record {cur}, outside the record table");
            let why = format!("{which} chain {from} links outside the record table");
            self.chain_error(&mut w.c, "chain.link", w.ino, &w.path, None, msg);
            w.cut(None, None, why);
            return false;
        }
        let claimed = self.owner[cur as usize];
        if claimed == 0 {
            return true;
        }
        let (code, msg) = if claimed == w.ino {
            (
                "chain.cycle",
                format!("{which} chain {from} loops back to record {cur}"),
            )
        } else {
            (
                "record.shared",
                format!(
                    "{which} chain {from} links to record {cur}, which belongs to inode {claimed}"
                ),
            )
        };
        let why = format!("{which} chain {from} links to record {cur}, already in a chain");
        self.chain_error(&mut w.c, code, w.ino, &w.path, Some(cur), msg);
        w.cut(Some(cur), None, why);
        false
    }

    /// Record `cur` and its link, or None where the chain ends: a bad
    /// record's link is still followed for what may be salvaged (orphans
    /// of a directory, the rest of a regular file), outside this chain.
    fn decode_record(
        &mut self,
        w: &mut ChainWalk,
        cur: u64,
    ) -> Option<(Record, pktfs_layout::RecordId)> {
        let g = self.g;
        let at = g.record_pos(pktfs_layout::RecordId(cur));
        let bytes = self.read::<64>(at.0)?;
        let e = match Record::from_bytes(&bytes, at, &g) {
            Ok(x) => return Some(x),
            Err(e) => e,
        };
        // The link is outside the record CRC: a record whose only fault is
        // a link out of range is intact, and kept; the chain ends after it
        // (the bad link is reported by `link_ok` on the next step).
        let mut body = bytes;
        body[..8].fill(0);
        if let Ok((r, _)) = Record::from_bytes(&body, at, &g) {
            return Some((r, pktfs_layout::RecordId(le64(&bytes[0..8]))));
        }
        let msg = format!("{} chain: {e}", w.which);
        self.chain_error(&mut w.c, "record.bad", w.ino, &w.path, Some(cur), msg);
        self.tail_records.insert(cur);
        if !w.xattr && w.kind == FileType::Directory {
            self.tail_salvage(le64(&bytes[0..8]));
        }
        // Its link may still lead on: `follow_cuts`.
        let follow = Some(le64(&bytes[0..8])).filter(|&n| n != 0);
        w.cut(
            Some(cur),
            follow,
            format!("record {cur} of the data chain is bad"),
        );
        None
    }

    /// Whether record `r` is of the kind this chain holds (a regular file's
    /// data chain may hold remote records too); one that is not ends it.
    fn kind_ok(&mut self, w: &mut ChainWalk, cur: u64, r: &Record) -> bool {
        let (kind, which) = (w.kind, w.which);
        let remote_ok = r.kind == RecordKind::Remote && kind == FileType::Regular && !w.xattr;
        if Some(r.kind) == w.expected || remote_ok {
            return true;
        }
        let msg = match w.expected {
            None => format!(
                "a {} has no data chain, but its head links to a {:?} record",
                kind_name(kind),
                r.kind
            ),
            Some(k) => format!("{:?} record in the {which} chain (expected {k:?})", r.kind),
        };
        self.chain_error(&mut w.c, "chain.kind", w.ino, &w.path, Some(cur), msg);
        self.tail_records.insert(cur);
        w.cut(
            Some(cur),
            None,
            format!("the data chain links to {:?} record {cur}", r.kind),
        );
        false
    }

    /// A data (or remote) record: whether it stays, or None where the chain
    /// ends (a record out of order, or wholly past a regular file's size,
    /// says the chain is not what the file wrote).
    fn walk_data(&mut self, i: &mut Ino, w: &mut ChainWalk, cur: u64, r: &Record) -> Option<bool> {
        let (ino, prev_end) = (w.ino, w.prev_end);
        if r.file_off < prev_end {
            self.chain_error(
                &mut w.c,
                "data.order",
                ino,
                &w.path,
                Some(cur),
                format!("bytes [{}, {}) overlap or precede the previous record, which ends at {prev_end}", r.file_off, r.file_end()),
            );
            self.tail_records.insert(cur);
            w.cut(
                Some(cur),
                None,
                format!("record {cur} of the data chain is out of order"),
            );
            return None;
        }
        if w.kind == FileType::Regular && r.file_off >= i.attr.size && !i.rebuilt {
            let f = self.find(
                Severity::Error,
                "data.past_size",
                Some(ino),
                Some(&w.path),
                Some(cur),
                format!(
                    "record at bytes [{}, {}) lies past the size {}",
                    r.file_off,
                    r.file_end(),
                    i.attr.size
                ),
            );
            w.c.findings.push(f);
            self.tail_records.insert(cur);
            return None;
        }
        let keep = self.accept_data(i, &mut w.c, cur, r, &mut w.sym_contig);
        w.prev_end = r.file_end();
        Some(keep)
    }

    /// A dirent: whether it stays (a good name, rising cookies, no
    /// duplicate). The inode a dropped one names may be an orphan now.
    fn walk_dirent(&mut self, i: &mut Ino, w: &mut ChainWalk, cur: u64, r: Record) -> bool {
        self.owner[cur as usize] = w.ino;
        let name = self.payload(&r).map(<[u8]>::to_vec).unwrap_or_default();
        let crc_ok = self.payload_ok(&r);
        let problem = if !crc_ok {
            Some(("dirent.crc", "name checksum mismatch".to_string()))
        } else if !valid_name(&name) {
            Some(("dirent.name", format!("invalid name {:?}", show(&name))))
        } else if w.prev_seq.is_some_and(|p| r.seq <= p) {
            Some((
                "dirent.order",
                format!("entry {:?}: cookie {} out of order", show(&name), r.seq),
            ))
        } else if w.names.contains(&name) {
            Some((
                "dirent.duplicate",
                format!("duplicate entry {:?}", show(&name)),
            ))
        } else {
            None
        };
        if let Some((code, msg)) = problem {
            self.chain_error(&mut w.c, code, w.ino, &w.path, Some(cur), msg);
            self.salvage_cands.insert(r.dirent_ino());
            return false;
        }
        w.prev_seq = Some(r.seq);
        w.names.insert(name.clone());
        i.entries.push(Entry {
            node: w.c.nodes.len(),
            name,
            ino: r.dirent_ino(),
            dtype: r.dirent_dtype(),
            id: cur,
            rec: r,
        });
        true
    }

    /// An xattr record: whether it stays (its checksum holds, its name is
    /// not a duplicate).
    fn walk_xattr(&mut self, w: &mut ChainWalk, cur: u64, r: &Record) -> bool {
        self.owner[cur as usize] = w.ino;
        let name = self
            .payload(r)
            .map(|p| p[..(r.aux as usize).min(p.len())].to_vec())
            .unwrap_or_default();
        let problem = if !self.payload_ok(r) {
            Some((
                "xattr.crc",
                format!("attribute {:?}: checksum mismatch", show(&name)),
            ))
        } else if !w.names.insert(name.clone()) {
            Some((
                "xattr.duplicate",
                format!("duplicate attribute {:?}", show(&name)),
            ))
        } else {
            None
        };
        let Some((code, msg)) = problem else {
            return true;
        };
        self.chain_error(&mut w.c, code, w.ino, &w.path, Some(cur), msg);
        false
    }

    /// A symlink target with a hole cannot be read as a path: the chain is
    /// cut after its contiguous prefix.
    fn symlink_gap(&mut self, i: &Ino, c: &mut Chain) {
        let f = self.find(
            Severity::Error,
            "symlink.gap",
            Some(i.ino),
            Some(&i.path),
            None,
            format!(
                "symlink target has a hole; only its first {} bytes are contiguous",
                i.size_end
            ),
        );
        let mut end = 0;
        for n in c.nodes.iter_mut() {
            if !n.keep {
                continue;
            }
            if n.rec.file_off != end {
                n.keep = false;
            } else {
                end = n.rec.file_end();
            }
        }
        c.findings.push(f);
        c.unsafe_reason = true;
    }

    /// Claim data record `cur` (`r`) of `i`'s data chain `c` and check it:
    /// its payload CRC (large ones later, in parallel), damage, a record
    /// reaching past the size (trimmed), the end of the data. Returns
    /// whether it stays in the chain. The caller has checked its order.
    pub(super) fn accept_data(
        &mut self,
        i: &mut Ino,
        c: &mut Chain,
        cur: u64,
        r: &Record,
        sym_contig: &mut bool,
    ) -> bool {
        let (ino, kind, path, head_addr) = (i.ino, i.attr.kind, i.path.clone(), c.head_addr);
        self.owner[cur as usize] = ino;
        // Large regular-file payloads are checked afterwards, in
        // parallel (`check_deferred`); they assume good here.
        let remote = r.is_remote();
        let defer = !remote && kind == FileType::Regular && r.len >= DEFER_BYTES;
        if defer {
            self.deferred.push((ino, c.nodes.len(), *r));
        }
        // A regular file's damaged range is kept and marked (or
        // dropped with --drop-damaged, see `damage`); a symlink
        // target cannot be "damaged but kept": it is cut.
        let flagged = r.flags & FLAG_DAMAGED != 0;
        // A remote record's bytes are in the object store:
        // `--remote` checks them there.
        let computed = if remote {
            Some(r.payload_crc)
        } else if defer {
            None
        } else {
            self.payload_crc(r)
        };
        let bad = !defer && (flagged || computed != Some(r.payload_crc));
        let keep = if !bad {
            true
        } else if kind == FileType::Regular {
            let (keep, f) = self.data_damage(ino, &path, cur, r, computed);
            if !keep {
                c.findings.push(f);
                c.unsafe_reason = true;
            }
            keep
        } else {
            self.chain_error(
                c,
                "data.payload_crc",
                ino,
                &path,
                Some(cur),
                format!(
                    "payload checksum mismatch for bytes [{}, {})",
                    r.file_off,
                    r.file_end()
                ),
            );
            false
        };
        if !keep {
            return false;
        }
        if kind == FileType::Regular && r.file_end() > i.attr.size && !i.rebuilt && !remote {
            let f = self.find(
                Severity::Error,
                "data.past_size",
                Some(ino),
                Some(&path),
                Some(cur),
                format!(
                    "record at bytes [{}, {}) runs past the size {}",
                    r.file_off,
                    r.file_end(),
                    i.attr.size
                ),
            );
            let new_len = (i.attr.size - r.file_off) as u32;
            self.plan(
                PlannedFix {
                    fix: Fix::TrimRecord {
                        head: head_addr,
                        id: cur,
                        new_len,
                    },
                    safe: true,
                    ino: Some(ino),
                    path: Some(path.clone()),
                    what: format!("trim record {cur} to {new_len} bytes"),
                },
                &[f],
            );
        }
        if kind == FileType::Symlink {
            if r.file_off != i.size_end {
                *sym_contig = false;
            }
            if *sym_contig {
                i.size_end = r.file_end();
            }
        } else {
            i.size_end = r
                .file_end()
                .min(if i.rebuilt { u64::MAX } else { i.attr.size });
        }
        true
    }

    /// Follow the raw `next` of a bad directory record: valid, unclaimed
    /// dirents after it name inodes that may now be orphans.
    pub(super) fn tail_salvage(&mut self, mut cur: u64) {
        let mut seen = HashSet::new();
        for _ in 0..TAIL_SALVAGE_STEPS {
            if cur == 0
                || !self.g.record_in_range(cur)
                || self.owner[cur as usize] != 0
                || !seen.insert(cur)
            {
                return;
            }
            self.tail_records.insert(cur);
            let at = self.g.record_pos(pktfs_layout::RecordId(cur));
            let Some(bytes) = self.read::<64>(at.0) else {
                return;
            };
            let Ok((r, next)) = Record::from_bytes(&bytes, at, &self.g) else {
                return;
            };
            if r.kind != RecordKind::Dirent {
                return;
            }
            if self
                .payload(&r)
                .is_some_and(|p| pktfs_layout::crc32c(p) == r.payload_crc)
            {
                self.salvage_cands.insert(r.dirent_ino());
            }
            cur = next.0;
        }
    }

    /// Verify the deferred payload CRCs on every core; a bad one is damage,
    /// as in the walk.
    pub(super) fn check_deferred(&mut self) {
        let jobs = std::mem::take(&mut self.deferred);
        if jobs.is_empty() {
            return;
        }
        let total: u64 = jobs.iter().map(|j| j.2.len as u64).sum();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 16);
        let threads = if total < (256 << 20) { 1 } else { threads };
        let share = total.div_ceil(threads as u64);
        let mut parts: Vec<(usize, usize)> = Vec::new();
        let (mut start, mut acc) = (0, 0u64);
        for (k, j) in jobs.iter().enumerate() {
            acc += j.2.len as u64;
            if acc >= share {
                parts.push((start, k + 1));
                start = k + 1;
                acc = 0;
            }
        }
        if start < jobs.len() {
            parts.push((start, jobs.len()));
        }
        let this = &*self;
        let all = &jobs;
        let bad: Vec<(usize, Option<u32>)> = std::thread::scope(|sc| {
            let handles: Vec<_> = parts
                .iter()
                .map(|&(a, b)| {
                    sc.spawn(move || {
                        let mut bad = Vec::new();
                        for (k, (_, _, r)) in all.iter().enumerate().take(b).skip(a) {
                            let computed = this.payload(r).map(pktfs_layout::crc32c);
                            if r.flags & FLAG_DAMAGED != 0 || computed != Some(r.payload_crc) {
                                bad.push((k, computed));
                            }
                            if let Some(pb) = &this.progress {
                                pb.inc(r.len as u64);
                            }
                        }
                        bad
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| match h.join() {
                    Ok(v) => v,
                    Err(p) => std::panic::resume_unwind(p),
                })
                .collect()
        });
        self.out.counts.payload_bytes_checked += total;
        for (k, computed) in bad {
            let (ino, node, r) = jobs[k];
            let Some(i) = self.inodes.get(&ino) else {
                continue;
            };
            let (path, id) = (i.path.clone(), i.data.nodes.get(node).map(|n| n.id));
            let Some(id) = id else {
                continue;
            };
            let (keep, f) = self.data_damage(ino, &path, id, &r, computed);
            if keep {
                continue;
            }
            if let Some(i) = self.inodes.get_mut(&ino) {
                if let Some(n) = i.data.nodes.get_mut(node) {
                    n.keep = false;
                }
                i.data.findings.push(f);
                i.data.unsafe_reason = true;
            }
        }
    }
}
