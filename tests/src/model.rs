//! The reference model: a plain in-memory tree that every pktfs operation
//! is also applied to, with the result (or errno) the Volume must return;
//! and a dump of a Volume's whole tree into the same shape, for comparing
//! after every operation, remount and crash.
//!
//! Operations address files by path (`/A/foo`), so one [`Op`] list drives
//! the model, a live Volume, and a Volume recovered from a crash image.
//!
//! - [`crash`]: crash-state enumeration (Chipmunk-style: just before every
//!   fence, any subset of the in-flight lines may have reached the media)
//!   and the per-image check (fsck, recovery, tree equality, usability).
//! - [`gen`]: proptest strategies for operation sequences.
//! - [`ace`]: the seeded tree and the every-operation list of the crash suite.

pub mod ace;
pub mod crash;
pub mod gen;
pub mod tier;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use pktfs::media::Pm;
use pktfs::volume::{ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR};
use pktfs::{Acl, FallocMode, FileType, RenameFlags, SetAttr, Volume, XattrFlags};

pub use layout::GeometryParams;

pub type Errno = i32;
pub type OpResult = Result<u64, Errno>;

const NAME_MAX: usize = 255;
const MAX_FILE_SIZE: u64 = i64::MAX as u64;
const MAX_NLINK: u32 = 65000;
const MAX_XATTR_VALUE: usize = 65536;
const ROOT: u64 = 1;

/// One file-system operation, by path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        perm: u32,
    },
    Mkdir {
        path: String,
        perm: u32,
    },
    Mknod {
        path: String,
        kind: FileType,
        perm: u32,
        rdev: u32,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// Write `len` pattern bytes (from `seed`) at `off`.
    Write {
        path: String,
        off: u64,
        len: u32,
        seed: u8,
    },
    Append {
        path: String,
        len: u32,
        seed: u8,
    },
    Truncate {
        path: String,
        size: u64,
    },
    Fallocate {
        path: String,
        off: u64,
        len: u64,
        keep_size: bool,
        punch: bool,
    },
    CopyRange {
        src: String,
        soff: u64,
        dst: String,
        doff: u64,
        len: u64,
    },
    Link {
        src: String,
        dst: String,
    },
    Unlink {
        path: String,
    },
    Rmdir {
        path: String,
    },
    Rename {
        src: String,
        dst: String,
        noreplace: bool,
        exchange: bool,
    },
    Chmod {
        path: String,
        perm: u32,
    },
    Chown {
        path: String,
        uid: u32,
        gid: u32,
    },
    SetXattr {
        path: String,
        name: String,
        len: u32,
        seed: u8,
        create: bool,
        replace: bool,
    },
    RemoveXattr {
        path: String,
        name: String,
    },
    /// setfacl: the access ACL (or the default ACL) of `path` set to
    /// `entries` (tag, perm, id), in the kernel's xattr form.
    SetAcl {
        path: String,
        default: bool,
        entries: Vec<(u16, u16, u32)>,
    },
    /// Tier-out: every local record of `path` uploaded to the tier (the
    /// test store, `model::tier`) and switched to a remote record, its PM
    /// space freed. The content does not change.
    TierOut {
        path: String,
    },
    /// Recall: every remote record of `path` brought back into PM.
    Recall {
        path: String,
    },
    /// An upload, as the network path does it: an unnamed file (like
    /// O_TMPFILE) filled through the receive path (`rx_reserve`, the bytes
    /// stored into the reserved buffers as recv() would, a request header
    /// skipped by the first piece's offset, `rx_piece`, `rx_commit` every two
    /// pieces) in `segs` segments, then the last pieces and the name `path`
    /// in one commit (`rx_link`, replacing a non-directory when `replace`).
    Upload {
        path: String,
        len: u32,
        segs: u8,
        seed: u8,
        replace: bool,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create { path, perm } => write!(f, "create {path} {perm:o}"),
            Op::Mkdir { path, perm } => write!(f, "mkdir {path} {perm:o}"),
            Op::Mknod {
                path,
                kind,
                perm,
                rdev,
            } => write!(f, "mknod {path} {kind:?} {perm:o} rdev={rdev:#x}"),
            Op::Symlink { path, target } => write!(f, "symlink {path} -> {target}"),
            Op::Write {
                path,
                off,
                len,
                seed,
            } => write!(f, "write {path} [{off}, +{len}) seed {seed}"),
            Op::Append { path, len, seed } => write!(f, "append {path} +{len} seed {seed}"),
            Op::Truncate { path, size } => write!(f, "truncate {path} {size}"),
            Op::Fallocate {
                path,
                off,
                len,
                keep_size,
                punch,
            } => {
                write!(
                    f,
                    "fallocate {path} [{off}, +{len}) keep_size={keep_size} punch={punch}"
                )
            }
            Op::CopyRange {
                src,
                soff,
                dst,
                doff,
                len,
            } => write!(f, "copy_range {src}@{soff} -> {dst}@{doff} len {len}"),
            Op::Link { src, dst } => write!(f, "link {src} {dst}"),
            Op::Unlink { path } => write!(f, "unlink {path}"),
            Op::Rmdir { path } => write!(f, "rmdir {path}"),
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => {
                let fl = if *exchange {
                    " EXCHANGE"
                } else if *noreplace {
                    " NOREPLACE"
                } else {
                    ""
                };
                write!(f, "rename{fl} {src} {dst}")
            }
            Op::Chmod { path, perm } => write!(f, "chmod {path} {perm:o}"),
            Op::Chown { path, uid, gid } => write!(f, "chown {path} {uid}:{gid}"),
            Op::SetXattr {
                path,
                name,
                len,
                seed,
                create,
                replace,
            } => {
                write!(f, "setxattr {path} {name} len {len} seed {seed} create={create} replace={replace}")
            }
            Op::RemoveXattr { path, name } => write!(f, "removexattr {path} {name}"),
            Op::TierOut { path } => write!(f, "tier-out {path}"),
            Op::Recall { path } => write!(f, "recall {path}"),
            Op::SetAcl {
                path,
                default,
                entries,
            } => write!(
                f,
                "setfacl{} {path} {entries:?}",
                if *default { " -d" } else { "" }
            ),
            Op::Upload {
                path,
                len,
                segs,
                seed,
                replace,
            } => {
                write!(
                    f,
                    "upload {path} len {len} in {segs} segments seed {seed} replace={replace}"
                )
            }
        }
    }
}

