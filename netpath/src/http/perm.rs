//! Requests act as one identity ([`crate::Config::as_user`], `--as-user`)
//! and are checked against modes and POSIX ACLs as the kernel checks a
//! process of that identity on the mount ([`pktfs_fs::Volume::permits`]):
//! - search (x) on every directory walked, from the root;
//! - GET/HEAD of a file: read (r) on it; of a directory (a listing): read
//!   on it, and the JSON listing's sizes, times and tags only with search
//!   on it too (else null, as `ls -l` in a directory without x);
//! - PUT/POST: write and search (wx) on the directory that gets the name,
//!   and on each existing directory a missing one is created in; a name
//!   that exists is replaced as rename(2) would replace it, so in a sticky
//!   directory only the owner of the file or of the directory (or root)
//!   may; the replaced file's own mode is not asked (the upload is a new
//!   inode linked over the name, not a write into the old one);
//! - DELETE: write and search on the directory, and the sticky rule.
//!
//! Refused: 403 naming the path and what is missing, before a body is
//! received (and again, authoritative, under the upload's final checks
//! once it is in). Root (uid 0) passes every check these requests make
//! (no execute on files is ever asked), so a server acting as root skips
//! them. The checks are made before the change, not under its locks: a
//! chmod racing a request may let that one request be checked against the
//! old mode (the kernel holds the directory's lock across both).

use pktfs_fs::{Access, Cred, Denial, FileType, FsError};

use super::conn::Conn;

impl<'a> Conn<'a> {
    /// Walk the path's first `segs` segments from the root (symlinks are
    /// not followed), with search permission on each directory walked
    /// (`perm`; else [`FsError::Access`]).
    pub(super) fn resolve(&self, segs: usize) -> Result<pktfs_fs::Attr, FsError> {
        match self
            .vol
            .resolve_parts(self.path.segments().take(segs), self.who())
        {
            // A name under a file: nothing there (404), as before a walk.
            Err(FsError::NotDir) => Err(FsError::NotFound),
            r => r,
        }
    }

    /// The identity to check as; None when nothing needs checking (root).
    pub(super) fn who(&self) -> Option<&'a Cred> {
        let c: &'a Cred = &self.sh.cfg.as_user;
        (!c.is_root()).then_some(c)
    }

    /// [`pktfs_fs::Volume::lookup_kind`] as the identity.
    pub(super) fn lookup_kind_as(&self, dir: u64, name: &[u8]) -> Result<(u64, FileType), FsError> {
        match self.who() {
            Some(c) => self.vol.lookup_kind_as(dir, name, c),
            None => self.vol.lookup_kind(dir, name),
        }
    }

    /// Does the identity have `want` on `ino`? (Errors of the Volume count
    /// as yes: the request then meets them itself.)
    pub(super) fn permits(&self, ino: u64, want: Access) -> bool {
        match self.who() {
            Some(c) => self.vol.permits(ino, c, want).unwrap_or(true),
            None => true,
        }
    }

    /// "/a/b" of the path's first `k` segments.
    fn prefix(&self, k: usize) -> String {
        let mut s = String::new();
        for seg in self.path.segments().take(k) {
            s.push('/');
            s.push_str(&String::from_utf8_lossy(seg));
        }
        if s.is_empty() {
            s.push('/');
        }
        s
    }

    /// A 403 body: the request's path, then what is missing where.
    pub(super) fn denied(&self, what: &str) -> String {
        let c = &self.sh.cfg.as_user;
        format!(
            "{}: permission denied: {what} (requests act as uid {} gid {})",
            self.path.display(),
            c.uid,
            c.gid
        )
    }

    fn lacks(&self, ino: u64, want: Access, k: usize) -> String {
        let c = self.who().expect("only asked when checking");
        let missing = self.vol.missing(ino, c, want).unwrap_or(want);
        let missing = if missing.bits() == 0 { want } else { missing };
        let what = match missing.letters() {
            "r" => "read (r)",
            "w" => "write (w)",
            "x" => "search (x)",
            "wx" => "write and search (wx)",
            other => other,
        };
        format!("no {what} permission on {}", self.prefix(k))
    }

    /// Why walking the directories of the first `segs` segments is
    /// refused: the first one without search. For the 403 body, after a
    /// walk failed with [`FsError::Access`].
    pub(super) fn walk_denied(&self, segs: usize) -> String {
        if let Some(c) = self.who() {
            let mut dir = self.vol.root();
            for (k, s) in self.path.segments().take(segs).enumerate() {
                if !self.vol.permits(dir, c, Access::SEARCH).unwrap_or(true) {
                    return self.denied(&self.lacks(dir, Access::SEARCH, k));
                }
                match self.vol.lookup_kind(dir, s) {
                    Ok((child, FileType::Directory)) => dir = child,
                    _ => break,
                }
            }
        }
        self.denied("no search (x) permission on a directory of the path")
    }

    /// GET/HEAD: the target (`ino`, reached by the path) must be readable.
    pub(super) fn read_denied(&self, ino: u64) -> Option<String> {
        self.who()?;
        (!self.permits(ino, Access::READ))
            .then(|| self.denied(&self.lacks(ino, Access::READ, self.path.len())))
    }

    /// May the identity create, replace or remove the path's last name in
    /// `dir` (the directory of the first `len - 1` segments)?
    pub(super) fn entry_denied(&self, dir: u64) -> Option<String> {
        let c = self.who()?;
        let name = self.path.name()?;
        let k = self.path.len() - 1;
        match self.vol.may_change_entry(dir, name, c) {
            Ok(Some(Denial::Missing(m))) => Some(self.denied(&self.lacks(dir, m, k))),
            Ok(Some(Denial::Sticky)) => Some(self.denied(&format!(
                "{} is sticky and {} is another user's",
                self.prefix(k),
                self.path.display()
            ))),
            Ok(None) | Err(_) => None,
        }
    }

    /// PUT/POST, before the body is received: search on each existing
    /// directory of the path, write and search where the first missing
    /// one would be created, else [`Self::entry_denied`] on the parent.
    /// None: go on (other failures are the upload's to report).
    pub(super) fn put_denied(&self) -> Option<String> {
        self.who()?;
        let n = self.path.len();
        let mut dir = self.vol.root();
        for (k, s) in self.path.segments().take(n.saturating_sub(1)).enumerate() {
            match self.lookup_kind_as(dir, s) {
                Ok((child, FileType::Directory)) => dir = child,
                Ok(_) => return None,
                Err(FsError::Access) => {
                    return Some(self.denied(&self.lacks(dir, Access::SEARCH, k)))
                }
                Err(FsError::NotFound) => {
                    return (!self.permits(dir, Access::WRITE_SEARCH))
                        .then(|| self.denied(&self.lacks(dir, Access::WRITE_SEARCH, k)));
                }
                Err(_) => return None,
            }
        }
        self.entry_denied(dir)
    }

    /// DELETE: search on the walk, then [`Self::entry_denied`] on the
    /// parent, for a name that exists (a missing one is 404, as unlink(2)
    /// says ENOENT before EACCES).
    pub(super) fn delete_denied(&self) -> Option<String> {
        self.who()?;
        let n = self.path.len();
        let dir = match self.resolve(n - 1) {
            Ok(a) if a.kind == FileType::Directory => a.ino,
            Err(FsError::Access) => return Some(self.walk_denied(n - 1)),
            _ => return None,
        };
        let name = self.path.name()?;
        match self.lookup_kind_as(dir, name) {
            Ok(_) => self.entry_denied(dir),
            Err(FsError::Access) => Some(self.walk_denied(n)),
            Err(_) => None,
        }
    }
}
