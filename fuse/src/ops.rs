//! The FUSE operations: each handler translates one kernel request into one
//! Volume call and its result into one reply. POSIX rules the kernel leaves
//! to the file system (the umask under default ACLs, setgid-directory
//! inheritance, clearing setuid/setgid on write and chown) are the
//! Volume's; what is read here is who asks (uid, gid, and from /proc the
//! groups and capabilities FUSE does not send).

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags,
    RenameFlags as FuseRenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::state::PktFuse;
use crate::translate::{
    err, file_attr, has_cap_fsetid, in_group, name_bytes, time_ns, time_set, xattr_reply,
};
use pktfs_fs::FileType;
use pktfs_fs::FsError;
use pktfs_fs::{FallocMode, RenameFlags, Seg, SetAttr, TimeSet, Volume, XattrFlags};

/// The read-only virtual attribute that shows a file's chain of records.
pub const CHAIN_XATTR: &str = "user.pktfs.chain";

/// Run a handler so that a panic in it never takes a worker thread down
/// and never goes unnoticed: the reply it owned is dropped while unwinding
/// (fuser answers a dropped reply with EIO) and the Volume stops serving
/// (fail-stop: later requests fail with EIO rather than run on DRAM state
/// the panic may have left half-changed).
fn shield(vol: &Volume, f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        vol.fail_after_panic("a FUSE request", &*p);
    }
}

