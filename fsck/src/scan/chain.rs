//! Loading an inode and walking its chains: every record's CRC, kind,
//! bounds, link and claim; payload CRCs (large ones in parallel).

use super::*;

impl Scan<'_> {
    // ---- inodes and chains ----------------------------------------------

    /// Load an inode: header, attributes (falling back to the other slot, or
    /// rebuilt from `want` when both are bad), then its chains. `None` if
    /// its attributes are unreadable and nothing says what it should be.
    pub(super) fn load_inode(
        &mut self,
        ino: u32,
        want: Option<FileType>,
        path: String,
    ) -> Option<Ino> {
        if !self.g.ino_in_range(ino as u64) {
            return None;
        }
        let pos = self.g.inode_pos(ino).0;
        let bytes: [u8; INODE_SIZE] = self.read(pos)?;
        let sel = le64(&bytes[0..8]);
        let (generation, live) = (sel >> 1, (sel & 1) as usize);
        let so = SLOTS_OFF as usize + live * SLOT_SIZE as usize;
        let mut attr_findings = Vec::new();
        let mut fallback = None;
        let mut rebuilt = false;
        let mut attr_err = None;
        let root = ino == ROOT_INO;
        let mut attr = match AttrSlot::from_bytes(
            &bytes[so..so + 64],
            PmOffset(pos + so as u64),
            generation,
        ) {
            Ok(a) => Some(a),
            Err(e) => {
                attr_err = Some(format!("live attribute slot is bad: {e}"));
                let other = live ^ 1;
                let oo = SLOTS_OFF as usize + other * SLOT_SIZE as usize;
                let ob = &bytes[oo..oo + 64];
                let g32 = u32::from_le_bytes([ob[56], ob[57], ob[58], ob[59]]) as u64;
                let cands = [
                    generation.wrapping_sub(1),
                    (generation & !0xffff_ffff) | g32,
                    g32,
                ];
                cands
                    .iter()
                    .filter(|&&c| c <= u64::MAX >> 1)
                    .find_map(|&c| {
                        AttrSlot::from_bytes(ob, PmOffset(pos + oo as u64), c)
                            .ok()
                            .inspect(|_| fallback = Some(InodeHeader::selector(c, other as u8)))
                    })
            }
        };
        if attr.is_none() {
            let kind = if root {
                Some(FileType::Directory)
            } else {
                want
            };
            let kind = kind?;
            rebuilt = true;
            attr = Some(AttrSlot {
                kind,
                mode: match kind {
                    FileType::Directory => 0o755,
                    FileType::Symlink => 0o777,
                    _ => 0o644,
                },
                uid: 0,
                gid: 0,
                nlink: if kind == FileType::Directory { 2 } else { 1 },
                size: 0,
                atime_ns: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                rdev: 0,
                parent: if kind == FileType::Directory {
                    ROOT_INO
                } else {
                    0
                },
            });
        }
        let mut attr = attr?;
        // Only an inode that is loaded gets findings; one that cannot be is
        // reported through the dirent naming it (or not at all, for an
        // orphan candidate).
        if let Some(msg) = attr_err {
            let f = self.find(
                Severity::Error,
                "inode.attr",
                Some(ino),
                Some(&path),
                None,
                msg,
            );
            attr_findings.push(f);
        }
        if root && attr.kind != FileType::Directory {
            let f = self.find(
                Severity::Error,
                "root.kind",
                Some(ino),
                Some(&path),
                None,
                format!("root inode is a {}, not a directory", kind_name(attr.kind)),
            );
            attr_findings.push(f);
            rebuilt = true;
            attr.kind = FileType::Directory;
            attr.mode = 0o755;
            attr.size = 0;
            attr.rdev = 0;
        }
        let mut i = Ino {
            ino,
            path,
            attr,
            fallback,
            rebuilt,
            attr_findings,
            data: Chain::default(),
            xattr: Chain::default(),
            entries: Vec::new(),
            size_end: 0,
        };
        i.data = self.walk_chain(&mut i, false);
        i.xattr = self.walk_chain(&mut i, true);
        if rebuilt && attr.kind == FileType::Regular {
            i.attr.size = i.size_end;
        }
        Some(i)
    }

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

    pub(super) fn walk_chain(&mut self, i: &mut Ino, xattr: bool) -> Chain {
        let g = self.g;
        let head_addr = g.inode_pos(i.ino).0 + if xattr { XATTR_HEAD_OFF } else { DATA_HEAD_OFF };
        let head_raw = self.read_u64(head_addr).unwrap_or(0);
        let mut c = Chain {
            head_addr,
            head_raw,
            ..Chain::default()
        };
        let which = if xattr { "xattr" } else { "data" };
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
        // A regular file's data chain that breaks loses the rest of the
        // file: `lost` keeps that visible and links back what follows.
        let file_data = !xattr && kind == FileType::Regular;
        let path = i.path.clone();
        let ino = i.ino;
        let mut prev_end = 0u64;
        let mut prev_seq: Option<u64> = None;
        let mut names: HashSet<Vec<u8>> = HashSet::new();
        let mut sym_contig = true;
        let mut cur = head_raw;
        let mut from = "head".to_string();
        while cur != 0 {
            if !g.record_in_range(cur) {
                self.chain_error(
                    &mut c,
                    "chain.link",
                    ino,
                    &path,
                    None,
                    format!("{which} chain {from} links to record {cur}, outside the record table"),
                );
                if file_data {
                    c.cut = Some(lost::Cut::at(
                        prev_end,
                        None,
                        None,
                        format!("{which} chain {from} links outside the record table"),
                    ));
                }
                break;
            }
            let claimed = self.owner[cur as usize];
            if claimed != 0 {
                let (code, msg) = if claimed == ino {
                    (
                        "chain.cycle",
                        format!("{which} chain {from} loops back to record {cur}"),
                    )
                } else {
                    ("record.shared", format!("{which} chain {from} links to record {cur}, which belongs to inode {claimed}"))
                };
                self.chain_error(&mut c, code, ino, &path, Some(cur), msg);
                if file_data {
                    c.cut = Some(lost::Cut::at(
                        prev_end,
                        Some(cur),
                        None,
                        format!("{which} chain {from} links to record {cur}, already in a chain"),
                    ));
                }
                break;
            }
            let at = g.record_pos(pktfs_layout::RecordId(cur));
            let Some(bytes) = self.read::<64>(at.0) else {
                break;
            };
            let (r, next) = match Record::from_bytes(&bytes, at, &g) {
                Ok(x) => x,
                Err(e) => {
                    // The link is outside the record CRC: a record whose
                    // only fault is a link out of range is intact, and
                    // kept; the chain ends after it (the bad link is
                    // reported at the top of the loop).
                    let mut body = bytes;
                    body[..8].fill(0);
                    match Record::from_bytes(&body, at, &g) {
                        Ok((r, _)) => (r, pktfs_layout::RecordId(le64(&bytes[0..8]))),
                        Err(_) => {
                            self.chain_error(
                                &mut c,
                                "record.bad",
                                ino,
                                &path,
                                Some(cur),
                                format!("{which} chain: {e}"),
                            );
                            self.tail_records.insert(cur);
                            if !xattr && kind == FileType::Directory {
                                self.tail_salvage(le64(&bytes[0..8]));
                            }
                            if file_data {
                                // Its link may still lead on: `follow_cuts`.
                                let follow = Some(le64(&bytes[0..8])).filter(|&n| n != 0);
                                c.cut = Some(lost::Cut::at(
                                    prev_end,
                                    Some(cur),
                                    follow,
                                    format!("record {cur} of the data chain is bad"),
                                ));
                            }
                            break;
                        }
                    }
                }
            };
            // A regular file's data chain may hold remote records too.
            let remote_ok = r.kind == RecordKind::Remote && kind == FileType::Regular && !xattr;
            if Some(r.kind) != expected && !remote_ok {
                let msg = match expected {
                    None => format!(
                        "a {} has no data chain, but its head links to a {:?} record",
                        kind_name(kind),
                        r.kind
                    ),
                    Some(k) => format!("{:?} record in the {which} chain (expected {k:?})", r.kind),
                };
                self.chain_error(&mut c, "chain.kind", ino, &path, Some(cur), msg);
                self.tail_records.insert(cur);
                if file_data {
                    c.cut = Some(lost::Cut::at(
                        prev_end,
                        Some(cur),
                        None,
                        format!("the data chain links to {:?} record {cur}", r.kind),
                    ));
                }
                break;
            }
            let mut node = Node {
                id: cur,
                next_raw: next.0,
                keep: true,
                rec: r,
            };
            match r.kind {
                RecordKind::Data | RecordKind::Remote => {
                    if r.file_off < prev_end {
                        self.chain_error(
                            &mut c,
                            "data.order",
                            ino,
                            &path,
                            Some(cur),
                            format!("bytes [{}, {}) overlap or precede the previous record, which ends at {prev_end}", r.file_off, r.file_end()),
                        );
                        self.tail_records.insert(cur);
                        if file_data {
                            c.cut = Some(lost::Cut::at(
                                prev_end,
                                Some(cur),
                                None,
                                format!("record {cur} of the data chain is out of order"),
                            ));
                        }
                        break;
                    }
                    if kind == FileType::Regular && r.file_off >= i.attr.size && !i.rebuilt {
                        let f = self.find(
                            Severity::Error,
                            "data.past_size",
                            Some(ino),
                            Some(&path),
                            Some(cur),
                            format!(
                                "record at bytes [{}, {}) lies past the size {}",
                                r.file_off,
                                r.file_end(),
                                i.attr.size
                            ),
                        );
                        c.findings.push(f);
                        self.tail_records.insert(cur);
                        break;
                    }
                    node.keep = self.accept_data(i, &mut c, cur, &r, &mut sym_contig);
                    prev_end = r.file_end();
                }
                RecordKind::Dirent => {
                    self.owner[cur as usize] = ino;
                    let name = self.payload(&r).map(<[u8]>::to_vec).unwrap_or_default();
                    let crc_ok = self.payload_ok(&r);
                    let problem = if !crc_ok {
                        Some(("dirent.crc", "name checksum mismatch".to_string()))
                    } else if !valid_name(&name) {
                        Some(("dirent.name", format!("invalid name {:?}", show(&name))))
                    } else if prev_seq.is_some_and(|p| r.seq <= p) {
                        Some((
                            "dirent.order",
                            format!("entry {:?}: cookie {} out of order", show(&name), r.seq),
                        ))
                    } else if names.contains(&name) {
                        Some((
                            "dirent.duplicate",
                            format!("duplicate entry {:?}", show(&name)),
                        ))
                    } else {
                        None
                    };
                    match problem {
                        Some((code, msg)) => {
                            self.chain_error(&mut c, code, ino, &path, Some(cur), msg);
                            node.keep = false;
                            self.salvage_cands.insert(r.dirent_ino());
                        }
                        None => {
                            prev_seq = Some(r.seq);
                            names.insert(name.clone());
                            i.entries.push(Entry {
                                node: c.nodes.len(),
                                name,
                                ino: r.dirent_ino(),
                                dtype: r.dirent_dtype(),
                                id: cur,
                                rec: r,
                            });
                        }
                    }
                }
                RecordKind::Xattr => {
                    self.owner[cur as usize] = ino;
                    let name = self
                        .payload(&r)
                        .map(|p| p[..(r.aux as usize).min(p.len())].to_vec())
                        .unwrap_or_default();
                    let problem = if !self.payload_ok(&r) {
                        Some((
                            "xattr.crc",
                            format!("attribute {:?}: checksum mismatch", show(&name)),
                        ))
                    } else if !names.insert(name.clone()) {
                        Some((
                            "xattr.duplicate",
                            format!("duplicate attribute {:?}", show(&name)),
                        ))
                    } else {
                        None
                    };
                    if let Some((code, msg)) = problem {
                        self.chain_error(&mut c, code, ino, &path, Some(cur), msg);
                        node.keep = false;
                    }
                }
            }
            c.nodes.push(node);
            from = format!("record {cur}");
            cur = next.0;
        }
        if !xattr && kind == FileType::Symlink && !sym_contig {
            let f = self.find(
                Severity::Error,
                "symlink.gap",
                Some(ino),
                Some(&path),
                None,
                format!(
                    "symlink target has a hole; only its first {} bytes are contiguous",
                    i.size_end
                ),
            );
            // Cut the chain after the contiguous prefix.
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
        c
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
