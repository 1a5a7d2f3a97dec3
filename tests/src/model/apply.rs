//! The model's operations: [`Model::apply`] gives each [`Op`] the effect
//! and the result (or errno) POSIX prescribes, which the Volume's must
//! match; writes and renames, the two with the most cases, have their own
//! functions.

use super::*;

impl Model {
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
}
