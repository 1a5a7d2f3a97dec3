//! Loading an inode: its header and attributes (the live slot, the other
//! one, or rebuilt), then its chains.

use super::*;

impl Scan<'_> {
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
}