impl Filesystem for PktFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Each is best effort: an old kernel without one still mounts.
        let _ = config.set_max_write(self.tune.max_write);
        if let Err(max) = config.set_max_readahead(self.tune.max_readahead) {
            let _ = config.set_max_readahead(max);
        }
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        for f in [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_CACHE_SYMLINKS,
            InitFlags::FUSE_ASYNC_DIO,
            // Shared mmap of a direct-I/O file (kernel 6.6+); without it
            // such an mmap fails with ENODEV.
            InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
        ] {
            let _ = config.add_capabilities(f);
        }
        if self.tune.keep_cache {
            // The page cache is kept across opens; a change of mtime or size
            // seen on an attribute refresh drops it.
            let _ = config.add_capabilities(InitFlags::FUSE_AUTO_INVAL_DATA);
        }
        // POSIX ACLs: the kernel enforces them in its permission checks
        // (with default_permissions), caches them, and sends getfacl /
        // setfacl as the two system.posix_acl_* attributes, which the
        // Volume keeps in step with the mode. It then also leaves the
        // umask to us (DONT_MASK), because a default ACL replaces it.
        // Without POSIX_ACL (an old kernel) the kernel applies the umask
        // itself, and applying it again in the Volume changes nothing.
        if config.add_capabilities(InitFlags::FUSE_POSIX_ACL).is_ok() {
            let _ = config.add_capabilities(InitFlags::FUSE_DONT_MASK);
        } else {
            tracing::warn!("the kernel offers no FUSE_POSIX_ACL: ACLs are stored but not enforced");
        }
        // Setuid/setgid clearing: deliberately not FUSE_HANDLE_KILLPRIV(_V2).
        // Without it the kernel clears them itself where it can see the
        // change coming: chown, truncate (also open with O_TRUNC),
        // fallocate, copy_file_range and page-cache writes each send a
        // SETATTR with the cleared mode (computed from a fresh GETATTR),
        // so the rule about who is exempt (CAP_FSETID, group membership)
        // is the kernel's own. The one path where it cannot, direct-I/O
        // writes, carries FUSE_WRITE_KILL_SUIDGID instead, which `write`
        // honours. With KILLPRIV_V2 truncate and chown would be ours too,
        // flagged by FATTR_KILL_SUIDGID, which fuser 0.18's setattr does
        // not pass on; and each rule would need the caller's groups and
        // capabilities, which FUSE does not send (`in_group` reads them
        // from /proc for the one case that needs them).
        // Deliberately not FUSE_WRITEBACK_CACHE: a write() that returned must
        // be on the media.
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        shield(&self.vol, || {
            // Each entry the kernel gets counts as one lookup reference.
            match self.vol.lookup_pinned(parent.0, name_bytes(name)) {
                Ok(a) => {
                    self.kernel_got(a.ino);
                    reply.entry(&self.tune.entry_ttl, &file_attr(&a), Generation(0))
                }
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        shield(&self.vol, || self.unpin(ino.0, nlookup))
    }

    fn destroy(&mut self) {
        // The kernel's references end with the session.
        self.release_kernel_refs();
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        shield(&self.vol, || match self.vol.getattr(ino.0) {
            Ok(a) => reply.attr(&self.tune.attr_ttl, &file_attr(&a)),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        shield(&self.vol, || {
            // Permission checks (chmod/chown/utimes by whom) and the
            // suid/sgid clearing on chown and truncate are the kernel's:
            // with default_permissions and without handle_killpriv it sends
            // the cleared mode in the same request (see `init`). A chmod
            // changes the access ACL with the mode: the Volume reads the
            // ACL's mode-expressed entries from the mode.
            let s = SetAttr {
                mode: mode.map(|m| m & 0o7777),
                uid,
                gid,
                size,
                atime: atime.map(time_set),
                mtime: mtime.map(time_set),
                ctime: ctime.map(|t| TimeSet::Ns(time_ns(t))),
            };
            match self.vol.setattr(ino.0, &s) {
                Ok(a) => reply.attr(&self.tune.attr_ttl, &file_attr(&a)),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        shield(&self.vol, || match self.vol.readlink(ino.0) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        shield(&self.vol, || {
            let Some(k) = FileType::from_mode(mode) else {
                return reply.error(Errno::from_i32(libc::EINVAL));
            };
            if k == FileType::Directory || k == FileType::Symlink {
                return reply.error(Errno::from_i32(libc::EINVAL));
            }
            let m = self.new_owner(req, mode & 0o7777, umask);
            let r = self
                .vol
                .create_node_pinned(parent.0, name_bytes(name), k, m, rdev);
            match r {
                Ok(a) => {
                    self.kernel_got(a.ino);
                    reply.entry(&self.tune.entry_ttl, &file_attr(&a), Generation(0))
                }
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        shield(&self.vol, || {
            let m = self.new_owner(req, mode & 0o7777, umask);
            let r =
                self.vol
                    .create_node_pinned(parent.0, name_bytes(name), FileType::Directory, m, 0);
            match r {
                Ok(a) => {
                    self.kernel_got(a.ino);
                    reply.entry(&self.tune.entry_ttl, &file_attr(&a), Generation(0))
                }
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        shield(&self.vol, || {
            match self.vol.unlink(parent.0, name_bytes(name)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        shield(&self.vol, || {
            match self.vol.rmdir(parent.0, name_bytes(name)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        shield(&self.vol, || {
            let r = self.vol.symlink_pinned(
                parent.0,
                name_bytes(link_name),
                target.as_os_str().as_bytes(),
                req.uid(),
                req.gid(),
            );
            match r {
                Ok(a) => {
                    self.kernel_got(a.ino);
                    reply.entry(&self.tune.entry_ttl, &file_attr(&a), Generation(0))
                }
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: FuseRenameFlags,
        reply: ReplyEmpty,
    ) {
        shield(&self.vol, || {
            let known = FuseRenameFlags::RENAME_NOREPLACE | FuseRenameFlags::RENAME_EXCHANGE;
            if !known.contains(flags) {
                // RENAME_WHITEOUT and anything newer.
                return reply.error(Errno::from_i32(libc::EINVAL));
            }
            let f = RenameFlags {
                noreplace: flags.contains(FuseRenameFlags::RENAME_NOREPLACE),
                exchange: flags.contains(FuseRenameFlags::RENAME_EXCHANGE),
            };
            match self.vol.rename(
                parent.0,
                name_bytes(name),
                newparent.0,
                name_bytes(newname),
                f,
            ) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        shield(&self.vol, || {
            match self.vol.link(ino.0, newparent.0, name_bytes(newname)) {
                Ok(a) => self.entry(reply, &a),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        shield(&self.vol, || match self.vol.getattr(ino.0) {
            Ok(a) if a.kind == FileType::Directory => reply.error(Errno::from_i32(libc::EISDIR)),
            Ok(_) => reply.opened(FileHandle(0), self.open_flags()),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        shield(&self.vol, || {
            self.accessed(ino.0);
            let mut reply = Some(reply);
            let r = self.vol.read_with(ino.0, offset, size as u64, |segs| {
                let Some(reply) = reply.take() else { return };
                match segs {
                    [] => reply.data(&[]),
                    // The common case: one record's bytes, straight from the
                    // mapping into the reply (`read_with` already makes
                    // records that lie back to back in the mapping one
                    // segment).
                    [Seg::Data(d)] => reply.data(d),
                    _ => {
                        let total = segs.iter().map(|s| match s {
                            Seg::Data(d) => d.len(),
                            Seg::Zero(n) => *n,
                        });
                        let mut buf = Vec::with_capacity(total.sum());
                        for s in segs {
                            match s {
                                Seg::Data(d) => buf.extend_from_slice(d),
                                Seg::Zero(n) => buf.resize(buf.len() + n, 0),
                            }
                        }
                        reply.data(&buf)
                    }
                }
            });
            if let (Err(e), Some(reply)) = (r, reply.take()) {
                reply.error(err(&e));
            }
        })
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel gives the offset, also for O_APPEND (it holds the inode
        // lock and knows the size), so the page cache it filled matches.
        shield(&self.vol, || {
            // A direct-I/O write by a writer without CAP_FSETID: the kernel
            // sets this flag instead of clearing setuid/setgid itself (see
            // `init`). Cleared before the data goes in.
            if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                match self.vol.kill_suidgid(ino.0, |gid| in_group(req, gid)) {
                    Ok(true) => self.attrs_changed(ino.0),
                    Ok(false) => {}
                    Err(e) => return reply.error(err(&e)),
                }
            }
            match self.vol.write(ino.0, offset, data) {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Every write is durable when it returns: nothing to flush.
        shield(&self.vol, || match self.vol.fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        shield(&self.vol, || match self.vol.getattr(ino.0) {
            Ok(a) if a.kind == FileType::Directory => {
                reply.opened(FileHandle(0), FopenFlags::empty())
            }
            Ok(_) => reply.error(Errno::from_i32(libc::ENOTDIR)),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        shield(&self.vol, || self.list_dir(ino.0, offset, reply))
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        shield(&self.vol, || self.list_dir_plus(ino.0, offset, reply))
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        shield(&self.vol, || match self.vol.fsync(ino.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(err(&e)),
        })
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        shield(&self.vol, || {
            let s = self.vol.statfs();
            // A file needs an inode and at least one record; report the
            // tighter of the two as free inodes.
            let ffree = s.files_free.min(s.records_free);
            reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_free,
                s.files,
                ffree,
                s.block_size,
                s.name_max,
                s.block_size,
            )
        })
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        shield(&self.vol, || {
            if position != 0 {
                return reply.error(Errno::from_i32(libc::EINVAL));
            }
            if name == CHAIN_XATTR {
                return reply.error(Errno::from_i32(libc::EPERM));
            }
            if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
                return reply.error(Errno::from_i32(libc::EINVAL));
            }
            let f = XattrFlags {
                create: flags & libc::XATTR_CREATE != 0,
                replace: flags & libc::XATTR_REPLACE != 0,
            };
            // Only an access ACL asks: setgid goes unless the caller may
            // keep it (the kernel leaves this to us, see `in_group`).
            let keeps_sgid = |gid| in_group(req, gid) || has_cap_fsetid(req);
            match self
                .vol
                .setxattr_as(ino.0, name_bytes(name), value, f, keeps_sgid)
            {
                Ok(()) => reply.ok(),
                Err(FsError::TooBig) => reply.error(Errno::from_i32(libc::E2BIG)),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        shield(&self.vol, || {
            let v = if name == CHAIN_XATTR {
                self.chain_json(ino.0)
            } else {
                self.vol.getxattr(ino.0, name_bytes(name))
            };
            match v {
                Ok(v) => xattr_reply(reply, size, &v),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        // The virtual chain attribute is not listed, so copying tools
        // (cp -a, rsync -X) do not try to set it on their copies.
        shield(&self.vol, || match self.vol.listxattr(ino.0) {
            Ok(names) => {
                let mut buf = Vec::new();
                for n in names {
                    buf.extend_from_slice(&n);
                    buf.push(0);
                }
                xattr_reply(reply, size, &buf)
            }
            Err(e) => reply.error(err(&e)),
        })
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        shield(&self.vol, || {
            if name == CHAIN_XATTR {
                return reply.error(Errno::from_i32(libc::EPERM));
            }
            match self.vol.removexattr(ino.0, name_bytes(name)) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        // Only called without default_permissions. The owner/group/other
        // check; supplementary groups are not in the request.
        shield(&self.vol, || {
            let a = match self.vol.getattr(ino.0) {
                Ok(a) => a,
                Err(e) => return reply.error(err(&e)),
            };
            let want = mask.bits() & 7;
            if want == 0 {
                return reply.ok();
            }
            let ok = if req.uid() == 0 {
                want & libc::X_OK == 0 || a.kind == FileType::Directory || a.perm & 0o111 != 0
            } else {
                let bits = if req.uid() == a.uid {
                    (a.perm >> 6) & 7
                } else if req.gid() == a.gid {
                    (a.perm >> 3) & 7
                } else {
                    a.perm & 7
                };
                bits as i32 & want == want
            };
            if ok {
                reply.ok()
            } else {
                reply.error(Errno::from_i32(libc::EACCES))
            }
        })
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        shield(&self.vol, || {
            let m = self.new_owner(req, mode & 0o7777, umask);
            let r =
                self.vol
                    .create_node_pinned(parent.0, name_bytes(name), FileType::Regular, m, 0);
            // Pinned by the create: the kernel's lookup reference.
            let a = match r {
                Ok(a) => a,
                Err(e) => return reply.error(err(&e)),
            };
            self.kernel_got(a.ino);
            let f = self.open_flags();
            reply.created(
                &self.tune.entry_ttl,
                &file_attr(&a),
                Generation(0),
                FileHandle(0),
                f,
            )
        })
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        shield(&self.vol, || {
            let known = libc::FALLOC_FL_KEEP_SIZE | libc::FALLOC_FL_PUNCH_HOLE;
            if mode & !known != 0 {
                return reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            }
            let m = FallocMode {
                keep_size: mode & libc::FALLOC_FL_KEEP_SIZE != 0,
                punch_hole: mode & libc::FALLOC_FL_PUNCH_HOLE != 0,
            };
            match self.vol.fallocate(ino.0, offset, length, m) {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    /// Which image serves this file, for a direct reader (pktfs-direct's
    /// preload shim) to check that the image it maps is this mount's
    /// (`pktfs_layout::live::IOC_IDENTITY`). Anything else: ENOTTY.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        _in_data: &[u8],
        out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        use pktfs_layout::live::IOC_IDENTITY;
        match self.vol.image_identity() {
            Some(id) if cmd == IOC_IDENTITY && out_size as usize >= 32 => {
                reply.ioctl(0, &id.to_bytes())
            }
            _ => reply.error(Errno::from_i32(libc::ENOTTY)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        shield(&self.vol, || {
            let data = match whence {
                libc::SEEK_DATA => true,
                libc::SEEK_HOLE => false,
                _ => return reply.error(Errno::from_i32(libc::EINVAL)),
            };
            let Ok(off) = u64::try_from(offset) else {
                return reply.error(Errno::from_i32(libc::ENXIO));
            };
            match self.vol.seek(ino.0, off, data) {
                Ok(o) => reply.offset(o as i64),
                Err(e) => reply.error(err(&e)),
            }
        })
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        ino_in: INodeNo,
        _fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        _fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        shield(&self.vol, || {
            if !flags.is_empty() {
                return reply.error(Errno::from_i32(libc::EINVAL));
            }
            // The reply carries a 32-bit count; callers loop on short copies.
            let len = len.min(1 << 30);
            match self
                .vol
                .copy_range(ino_in.0, offset_in, ino_out.0, offset_out, len)
            {
                Ok(n) => reply.written(n as u32),
                Err(e) => reply.error(err(&e)),
            }
        })
    }
}
