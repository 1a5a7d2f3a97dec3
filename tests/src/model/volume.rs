//! The Volume side of the model: an [`Op`] applied to a live Volume (the
//! result or errno it returned), and a Volume's whole tree dumped into the
//! comparable [`Tree`] the model also produces.

use super::*;

#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: FileType,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub nlink: u32,
    pub size: u64,
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The smallest path naming the same inode (hard links share it).
    pub ident: String,
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = pktfs_layout::crc32c(&self.data);
        write!(
            f,
            "{:?} {:o} {}:{} rdev={:#x} nlink={} size={} data[{}]={:08x} xattrs={:?} ident={}",
            self.kind,
            self.perm,
            self.uid,
            self.gid,
            self.rdev,
            self.nlink,
            self.size,
            self.data.len(),
            h,
            self.xattrs
                .iter()
                .map(|(k, v)| (
                    String::from_utf8_lossy(k).into_owned(),
                    v.len(),
                    pktfs_layout::crc32c(v)
                ))
                .collect::<Vec<_>>(),
            self.ident
        )
    }
}

/// A whole tree: path -> entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<String, Entry>);

impl Tree {
    /// The differences from `other`, at most `max` lines.
    pub fn diff(&self, other: &Tree, max: usize) -> String {
        let mut out = Vec::new();
        for (p, e) in &self.0 {
            match other.0.get(p) {
                None => out.push(format!("  only in left: {p} {e:?}")),
                Some(o) if o != e => {
                    let mut s = format!("  {p}:\n    left  {e:?}\n    right {o:?}");
                    if e.data != o.data {
                        if let Some(i) = e.data.iter().zip(&o.data).position(|(a, b)| a != b) {
                            s.push_str(&format!("\n    first differing byte at {i}"));
                        }
                    }
                    out.push(s)
                }
                _ => {}
            }
        }
        for (p, e) in &other.0 {
            if !self.0.contains_key(p) {
                out.push(format!("  only in right: {p} {e:?}"));
            }
        }
        let n = out.len();
        out.truncate(max);
        if n > max {
            out.push(format!("  ... {} more", n - max));
        }
        out.join("\n")
    }
}

// ---------------------------------------------------------------------------
// The Volume side.

pub(super) fn vresolve(v: &Volume, path: &str) -> Result<u64, Errno> {
    v.resolve_path(path).map(|a| a.ino).map_err(|e| e.errno())
}

fn vparent(v: &Volume, path: &str) -> Result<(u64, Vec<u8>), Errno> {
    let cs = split(path);
    let Some((last, dirs)) = cs.split_last() else {
        return Err(libc::EINVAL);
    };
    let mut cur = v.root();
    for c in dirs {
        cur = v.lookup(cur, c).map_err(|e| e.errno())?.ino;
    }
    Ok((cur, last.to_vec()))
}

