//! Making a node: a file, directory, symlink or device inode and the
//! dirent naming it, in one commit under the parent directory's write
//! lock (every creating entry point of `ns.rs` comes here).

use super::super::failstop::OrStop;

use pktfs_layout::{AttrSlot, FileType, Record, RecordId, RecordKind};

use super::super::commit::Commit;
use super::super::{
    check_name, now_ns, write_new_inode_heads, Attr, Inode, Rec, Volume, MAX_NLINK,
};
use super::{NewMode, FIRST_COOKIE, S_ISGID};
use crate::error::{FsError, Result};

impl Volume {
    /// `pins`: pins the new inode starts with, set before it is reachable
    /// (`create_node_pinned`).
    ///
    /// In its phases: the parent locked and checked; the inode allocated
    /// and its owner and mode chosen; its records (inherited ACLs, a
    /// symlink's target) and its slot written, then the dirent, all
    /// before anything reaches them; the commit (the dirent linked, the
    /// parent's times); DRAM follows.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn make_node(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        m: NewMode,
        rdev: u32,
        symlink: Option<&[u8]>,
        pins: u64,
    ) -> Result<Attr> {
        self.make_node_with(parent, name, kind, m, rdev, symlink, pins, &[])
    }

    /// [`Self::make_node`], the new inode born with `extra` attributes
    /// too (beside what it inherits): in the same commit, so no state has
    /// the node without them (a bucket and its owner).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make_node_with(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileType,
        m: NewMode,
        rdev: u32,
        symlink: Option<&[u8]>,
        pins: u64,
        extra: &[super::super::xattr_chain::NewXattr],
    ) -> Result<Attr> {
        self.check_writable()?;
        check_name(name)?;
        // The parent's write lock covers the name's absence until the
        // commit; the new inode is seen by no one before it.
        let parc = self.inode(parent)?;
        let mut p = super::super::wlock(&parc)?;
        check_new_name(&p, name, kind)?;
        let ino = self
            .alloc
            .lock()
            .or_stop()
            .alloc_inode()
            .ok_or(FsError::NoSpace("no free inodes"))?;
        let (gid, asked) = setgid_rule(&p, kind, m);
        let mut inherited = self.inherit_acl(&p, kind, asked, m.umask);
        inherited.xattrs.extend_from_slice(extra);
        let mut new = NewNode {
            ino,
            xattrs: Vec::new(),
            target: Vec::new(),
        };
        if let Err(e) = self.write_node_records(&mut new, &inherited.xattrs, symlink) {
            new.undo(self);
            return Err(e);
        }
        let did = match self.alloc_records(1) {
            Ok(v) => v[0],
            Err(e) => {
                new.undo(self);
                return Err(e);
            }
        };
        let now = now_ns();
        let attr = AttrSlot {
            kind,
            mode: inherited.mode & 0o7777,
            uid: m.uid,
            gid,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            size: symlink.map(|t| t.len() as u64).unwrap_or(0),
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            rdev,
            parent: if kind == FileType::Directory {
                p.ino
            } else {
                0
            },
        };
        let head = new.target.first().map(|r| r.id).unwrap_or(RecordId::NONE);
        let xhead = new.xattrs.first().map(|r| r.id).unwrap_or(RecordId::NONE);
        let slot = write_new_inode_heads(&self.pm, &self.geo, ino, &attr, head, xhead);
        let cookie = p.next_seq.max(FIRST_COOKIE);
        // A new non-directory leaves the parent's link count alone, so the
        // parent's new mtime/ctime can ride on the dirent (FLAG_DIR_TIME)
        // and the create is one publish instead of a journalled commit.
        let dir_time = (kind != FileType::Directory && now > p.attr.ctime_ns).then_some(now);
        let dirent =
            match self.new_dirent(did, name, None, ino, kind, cookie, RecordId::NONE, dir_time) {
                Ok(d) => d,
                Err(e) => {
                    self.free_records_now(&[did]);
                    new.undo(self);
                    return Err(e);
                }
            };
        self.commit_new_name(&mut p, ino, did, kind, cookie, dir_time, now);
        // DRAM follows the committed state.
        p.data.insert(cookie, dirent);
        p.names.insert(name.into(), cookie);
        p.next_seq = cookie + 1;
        let mut child = Inode::new(ino, attr, slot);
        child.pins = pins;
        if kind == FileType::Directory {
            child.next_seq = FIRST_COOKIE;
            self.ns.lock().or_stop().dir_parent.insert(ino, p.ino);
        }
        // Into the table before the parent's lock goes: a lookup that
        // finds the name finds the inode.
        Ok(self.new_node_in_dram(child, new))
    }

    /// The new inode's records, written before the inode that heads them:
    /// its inherited ACLs (`xattrs`), and a symlink's target as data
    /// records. On error what was written so far is in `new` (its undo
    /// gives it back).
    fn write_node_records(
        &self,
        new: &mut NewNode,
        xattrs: &[super::super::xattr_chain::NewXattr],
        symlink: Option<&[u8]>,
    ) -> Result<()> {
        new.xattrs = self.write_new_xattrs(xattrs)?;
        let Some(t) = symlink else {
            return Ok(());
        };
        let slices = self.alloc_payload(t.len() as u64)?;
        let ids = match self.alloc_records(slices.len()) {
            Ok(i) => i,
            Err(e) => {
                self.release_payload(&slices);
                return Err(e);
            }
        };
        let crcs = self.write_payload(&slices, t);
        let now = now_ns() as u64;
        let mut off = 0u64;
        for (k, s) in slices.iter().enumerate() {
            let r = Record {
                kind: RecordKind::Data,
                flags: 0,
                buffer: s.buffer,
                buf_off: s.buf_off,
                len: s.len,
                payload_crc: crcs[k],
                file_off: off,
                seq: k as u64 + 1,
                timestamp_ns: now,
                aux: 0,
            };
            off += s.len as u64;
            let next = ids.get(k + 1).copied().unwrap_or(RecordId::NONE);
            self.write_record(ids[k], &r, next);
            new.target.push(Rec { id: ids[k], r });
        }
        Ok(())
    }

    /// The commit: the dirent `did` linked at the parent's tail (making
    /// the new inode reachable), and the parent's new times, carried by
    /// the dirent when `dir_time`, else in its slot with, for a new
    /// directory, one more link.
    #[allow(clippy::too_many_arguments)]
    fn commit_new_name(
        &self,
        p: &mut Inode,
        ino: u32,
        did: RecordId,
        kind: FileType,
        cookie: u64,
        dir_time: Option<i64>,
        now: i64,
    ) {
        let mut commit = Commit::new();
        let link = self.data_link_before(p, cookie);
        commit.store(p.ino, link, did.0, Some((self.geo.record_pos(did).0, 64)));
        commit.store_reach(
            self.geo.inode_pos(ino).0,
            pktfs_layout::inode::INODE_SIZE as u64,
        );
        let mut pa = p.attr;
        pa.mtime_ns = now;
        pa.ctime_ns = now;
        if kind == FileType::Directory {
            pa.nlink += 1;
        }
        if dir_time.is_some() {
            p.attr = pa; // carried by the dirent; the next slot switch keeps it
        } else {
            self.set_attr(&mut commit, p, pa);
        }
        commit.apply(self);
    }

    /// The new inode in DRAM, its chains from the records written for it.
    fn new_node_in_dram(&self, mut child: Inode, new: NewNode) -> Attr {
        for r in new.xattrs {
            let name = &self.slice_bytes(r.slice())[..r.r.aux as usize];
            child.xnames.insert(name.into(), r.r.seq);
            child.next_xkey = child.next_xkey.max(r.r.seq + 1);
            child.xattrs.insert(r.r.seq, r);
        }
        for r in new.target {
            child.next_seq = child.next_seq.max(r.r.seq.saturating_add(1));
            child.data_bytes += r.r.len as u64;
            child.data.insert(r.r.file_off, r);
        }
        let a = self.attr_of(&child);
        self.insert_inode(child);
        a
    }
}