/// Pattern bytes: position-dependent so misplaced data shows, never zero so
/// holes show.
pub fn pattern(seed: u8, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let p = off + i;
            let x =
                (seed as u64).wrapping_mul(0x9e37_79b9) ^ p.wrapping_mul(31) ^ (p >> 7) ^ (p >> 13);
            (x % 255) as u8 + 1
        })
        .collect()
}

fn split(path: &str) -> Vec<&[u8]> {
    path.split('/')
        .filter(|c| !c.is_empty())
        .map(str::as_bytes)
        .collect()
}

fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(libc::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(libc::ENAMETOOLONG);
    }
    Ok(())
}

/// An ACL's xattr form: version 2, then (tag, perm, id) entries.
pub fn acl_bytes(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(t, p, id) in entries {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// Attributes as getxattr shows them: the access ACL's owner, group-or-mask
/// and other entries are the mode's.
fn acl_as_read(x: &BTreeMap<Vec<u8>, Vec<u8>>, perm: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut x = x.clone();
    if let Some(v) = x.get_mut(ACL_ACCESS_XATTR.as_bytes()) {
        if let Ok(Some(a)) = Acl::parse(v) {
            *v = a.with_mode(perm).to_bytes();
        }
    }
    x
}

// ---------------------------------------------------------------------------
// The model.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub kind: FileType,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub nlink: u32,
    /// Regular file contents or symlink target.
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    pub children: BTreeMap<Vec<u8>, u64>,
    /// Directories: the parent directory.
    pub parent: u64,
}

impl Node {
    fn new(kind: FileType, perm: u32, rdev: u32, parent: u64) -> Node {
        Node {
            kind,
            perm: perm & 0o7777,
            uid: 0,
            gid: 0,
            rdev,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            data: Vec::new(),
            xattrs: BTreeMap::new(),
            children: BTreeMap::new(),
            parent: if kind == FileType::Directory {
                parent
            } else {
                0
            },
        }
    }
}

/// The reference model of a pktfs tree.
#[derive(Clone, Debug)]
pub struct Model {
    pub nodes: BTreeMap<u64, Node>,
    next: u64,
}

impl Default for Model {
    fn default() -> Model {
        Model::new()
    }
}

impl Model {
    /// A freshly formatted volume: an empty root, mode 755, owned by 0:0.
    pub fn new() -> Model {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::new(FileType::Directory, 0o755, 0, ROOT));
        Model { nodes, next: 2 }
    }

    fn n(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }
    fn nm(&mut self, id: u64) -> &mut Node {
        self.nodes.get_mut(&id).expect("model node")
    }

    fn lookup(&self, dir: u64, name: &[u8]) -> Result<u64, Errno> {
        if name.len() > NAME_MAX {
            return Err(libc::ENAMETOOLONG);
        }
        let d = self.n(dir);
        if d.kind != FileType::Directory {
            return Err(libc::ENOTDIR);
        }
        d.children.get(name).copied().ok_or(libc::ENOENT)
    }

    /// Only for an existing child (no errors): `None` if absent or `dir` is not a directory.
    fn child(&self, dir: u64, name: &[u8]) -> Option<u64> {
        self.nodes
            .get(&dir)
            .and_then(|d| d.children.get(name).copied())
    }

    pub fn resolve(&self, path: &str) -> Result<u64, Errno> {
        let mut cur = ROOT;
        for c in split(path) {
            cur = self.lookup(cur, c)?;
        }
        Ok(cur)
    }

    fn parent(&self, path: &str) -> Result<(u64, Vec<u8>), Errno> {
        let cs = split(path);
        let Some((last, dirs)) = cs.split_last() else {
            return Err(libc::EINVAL);
        };
        let mut cur = ROOT;
        for c in dirs {
            cur = self.lookup(cur, c)?;
        }
        Ok((cur, last.to_vec()))
    }

    fn file(&self, id: u64) -> Result<(), Errno> {
        match self.n(id).kind {
            FileType::Regular => Ok(()),
            FileType::Directory => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    fn is_below(&self, dir: u64, anc: u64) -> bool {
        let mut cur = dir;
        loop {
            if cur == anc {
                return true;
            }
            let p = self.n(cur).parent;
            if p == cur || p == 0 {
                return false;
            }
            cur = p;
        }
    }

    fn make(
        &mut self,
        path: &str,
        kind: FileType,
        perm: u32,
        rdev: u32,
        target: Option<&[u8]>,
    ) -> OpResult {
        let (p, name) = self.parent(path)?;
        if let Some(t) = target {
            if t.is_empty() {
                return Err(libc::ENOENT);
            }
            if t.len() > 4095 {
                return Err(libc::ENAMETOOLONG);
            }
        }
        check_name(&name)?;
        let pn = self.n(p);
        if pn.kind != FileType::Directory {
            return Err(libc::ENOTDIR);
        }
        if pn.children.contains_key(&name) {
            return Err(libc::EEXIST);
        }
        if kind == FileType::Directory && pn.nlink >= MAX_NLINK {
            return Err(libc::EMLINK);
        }
        let id = self.next;
        self.next += 1;
        // A default ACL in the directory: the new inode's access ACL is it
        // masked by the mode asked for, and a directory inherits it too.
        let default = self.n(p).xattrs.get(ACL_DEFAULT_XATTR.as_bytes()).cloned();
        let mut inherited = BTreeMap::new();
        let mut perm = perm & 0o7777;
        // The setgid-directory rule: the directory's group, and for a new
        // subdirectory its setgid bit.
        let setgid_dir = self.n(p).perm & 0o2000 != 0;
        let dir_gid = self.n(p).gid;
        if setgid_dir && kind == FileType::Directory {
            perm |= 0o2000;
        }
        if let (Some(d), false) = (&default, kind == FileType::Symlink) {
            let acl = Acl::parse(d)
                .expect("stored default ACL")
                .expect("not empty");
            let (mode, access) = acl.create_masq(perm);
            perm = mode;
            if let Some(a) = access {
                inherited.insert(ACL_ACCESS_XATTR.as_bytes().to_vec(), a.to_bytes());
            }
            if kind == FileType::Directory {
                inherited.insert(ACL_DEFAULT_XATTR.as_bytes().to_vec(), d.clone());
            }
        }
        let mut node = Node::new(kind, perm, rdev, p);
        if setgid_dir {
            node.gid = dir_gid;
        }
        node.xattrs = inherited;
        if let Some(t) = target {
            node.data = t.to_vec();
        }
        self.nodes.insert(id, node);
        let pn = self.nm(p);
        pn.children.insert(name, id);
        if kind == FileType::Directory {
            pn.nlink += 1;
        }
        Ok(0)
    }

    fn drop_link(&mut self, id: u64) {
        let n = self.nm(id);
        n.nlink = n.nlink.saturating_sub(1);
        if n.nlink == 0 || n.kind == FileType::Directory {
            self.nodes.remove(&id);
        }
    }

    /// Apply `op`; returns what the Volume must return.
    pub fn apply(&mut self, op: &Op) -> OpResult {
        match op {
            Op::Create { path, perm } => self.make(path, FileType::Regular, *perm, 0, None),
            Op::Mkdir { path, perm } => self.make(path, FileType::Directory, *perm, 0, None),
            Op::Mknod {
                path,
                kind,
                perm,
                rdev,
            } => {
                if matches!(kind, FileType::Directory | FileType::Symlink) {
                    self.parent(path)?;
                    return Err(libc::EINVAL);
                }
                self.make(path, *kind, *perm, *rdev, None)
            }
            Op::Symlink { path, target } => {
                self.make(path, FileType::Symlink, 0o777, 0, Some(target.as_bytes()))
            }
            Op::Write {
                path,
                off,
                len,
                seed,
            } => {
                let id = self.resolve(path)?;
                self.write_at(id, *off, &pattern(*seed, *off, *len as usize))
            }
            Op::Append { path, len, seed } => {
                let id = self.resolve(path)?;
                let off = self.n(id).data.len() as u64;
                self.file(id)?;
                self.write_at(id, off, &pattern(*seed, off, *len as usize))?;
                Ok(off)
            }
            Op::Truncate { path, size } => {
                let id = self.resolve(path)?;
                self.file(id)?;
                if *size > MAX_FILE_SIZE {
                    return Err(libc::EFBIG);
                }
                self.nm(id).data.resize(*size as usize, 0);
                Ok(0)
            }
            Op::Fallocate {
                path,
                off,
                len,
                keep_size,
                punch,
            } => {
                let id = self.resolve(path)?;
                if *len == 0 {
                    return Err(libc::EINVAL);
                }
                let end = off
                    .checked_add(*len)
                    .filter(|&e| e <= MAX_FILE_SIZE)
                    .ok_or(libc::EFBIG)?;
                self.file(id)?;
                let n = self.nm(id);
                let size = n.data.len() as u64;
                if *punch {
                    if !keep_size {
                        return Err(libc::EOPNOTSUPP);
                    }
                    let e = end.min(size);
                    if *off < e {
                        n.data[*off as usize..e as usize].fill(0);
                    }
                } else if !keep_size && end > size {
                    n.data.resize(end as usize, 0);
                }
                Ok(0)
            }
            Op::CopyRange {
                src,
                soff,
                dst,
                doff,
                len,
            } => {
                let s = self.resolve(src)?;
                let d = self.resolve(dst)?;
                if s == d && *soff < doff.saturating_add(*len) && *doff < soff.saturating_add(*len)
                {
                    return Err(libc::EINVAL);
                }
                self.file(s)?;
                let ssize = self.n(s).data.len() as u64;
                let end = ssize.min(soff.saturating_add(*len));
                if *soff >= end {
                    return Ok(0);
                }
                let copied = end - soff;
                doff.checked_add(copied)
                    .filter(|&e| e <= MAX_FILE_SIZE)
                    .ok_or(libc::EFBIG)?;
                self.file(d)?;
                let bytes = self.n(s).data[*soff as usize..end as usize].to_vec();
                self.write_at(d, *doff, &bytes)?;
                Ok(copied)
            }
            Op::Link { src, dst } => {
                let s = self.resolve(src)?;
                let (p, name) = self.parent(dst)?;
                check_name(&name)?;
                if s == p {
                    return Err(libc::EPERM);
                }
                let sn = self.n(s);
                if sn.kind == FileType::Directory {
                    return Err(libc::EPERM);
                }
                if sn.nlink >= MAX_NLINK {
                    return Err(libc::EMLINK);
                }
                let pn = self.n(p);
                if pn.kind != FileType::Directory {
                    return Err(libc::ENOTDIR);
                }
                if pn.children.contains_key(&name) {
                    return Err(libc::EEXIST);
                }
                self.nm(p).children.insert(name, s);
                self.nm(s).nlink += 1;
                Ok(0)
            }
            Op::Unlink { path } | Op::Rmdir { path } => {
                let dir = matches!(op, Op::Rmdir { .. });
                let (p, name) = self.parent(path)?;
                if dir && name == b"." {
                    return Err(libc::EINVAL);
                }
                if dir && name == b".." {
                    return Err(libc::ENOTEMPTY);
                }
                let c = self.lookup(p, &name)?;
                let ck = self.n(c).kind;
                if dir && ck != FileType::Directory {
                    return Err(libc::ENOTDIR);
                }
                if !dir && ck == FileType::Directory {
                    return Err(libc::EISDIR);
                }
                if dir && !self.n(c).children.is_empty() {
                    return Err(libc::ENOTEMPTY);
                }
                self.nm(p).children.remove(&name);
                if dir {
                    self.nm(p).nlink -= 1;
                }
                self.drop_link(c);
                Ok(0)
            }
            Op::Rename {
                src,
                dst,
                noreplace,
                exchange,
            } => self.rename(src, dst, *noreplace, *exchange),
            Op::Chmod { path, perm } => {
                let id = self.resolve(path)?;
                self.nm(id).perm = perm & 0o7777;
                Ok(0)
            }
            Op::Chown { path, uid, gid } => {
                let id = self.resolve(path)?;
                let n = self.nm(id);
                n.uid = *uid;
                n.gid = *gid;
                Ok(0)
            }
            Op::SetXattr {
                path,
                name,
                len,
                seed,
                create,
                replace,
            } => {
                let id = self.resolve(path)?;
                let name = name.as_bytes();
                xattr_name(name)?;
                if *len as usize > MAX_XATTR_VALUE {
                    return Err(libc::EFBIG);
                }
                let exists = self.n(id).xattrs.contains_key(name);
                if *create && exists {
                    return Err(libc::EEXIST);
                }
                if *replace && !exists {
                    return Err(libc::ENODATA);
                }
                self.nm(id)
                    .xattrs
                    .insert(name.to_vec(), pattern(*seed, 0, *len as usize));
                Ok(0)
            }
            Op::RemoveXattr { path, name } => {
                let id = self.resolve(path)?;
                xattr_name(name.as_bytes())?;
                let acl = [ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR].contains(&name.as_str());
                match self.nm(id).xattrs.remove(name.as_bytes()) {
                    Some(_) => Ok(0),
                    None if acl => Ok(0), // as on ext4: nothing to remove
                    None => Err(libc::ENODATA),
                }
            }
            Op::TierOut { path } | Op::Recall { path } => {
                let id = self.resolve(path)?;
                self.file(id)?;
                Ok(0)
            }
            Op::SetAcl {
                path,
                default,
                entries,
            } => {
                let id = self.resolve(path)?;
                let acl = match Acl::parse(&acl_bytes(entries)) {
                    Ok(a) => a,
                    Err(_) => return Err(libc::EINVAL),
                };
                let n = self.nm(id);
                let (name, store) = if *default {
                    if n.kind != FileType::Directory {
                        return Err(libc::EPERM);
                    }
                    (ACL_DEFAULT_XATTR, acl.map(|a| a.to_bytes()))
                } else {
                    if n.kind == FileType::Symlink {
                        return Err(libc::EOPNOTSUPP);
                    }
                    let store = acl.and_then(|a| {
                        let (bits, equiv) = a.mode_bits();
                        n.perm = (n.perm & !0o777) | bits;
                        (!equiv).then(|| a.to_bytes())
                    });
                    (ACL_ACCESS_XATTR, store)
                };
                match store {
                    Some(v) => n.xattrs.insert(name.as_bytes().to_vec(), v),
                    None => n.xattrs.remove(name.as_bytes()),
                };
                Ok(0)
            }
            Op::Upload {
                path,
                len,
                seed,
                replace,
                ..
            } => {
                let (p, name) = self.parent(path)?;
                check_name(&name)?;
                if self.n(p).kind != FileType::Directory {
                    return Err(libc::ENOTDIR);
                }
                let victim = self.child(p, &name);
                if let Some(v) = victim {
                    if !replace {
                        return Err(libc::EEXIST);
                    }
                    if self.n(v).kind == FileType::Directory {
                        return Err(libc::EISDIR);
                    }
                }
                let id = self.next;
                self.next += 1;
                let mut node = Node::new(FileType::Regular, 0o644, 0, p);
                if self.n(p).perm & 0o2000 != 0 {
                    // Named into a setgid directory: its group.
                    node.gid = self.n(p).gid;
                }
                node.data = pattern(*seed, 0, *len as usize);
                self.nodes.insert(id, node);
                self.nm(p).children.insert(name, id);
                if let Some(v) = victim {
                    self.drop_link(v);
                }
                Ok(0)
            }
        }
    }

    fn write_at(&mut self, id: u64, off: u64, data: &[u8]) -> OpResult {
        self.file(id)?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_FILE_SIZE)
            .ok_or(libc::EFBIG)?;
        let n = self.nm(id);
        if (n.data.len() as u64) < end {
            n.data.resize(end as usize, 0);
        }
        n.data[off as usize..end as usize].copy_from_slice(data);
        Ok(data.len() as u64)
    }

    fn rename(&mut self, src: &str, dst: &str, noreplace: bool, exchange: bool) -> OpResult {
        let (sp, sn) = self.parent(src)?;
        let (dp, dn) = self.parent(dst)?;
        check_name(&sn).map_err(|e| {
            if e == libc::ENAMETOOLONG {
                e
            } else {
                libc::EINVAL
            }
        })?;
        check_name(&dn)?;
        if exchange && noreplace {
            return Err(libc::EINVAL);
        }
        let s = self.lookup(sp, &sn)?;
        if self.n(dp).kind != FileType::Directory {
            return Err(libc::ENOTDIR);
        }
        let d = self.child(dp, &dn);
        if exchange && d.is_none() {
            return Err(libc::ENOENT);
        }
        if noreplace && d.is_some() {
            return Err(libc::EEXIST);
        }
        if d == Some(s) {
            return Ok(0);
        }
        let skind = self.n(s).kind;
        let sdir = skind == FileType::Directory;
        if sdir && self.is_below(dp, s) {
            return Err(libc::EINVAL);
        }
        let ddir = d.is_some_and(|d| self.n(d).kind == FileType::Directory);
        if let (true, Some(d), true) = (exchange, d, ddir) {
            if self.is_below(sp, d) {
                return Err(libc::EINVAL);
            }
        }
        if !exchange {
            if let Some(d) = d {
                match (sdir, ddir) {
                    (true, false) => return Err(libc::ENOTDIR),
                    (false, true) => return Err(libc::EISDIR),
                    (true, true) if !self.n(d).children.is_empty() => return Err(libc::ENOTEMPTY),
                    _ => {}
                }
            }
        }
        let moves_dir = sdir && sp != dp;
        if moves_dir && (exchange || !ddir) && self.n(dp).nlink >= MAX_NLINK {
            return Err(libc::EMLINK);
        }
        match (d, exchange) {
            (None, _) => {
                self.nm(sp).children.remove(&sn);
                self.nm(dp).children.insert(dn, s);
            }
            (Some(d), false) => {
                self.nm(sp).children.remove(&sn);
                self.nm(dp).children.insert(dn, s);
                if ddir {
                    self.nm(dp).nlink -= 1;
                }
                self.drop_link(d);
            }
            (Some(d), true) => {
                self.nm(sp).children.insert(sn, d);
                self.nm(dp).children.insert(dn, s);
                if sp != dp {
                    if ddir {
                        self.nm(d).parent = sp;
                        self.nm(sp).nlink += 1;
                        self.nm(dp).nlink -= 1;
                    }
                    if sdir {
                        self.nm(s).parent = dp;
                        self.nm(dp).nlink += 1;
                        self.nm(sp).nlink -= 1;
                    }
                }
                return Ok(0);
            }
        }
        if moves_dir {
            self.nm(sp).nlink -= 1;
            self.nm(dp).nlink += 1;
        }
        if sdir {
            self.nm(s).parent = dp;
        }
        Ok(0)
    }

    /// The whole tree in comparable form.
    pub fn tree(&self) -> Tree {
        let mut t = Tree::default();
        let mut stack = vec![("/".to_string(), ROOT)];
        let mut ident: HashMap<u64, String> = HashMap::new();
        let mut out = Vec::new();
        while let Some((path, id)) = stack.pop() {
            let n = self.n(id);
            if n.kind == FileType::Directory {
                for (name, c) in n.children.iter().rev() {
                    stack.push((join(&path, name), *c));
                }
            }
            out.push((path, id));
        }
        for (p, id) in &out {
            let e = ident.entry(*id).or_insert_with(|| p.clone());
            if p < e {
                *e = p.clone();
            }
        }
        for (p, id) in out {
            let n = self.n(id);
            let size = match n.kind {
                FileType::Directory => (n.children.len() as u64 + 2) * 32,
                FileType::Regular | FileType::Symlink => n.data.len() as u64,
                _ => 0,
            };
            t.0.insert(
                p,
                Entry {
                    kind: n.kind,
                    perm: n.perm,
                    uid: n.uid,
                    gid: n.gid,
                    rdev: n.rdev,
                    nlink: n.nlink,
                    size,
                    data: n.data.clone(),
                    xattrs: acl_as_read(&n.xattrs, n.perm),
                    ident: ident[&id].clone(),
                },
            );
        }
        t
    }

    /// Directories, deepest last (for generators and usability passes).
    pub fn dirs(&self) -> Vec<String> {
        self.tree()
            .0
            .iter()
            .filter(|(_, e)| e.kind == FileType::Directory)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Everything but the root.
    pub fn paths(&self) -> Vec<(String, FileType)> {
        self.tree()
            .0
            .iter()
            .filter(|(p, _)| p.as_str() != "/")
            .map(|(p, e)| (p.clone(), e.kind))
            .collect()
    }
}

fn xattr_name(name: &[u8]) -> Result<(), Errno> {
    if name.is_empty() {
        return Err(libc::EINVAL);
    }
    if name.len() > NAME_MAX {
        return Err(libc::ERANGE);
    }
    if name.contains(&0) {
        return Err(libc::EINVAL);
    }
    Ok(())
}

pub fn join(parent: &str, name: &[u8]) -> String {
    let n = String::from_utf8_lossy(name);
    if parent == "/" {
        format!("/{n}")
    } else {
        format!("{parent}/{n}")
    }
}

// ---------------------------------------------------------------------------
// Comparable trees.

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
        let h = layout::crc32c(&self.data);
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
                    layout::crc32c(v)
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

fn vresolve(v: &Volume, path: &str) -> Result<u64, Errno> {
    let mut cur = v.root();
    for c in split(path) {
        cur = v.lookup(cur, c).map_err(|e| e.errno())?.ino;
    }
    Ok(cur)
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
    let e = |r: pktfs::FsError| r.errno();
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
    pending: &mut Vec<pktfs::RxPiece<'v>>,
) -> pktfs::Result<()> {
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
        let piece = buf.piece(skip as u32, n as u32, 42, off);
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

// ---------------------------------------------------------------------------
// Images.

/// A freshly formatted image of `size` bytes (heap, no persistence).
pub fn format_image(size: u64, inodes: Option<u32>) -> Vec<u8> {
    let mut params = GeometryParams::for_size(size);
    params.inode_count = inodes;
    Volume::format_in_memory(params).expect("format").snapshot()
}

/// Open `image`, apply `ops` (each must give the model's result), and
/// return the image afterwards with the model.
pub fn seed_image(image: Vec<u8>, ops: &[Op]) -> Result<(Vec<u8>, Model), String> {
    let mut v = Volume::open_pm(Pm::from_bytes(image), false).map_err(|e| format!("open: {e}"))?;
    tier::use_store(&v);
    let mut m = Model::new();
    for op in ops {
        let want = m.apply(op);
        let got = apply_vol(&v, op);
        if want != got {
            return Err(format!("seeding: {op}: volume {got:?}, model {want:?}"));
        }
    }
    let t = dump(&v)?;
    if t != m.tree() {
        return Err(format!(
            "seeded tree differs from the model:\n{}",
            t.diff(&m.tree(), 10)
        ));
    }
    let img = v.snapshot();
    Ok((img, m))
}

/// Errno name for messages.
pub fn errno_name(e: Errno) -> &'static str {
    match e {
        libc::ENOENT => "ENOENT",
        libc::EEXIST => "EEXIST",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENODATA => "ENODATA",
        libc::ERANGE => "ERANGE",
        libc::EFBIG => "EFBIG",
        libc::EMLINK => "EMLINK",
        libc::EPERM => "EPERM",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EIO => "EIO",
        _ => "E?",
    }
}

pub fn show_result(r: &OpResult) -> String {
    match r {
        Ok(v) => format!("Ok({v})"),
        Err(e) => format!("Err({})", errno_name(*e)),
    }
}