/// Apply `op` to a Volume.
pub fn apply_vol(v: &Volume, op: &Op) -> OpResult {
    let e = |r: pktfs_fs::FsError| r.errno();
    match op {
        Op::Create { path, perm } => {
            let (p, n) = vparent(v, path)?;
            v.create(p, &n, *perm, 0, 0).map(|_| 0).map_err(e)
        }
        Op::Mkdir { path, perm } => {
            let (p, n) = vparent(v, path)?;
            v.mkdir(p, &n, *perm, 0, 0).map(|_| 0).map_err(e)
        }
        Op::Mknod {
            path,
            kind,
            perm,
            rdev,
        } => {
            let (p, n) = vparent(v, path)?;
            v.mknod(p, &n, *kind, *perm, 0, 0, *rdev)
                .map(|_| 0)
                .map_err(e)
        }
        Op::Symlink { path, target } => {
            let (p, n) = vparent(v, path)?;
            v.symlink(p, &n, target.as_bytes(), 0, 0)
                .map(|_| 0)
                .map_err(e)
        }
        Op::Write {
            path,
            off,
            len,
            seed,
        } => {
            let i = vresolve(v, path)?;
            v.write(i, *off, &pattern(*seed, *off, *len as usize))
                .map(|n| n as u64)
                .map_err(e)
        }
        Op::Append { path, len, seed } => {
            let i = vresolve(v, path)?;
            let off = v.getattr(i).map_err(e)?.size;
            v.append(i, &pattern(*seed, off, *len as usize), None)
                .map_err(e)
        }
        Op::Truncate { path, size } => {
            let i = vresolve(v, path)?;
            v.setattr(
                i,
                &SetAttr {
                    size: Some(*size),
                    ..Default::default()
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::Fallocate {
            path,
            off,
            len,
            keep_size,
            punch,
        } => {
            let i = vresolve(v, path)?;
            v.fallocate(
                i,
                *off,
                *len,
                FallocMode {
                    keep_size: *keep_size,
                    punch_hole: *punch,
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::CopyRange {
            src,
            soff,
            dst,
            doff,
            len,
        } => {
            let s = vresolve(v, src)?;
            let d = vresolve(v, dst)?;
            v.copy_range(s, *soff, d, *doff, *len).map_err(e)
        }
        Op::Link { src, dst } => {
            let s = vresolve(v, src)?;
            let (p, n) = vparent(v, dst)?;
            v.link(s, p, &n).map(|_| 0).map_err(e)
        }
        Op::Unlink { path } => {
            let (p, n) = vparent(v, path)?;
            v.unlink(p, &n).map(|_| 0).map_err(e)
        }
        Op::Rmdir { path } => {
            let (p, n) = vparent(v, path)?;
            v.rmdir(p, &n).map(|_| 0).map_err(e)
        }
        Op::Rename {
            src,
            dst,
            noreplace,
            exchange,
        } => {
            let (sp, sn) = vparent(v, src)?;
            let (dp, dn) = vparent(v, dst)?;
            v.rename(
                sp,
                &sn,
                dp,
                &dn,
                RenameFlags {
                    noreplace: *noreplace,
                    exchange: *exchange,
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::Chmod { path, perm } => {
            let i = vresolve(v, path)?;
            v.setattr(
                i,
                &SetAttr {
                    mode: Some(*perm),
                    ..Default::default()
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::Chown { path, uid, gid } => {
            let i = vresolve(v, path)?;
            v.setattr(
                i,
                &SetAttr {
                    uid: Some(*uid),
                    gid: Some(*gid),
                    ..Default::default()
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::SetXattr {
            path,
            name,
            len,
            seed,
            create,
            replace,
        } => {
            let i = vresolve(v, path)?;
            v.setxattr(
                i,
                name.as_bytes(),
                &pattern(*seed, 0, *len as usize),
                XattrFlags {
                    create: *create,
                    replace: *replace,
                },
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::RemoveXattr { path, name } => {
            let i = vresolve(v, path)?;
            v.removexattr(i, name.as_bytes()).map(|_| 0).map_err(e)
        }
        Op::TierOut { path } => {
            let i = vresolve(v, path)?;
            tier::tier_out(v, i).map(|_| 0).map_err(e)
        }
        Op::Recall { path } => {
            let i = vresolve(v, path)?;
            tier::use_store(v);
            v.tier_recall(i, u64::MAX).map(|_| 0).map_err(e)
        }
        Op::SetAcl {
            path,
            default,
            entries,
        } => {
            let i = vresolve(v, path)?;
            let name = if *default {
                ACL_DEFAULT_XATTR
            } else {
                ACL_ACCESS_XATTR
            };
            v.setxattr(
                i,
                name.as_bytes(),
                &acl_bytes(entries),
                XattrFlags::default(),
            )
            .map(|_| 0)
            .map_err(e)
        }
        Op::Upload {
            path,
            len,
            segs,
            seed,
            replace,
        } => {
            let (p, n) = vparent(v, path)?;
            let t = v.create_tmpfile(0o644, 0, 0).map_err(e)?;
            let mut pieces = Vec::new();
            // The last pieces are committed with the name (`rx_link`), as
            // netpath does for a body received inline.
            let r = upload(v, t.ino, *len as u64, *segs, *seed, &mut pieces)
                .and_then(|()| v.rx_link(t.ino, std::mem::take(&mut pieces), p, &n, *replace));
            if let Err(x) = r {
                v.rx_abort(pieces);
                v.unpin(t.ino, 1);
                return Err(x.errno());
            }
            Ok(0)
        }
    }
}

/// The receive half of [`Op::Upload`]: pieces committed two at a time; the
/// last one or two (none for an empty body) are left in `pending`, for the caller to commit with the
/// name (or to abort on error).
fn upload<'v>(
    v: &'v Volume,
    ino: u64,
    total: u64,
    segs: u8,
    seed: u8,
    pending: &mut Vec<pktfs_fs::RxPiece<'v>>,
) -> pktfs_fs::Result<()> {
    const HEADER: &[u8] = b"PUT /upload HTTP/1.1\r\n\r\n";
    let seg = total.div_ceil(segs.max(1) as u64).max(1);
    let mut off = 0u64;
    let mut first = true;
    while off < total {
        let want = seg.min(total - off);
        let skip = if first { HEADER.len() as u64 } else { 0 };
        let mut buf = v.rx_reserve((want + skip) as u32)?;
        let n = want.min(buf.cap() as u64 - skip);
        if first {
            buf.append(HEADER); // stands in for the received request head
        }
        buf.append(&pattern(seed, off, n as usize));
        let piece = buf.piece(skip as u32, n as u32, pktfs_fs::RxTime::Kernel(42), off);
        drop(buf);
        pending.push(piece);
        off += n;
        if pending.len() == 2 && off < total {
            v.rx_commit(ino, std::mem::take(pending))?;
        }
        first = false;
    }
    // What is left in `pending` is the tail the caller links with.
    Ok(())
}

/// Dump a Volume's whole tree. Checks on the way that every dirent's type
/// matches its inode, that directories name their parent, that no directory
/// is reached twice, and that every file reads back at its full size.
pub fn dump(v: &Volume) -> Result<Tree, String> {
    let root = v.root();
    let mut stack = vec![("/".to_string(), root)];
    let mut seen_dirs = std::collections::HashSet::new();
    let mut ident: HashMap<u64, String> = HashMap::new();
    let mut out: Vec<(String, u64)> = Vec::new();
    while let Some((path, ino)) = stack.pop() {
        let a = v
            .getattr(ino)
            .map_err(|e| format!("{path}: getattr: {e}"))?;
        if a.kind == FileType::Directory {
            if !seen_dirs.insert(ino) {
                return Err(format!("{path}: directory {ino} reached twice"));
            }
            let list = v
                .list_dir(ino)
                .map_err(|e| format!("{path}: readdir: {e}"))?;
            for de in list.into_iter().rev() {
                let cp = join(&path, &de.name);
                let ca = v
                    .getattr(de.ino)
                    .map_err(|e| format!("{cp}: getattr of inode {}: {e}", de.ino))?;
                if ca.kind != de.kind {
                    return Err(format!(
                        "{cp}: dirent says {:?}, inode says {:?}",
                        de.kind, ca.kind
                    ));
                }
                if ca.kind == FileType::Directory {
                    let p = v
                        .parent_of(de.ino)
                        .map_err(|e| format!("{cp}: parent_of: {e}"))?;
                    if p != ino {
                        return Err(format!("{cp}: parent is {p}, expected {ino}"));
                    }
                }
                let lk = v
                    .lookup(ino, &de.name)
                    .map_err(|e| format!("{cp}: lookup: {e}"))?;
                if lk.ino != de.ino {
                    return Err(format!(
                        "{cp}: lookup gives {} but readdir {}",
                        lk.ino, de.ino
                    ));
                }
                stack.push((cp, de.ino));
            }
        }
        out.push((path, ino));
    }
    for (p, ino) in &out {
        let e = ident.entry(*ino).or_insert_with(|| p.clone());
        if p < e {
            *e = p.clone();
        }
    }
    let mut t = Tree::default();
    for (p, ino) in out {
        let a = v.getattr(ino).map_err(|e| format!("{p}: {e}"))?;
        let data = match a.kind {
            // Test images are small; a bigger size is a sparse file (or a
            // hostile size from a fuzzed image) not worth materialising.
            FileType::Regular if a.size > 64 << 20 => {
                return Err(format!("{p}: {} bytes: too large to dump", a.size))
            }
            FileType::Regular => {
                let d = v
                    .read(ino, 0, a.size)
                    .map_err(|e| format!("{p}: read: {e}"))?;
                if d.len() as u64 != a.size {
                    return Err(format!("{p}: read {} bytes of {}", d.len(), a.size));
                }
                d
            }
            FileType::Symlink => v.readlink(ino).map_err(|e| format!("{p}: readlink: {e}"))?,
            _ => Vec::new(),
        };
        let mut xattrs = BTreeMap::new();
        for n in v
            .listxattr(ino)
            .map_err(|e| format!("{p}: listxattr: {e}"))?
        {
            let val = v
                .getxattr(ino, &n)
                .map_err(|e| format!("{p}: getxattr: {e}"))?;
            xattrs.insert(n, val);
        }
        // The S3 owner a bucket directory is born with is no client's
        // xattr, but it is part of the state a crash must keep whole.
        if a.kind == FileType::Directory {
            let owner = pktfs_fs::S3_OWNER_XATTR;
            if let Some(o) = v
                .system_xattr(ino, owner)
                .map_err(|e| format!("{p}: system xattr: {e}"))?
            {
                xattrs.insert(owner.to_vec(), o);
            }
        }
        t.0.insert(
            p,
            Entry {
                kind: a.kind,
                perm: a.perm,
                uid: a.uid,
                gid: a.gid,
                rdev: a.rdev,
                nlink: a.nlink,
                size: a.size,
                data,
                xattrs,
                ident: ident[&ino].clone(),
            },
        );
    }
    Ok(t)
}
