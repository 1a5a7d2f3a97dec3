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
//! - [`direct`]: the tree as a direct reader sees it in a copy of the image.
//! - [`gen`]: proptest strategies for operation sequences.
//! - [`ace`]: the seeded tree and the every-operation list of the crash suite.
//! - `op`: the [`Op`] list; `apply`: what each does to the model
//!   ([`Model::apply`]); `volume`: an op applied to a live Volume
//!   ([`apply_vol`]) and a Volume's tree dumped for comparing ([`dump`]).

pub mod ace;
mod apply;
pub mod crash;
pub mod direct;
pub mod gen;
mod op;
pub mod tier;
mod volume;
pub use op::Op;
use volume::vresolve;
pub use volume::{apply_vol, dump, Entry, Tree};

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use pktfs_fs::media::Pm;
use pktfs_fs::volume::{ACL_ACCESS_XATTR, ACL_DEFAULT_XATTR};
use pktfs_fs::{Acl, FallocMode, FileType, RenameFlags, SetAttr, Volume, XattrFlags};

pub use pktfs_layout::GeometryParams;

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
