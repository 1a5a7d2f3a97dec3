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
//! - `op`: the [`Op`] list; `volume`: an op applied to a live Volume
//!   ([`apply_vol`]) and a Volume's tree dumped for comparing ([`dump`]).

pub mod ace;
pub mod crash;
pub mod gen;
mod op;
pub mod tier;
mod volume;
pub use op::Op;
use volume::vresolve;
pub use volume::{apply_vol, dump, Entry, Tree};

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