/// May the directory `p` get a new entry `name` of `kind`?
fn check_new_name(p: &Inode, name: &[u8], kind: FileType) -> Result<()> {
    if p.attr.kind != FileType::Directory {
        return Err(FsError::NotDir);
    }
    if p.attr.nlink == 0 {
        return Err(FsError::NotFound); // removed while open
    }
    if p.names.contains_key(name) {
        return Err(FsError::Exists);
    }
    if kind == FileType::Directory && p.attr.nlink >= MAX_NLINK {
        return Err(FsError::TooManyLinks);
    }
    Ok(())
}

/// The new inode's group and the mode asked for it, by the setgid-directory
/// rule (as Linux's inode_init_owner), under the directory's lock: a new
/// inode in a setgid directory takes the directory's group, and a new
/// subdirectory its setgid bit. (The kernel strips a new file's setgid bit
/// first when the creator may not keep it; netpath's and recv's files
/// carry none.)
fn setgid_rule(p: &Inode, kind: FileType, m: NewMode) -> (u32, u32) {
    match p.attr.mode & S_ISGID != 0 {
        true if kind == FileType::Directory => (p.attr.gid, m.perm | S_ISGID),
        true => (p.attr.gid, m.perm),
        false => (m.gid, m.perm),
    }
}

/// What a node being made has taken, until the commit makes it reachable:
/// its inode number, its inherited ACLs' records and a symlink's target
/// records (each holding its buffer reference).
struct NewNode {
    ino: u32,
    xattrs: Vec<Rec>,
    target: Vec<Rec>,
}

impl NewNode {
    /// Give it all back (nothing reached it).
    fn undo(&self, v: &Volume) {
        let mut a = v.alloc.lock().or_stop();
        for r in self.xattrs.iter().chain(&self.target) {
            a.free_record(r.id.0);
            a.drop_ref(r.slice());
        }
        a.free_inode(self.ino);
    }
}
