//! Planning repairs from what the walk found: attributes, chain relinks,
//! orphans into lost+found.

use super::*;

impl Scan<'_> {
    // ---- attributes ------------------------------------------------------

    pub(super) fn attr_fixes(&mut self) {
        let salvaged: HashSet<u32> = self.salvaged.iter().map(|s| s.0).collect();
        let inos: Vec<u32> = self.inodes.keys().copied().collect();
        for ino in inos {
            let mut findings = Vec::new();
            let Some(i) = self.inodes.get(&ino) else {
                continue;
            };
            let (path, attr, fallback, rebuilt) = (i.path.clone(), i.attr, i.fallback, i.rebuilt);
            findings.extend(i.attr_findings.iter().copied());
            let size_end = i.size_end;
            let mut want = attr;
            let mut safe = fallback.is_none() && !rebuilt;
            if !salvaged.contains(&ino) {
                if attr.kind == FileType::Directory {
                    want.nlink = 2 + self.subdirs.get(&ino).copied().unwrap_or(0);
                    want.parent = self.dir_parent.get(&ino).copied().unwrap_or(ROOT_INO);
                } else {
                    want.nlink = self.links.get(&ino).copied().unwrap_or(0);
                }
            }
            if attr.kind == FileType::Symlink && size_end != attr.size {
                want.size = size_end;
                if !rebuilt {
                    findings.push(self.find(
                        Severity::Error,
                        "symlink.size",
                        Some(ino),
                        Some(&path),
                        None,
                        format!("size {} but the target is {size_end} bytes", attr.size),
                    ));
                }
            }
            if want.nlink != attr.nlink && !rebuilt {
                findings.push(self.find(
                    Severity::Error,
                    "inode.nlink",
                    Some(ino),
                    Some(&path),
                    None,
                    format!("link count {}, should be {}", attr.nlink, want.nlink),
                ));
            }
            if want.parent != attr.parent && !rebuilt {
                findings.push(self.find(
                    Severity::Error,
                    "inode.parent",
                    Some(ino),
                    Some(&path),
                    None,
                    format!(
                        "parent (\"..\") is inode {}, should be {}",
                        attr.parent, want.parent
                    ),
                ));
            }
            if rebuilt {
                let f = self.find(
                    Severity::Error,
                    "inode.rebuilt",
                    Some(ino),
                    Some(&path),
                    None,
                    format!(
                        "no valid attribute slot: attributes must be rebuilt as a {}",
                        kind_name(want.kind)
                    ),
                );
                findings.push(f);
                safe = false;
            }
            let fix = if let (Some(sel), true) = (fallback, want == attr) {
                Some(Fix::SelectSlot { ino, selector: sel })
            } else if rebuilt || fallback.is_some() || want != attr {
                Some(Fix::WriteAttr { ino, attr: want })
            } else {
                None
            };
            if let Some(fix) = fix {
                let what = match &fix {
                    Fix::SelectSlot { .. } => {
                        "fall back to the previous attribute slot".to_string()
                    }
                    _ if rebuilt => format!(
                        "rebuild the attributes (mode {:o}, owner 0:0, size {})",
                        want.mode, want.size
                    ),
                    _ => {
                        let mut parts = Vec::new();
                        if fallback.is_some() {
                            parts.push("fall back to the previous attribute slot".to_string());
                        }
                        if want.nlink != attr.nlink {
                            parts.push(format!("set the link count to {}", want.nlink));
                        }
                        if want.parent != attr.parent {
                            parts.push(format!("set the parent to inode {}", want.parent));
                        }
                        if want.size != attr.size {
                            parts.push(format!("set the size to {}", want.size));
                        }
                        parts.join(", ")
                    }
                };
                self.plan(
                    PlannedFix {
                        fix,
                        safe,
                        ino: Some(ino),
                        path: Some(path),
                        what,
                    },
                    &findings,
                );
            }
        }
    }

    // ---- chains ----------------------------------------------------------

    /// The stores that make a chain exactly its kept records, in order.
    pub(super) fn relink_stores(&self, c: &Chain) -> Vec<(u64, u64)> {
        let mut stores = Vec::new();
        let mut eff = c.head_addr;
        let mut eff_val = c.head_raw;
        for n in c.nodes.iter().filter(|n| n.keep) {
            if eff_val != n.id {
                stores.push((eff, n.id));
            }
            eff = self.g.record_pos(pktfs_layout::RecordId(n.id)).0;
            eff_val = n.next_raw;
        }
        if eff_val != 0 {
            stores.push((eff, 0));
        }
        stores
    }

    pub(super) fn relink_fixes(&mut self) {
        let inos: Vec<u32> = self.inodes.keys().copied().collect();
        for ino in inos {
            for xattr in [false, true] {
                // Lost ranges get their marks first (spare records, placed
                // among the nodes), so the stores below link them in.
                let marking = !xattr && !self.drop_damaged;
                if marking
                    && self
                        .inodes
                        .get(&ino)
                        .is_some_and(|i| !i.data.lost.is_empty())
                {
                    let Some(mut c) = self
                        .inodes
                        .get_mut(&ino)
                        .map(|i| std::mem::take(&mut i.data))
                    else {
                        continue;
                    };
                    let placed = self.place_marks(ino, &mut c);
                    if let Err(why) = placed {
                        self.cannot_mark(&c, why);
                    }
                    if let Some(i) = self.inodes.get_mut(&ino) {
                        i.data = c;
                    }
                    if placed.is_err() {
                        // Cutting without the marks would make the lost
                        // bytes read as zeros: the chain is left as it is.
                        continue;
                    }
                }
                let Some(i) = self.inodes.get(&ino) else {
                    continue;
                };
                let c = if xattr { &i.xattr } else { &i.data };
                let stores = self.relink_stores(c);
                if stores.is_empty() && c.findings.is_empty() {
                    continue;
                }
                let dropped = c.nodes.iter().filter(|n| !n.keep).count();
                let kept = c.nodes.len() - dropped;
                let (findings, safe, path) = (c.findings.clone(), !c.unsafe_reason, i.path.clone());
                if stores.is_empty() {
                    continue;
                }
                let which = if xattr { "xattr" } else { "data" };
                let what = if !xattr && c.cut.is_some() {
                    self.cut_repair(c, marking)
                } else if dropped > 0 {
                    format!(
                        "relink the {which} chain without {dropped} bad record(s), keeping {kept}"
                    )
                } else {
                    format!("truncate the {which} chain after {kept} record(s)")
                };
                let records = if xattr {
                    Vec::new()
                } else {
                    Self::mark_records(c)
                };
                self.plan(
                    PlannedFix {
                        fix: Fix::Links { records, stores },
                        safe,
                        ino: Some(ino),
                        path: Some(path),
                        what,
                    },
                    &findings,
                );
            }
        }
    }

    /// Where to append to directory `d`: the link word after its last kept
    /// entry, and that entry's cookie.
    pub(super) fn dir_tail(&self, d: &Ino) -> (u64, u64) {
        match d.data.nodes.iter().rev().find(|n| n.keep) {
            Some(n) => (
                self.g.record_pos(pktfs_layout::RecordId(n.id)).0,
                n.rec.seq.max(FIRST_COOKIE - 1),
            ),
            None => (d.data.head_addr, FIRST_COOKIE - 1),
        }
    }

    pub(super) fn salvage_fix(&mut self) {
        if self.salvaged.is_empty() {
            return;
        }
        let Some(root) = self.inodes.get(&ROOT_INO) else {
            return;
        };
        let (root_tail, root_last_seq) = self.dir_tail(root);
        let mut lf = None;
        let mut lf_name = LOST_FOUND.to_vec();
        for e in &root.entries {
            if e.name == LOST_FOUND {
                match self.inodes.get(&e.ino) {
                    Some(d) if d.attr.kind == FileType::Directory && !d.rebuilt => {
                        let (tail, last) = self.dir_tail(d);
                        let names = d.entries.iter().map(|e| e.name.clone()).collect();
                        lf = Some((e.ino, tail, last, names));
                    }
                    _ => lf_name = b"lost+found.fsck".to_vec(),
                }
            }
        }
        let n = self.salvaged.len();
        let free_inode = (2..=self.g.inode_count).find(|i| !self.inodes.contains_key(i));
        // Buffers no claimed record touches.
        let used = self.used_buffers(true);
        let bs = self.g.buffer_size_bytes as u64;
        let need = ((n as u64 + 1) * 24).div_ceil(bs) as usize + 1;
        let free_buffers: Vec<u32> = (0..self.g.buffer_count as u32)
            .filter(|&b| !used[b as usize])
            .take(need)
            .collect();
        let items = self.salvaged.clone();
        let mut findings = Vec::new();
        for &(t, k) in &items {
            let p = self.inodes.get(&t).map(|i| i.path.clone());
            findings.push(self.find(
                Severity::Error,
                "inode.orphan",
                Some(t),
                p.as_deref(),
                None,
                format!("{} {t} is no longer named by any directory", kind_name(k)),
            ));
        }
        let what = format!(
            "link {n} orphan(s) into /{}",
            show(lf.as_ref().map(|_| LOST_FOUND).unwrap_or(&lf_name))
        );
        self.plan(
            PlannedFix {
                fix: Fix::Salvage(Box::new(Salvage {
                    lf,
                    lf_name,
                    root_tail,
                    root_last_seq,
                    items,
                    free_inode,
                    free_buffers,
                })),
                safe: false,
                ino: None,
                path: None,
                what,
            },
            &findings,
        );
    }

    /// Buffers touched by records: every claimed one (`all_claimed`), or
    /// only the kept records of reachable inodes.
    pub(super) fn used_buffers(&self, all_claimed: bool) -> Vec<bool> {
        let mut used = vec![false; self.g.buffer_count as usize];
        let bs = self.g.buffer_size_bytes as u64;
        let mut mark = |r: &Record| {
            let start = r.buffer as u64 * bs + r.buf_off as u64;
            let end = start + (r.len as u64).max(1);
            for b in start / bs..end.div_ceil(bs) {
                if let Some(u) = used.get_mut(b as usize) {
                    *u = true;
                }
            }
        };
        for i in self.inodes.values() {
            for n in i.data.nodes.iter().chain(i.xattr.nodes.iter()) {
                if (n.keep || all_claimed) && !n.rec.is_remote() {
                    mark(&n.rec);
                }
            }
        }
        used
    }
}
