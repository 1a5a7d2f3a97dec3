//! Unnamed files (like O_TMPFILE) and linking received pieces into the
//! namespace: an upload is written into an inode no directory names and
//! appears atomically under its name at the end (one commit), so an upload
//! that never completes is never visible and never replaces the file it
//! was meant to replace.

use pktfs_layout::{AttrSlot, FileType, RecordId};
use smallvec::SmallVec;

use super::commit::Commit;
use super::digest::{Bound, ContentDigest, Precondition};
use super::failstop::OrStop;
use super::ns::FIRST_COOKIE;
use super::rx::RxPiece;
use super::{check_name, now_ns, write_new_inode, Attr, Inode, Volume};
use crate::error::{FsError, Result};

impl Volume {
    /// A regular file no directory names (like O_TMPFILE). It lives while
    /// pinned (it starts with one pin) and is freed by `unpin` unless
    /// `link_tmpfile` gave it a name first. A crash frees it: nothing
    /// reaches it.
    pub fn create_tmpfile(&self, perm: u32, uid: u32, gid: u32) -> Result<Attr> {
        self.check_writable()?;
        let ino = self
            .alloc
            .lock()
            .or_stop()
            .alloc_inode()
            .ok_or(FsError::NoSpace("no free inodes"))?;
        let now = now_ns();
        let attr = AttrSlot {
            kind: FileType::Regular,
            mode: perm & 0o7777,
            uid,
            gid,
            nlink: 0,
            size: 0,
            atime_ns: now,
            mtime_ns: now,
            ctime_ns: now,
            rdev: 0,
            parent: 0,
        };
        // Written and flushed, not fenced: nothing can reach the inode
        // until a commit names it (`rx_link`), and that commit's first
        // fence makes these lines durable before its publish. One fence
        // less per upload.
        let slot = write_new_inode(&self.pm, &self.geo, ino, &attr, RecordId::NONE);
        let mut i = Inode::new(ino, attr, slot);
        i.pins = 1;
        i.unfenced_by = Some(crate::media::FlushThread::current());
        let a = self.attr_of(&i);
        self.insert_inode(i);
        Ok(a)
    }

    /// Give an unnamed file the name `dir/name` in one commit, replacing an
    /// existing non-directory of that name when `replace` (the old file's
    /// space is freed after the commit). Drops the tmpfile's creation pin.
    pub fn link_tmpfile(&self, ino: u64, dir: u64, name: &[u8], replace: bool) -> Result<()> {
        self.rx_link(ino, Vec::new(), dir, name, replace)
            .map(|_| ())
    }

    /// [`Self::rx_commit`] of `tail` and [`Self::link_tmpfile`] as **one**
    /// commit: the unnamed file `ino` gets `tail` appended and appears as
    /// `dir/name` together, durable on return. A small upload is then one
    /// journalled commit instead of two. Returns whether an existing file
    /// was replaced. On error nothing is visible, the tail's references are
    /// dropped and the caller still holds its pin.
    pub fn rx_link(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<bool> {
        self.rx_link_deferred(ino, tail, dir, name, replace)
            .map(|l| l.replaced())
    }

    /// [`Self::rx_link`], but a file the name replaced keeps its space
    /// until the returned [`Linked`] is dropped: a server answers the
    /// client first and gives the old file's records and buffers back
    /// after (that work is not needed for durability: the commit already
    /// made the old file unreachable, and recovery frees what nothing
    /// reaches).
    pub fn rx_link_deferred(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<Linked<'_>> {
        self.rx_link_with(ino, tail, dir, name, replace, None, false)
    }

    /// [`Self::rx_link_deferred`] only if `cond` holds for what the name
    /// leads to when the link is made: it is checked under the locks of
    /// the directory and of the file being replaced, so no concurrent
    /// change of that name can come between the check and the link. A
    /// `false` is [`FsError::PreconditionFailed`] and changes nothing.
    ///
    /// The returned [`Linked`] also describes the version just named
    /// ([`Linked::digest`], for an HTTP answer's ETag): a pass over the
    /// file's records, which the other link calls skip.
    pub fn rx_link_if(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
    ) -> Result<Linked<'_>> {
        self.rx_link_with(ino, tail, dir, name, replace, cond, true)
    }

    /// [`Self::rx_link_if`], with the digest taken only when `describe`.
    #[allow(clippy::too_many_arguments)]
    fn rx_link_with(
        &self,
        ino: u64,
        tail: Vec<RxPiece<'_>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
        describe: bool,
    ) -> Result<Linked<'_>> {
        // A default ACL of `dir` is inherited before the name appears (a
        // directory lookup when there is none).
        if let Err(e) = self.inherit_into_unnamed(ino, dir) {
            self.rx_abort(tail);
            return Err(e);
        }
        let mut tail = Some(tail);
        let r = self.rx_link_inner(ino, &mut tail, dir, name, replace, cond, describe);
        // Pieces the commit did not take (an error before the splice).
        if let Some(t) = tail.take() {
            self.rx_abort(t);
        }
        r.map(|(replaced, pinned, digest)| Linked {
            vol: self,
            replaced,
            pinned,
            digest,
        })
    }

    /// The body of [`Self::rx_link`]; takes `tail` only once nothing can
    /// fail but the splice's own record allocation (which drops the
    /// pieces' references itself).
    #[allow(clippy::too_many_arguments)]
    fn rx_link_inner(
        &self,
        ino: u64,
        tail: &mut Option<Vec<RxPiece<'_>>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
        describe: bool,
    ) -> Result<(bool, Option<u64>, Option<ContentDigest>)> {
        self.check_writable()?;
        check_name(name)?;
        // Look up what the name leads to, lock the inodes by number, and
        // check that the name still leads there (ns.rs, "Locking"); no lock
        // is held between the lookup and the locks, so an upload waiting
        // for a directory another upload holds across its commit delays
        // nobody else.
        //
        // The first try is a fast path: the lookup under the directory's
        // write lock, kept if the other inodes can be taken without
        // waiting (never out of number order); later tries look up under
        // its read lock and lock in number order.
        let mut arcs: SmallVec<[_; 3]>;
        let (mut fast_d, mut fast_t, mut fast_v);
        let mut tries = 0;
        let (mut guards, inos, victim, victim_cookie) = loop {
            tries += 1;
            if tries > super::ns::BINDING_RETRIES {
                return Err(FsError::Contended("the name"));
            }
            let darc = self.inode(dir)?;
            let lookup = |d: &super::Inode| {
                if d.attr.kind != FileType::Directory {
                    return Err(FsError::NotDir);
                }
                Ok(d.names.get(name).map(|&c| {
                    let r = &d.data[&c].r;
                    (r.dirent_ino(), r.dirent_dtype(), c)
                }))
            };
            let mut dguard = None;
            let victim = if tries == 1 {
                fast_d = Some(darc.clone());
                let d = super::wlock(fast_d.as_ref().expect("just set"))?;
                let v = lookup(&d)?;
                dguard = Some(d);
                v
            } else {
                lookup(&*super::rlock(&darc)?)?
            };
            if let Some((v, dtype, _)) = victim {
                if !replace {
                    return Err(FsError::Exists);
                }
                if cond.is_some() && v as u64 == ino {
                    // Not a case a conditional upload makes (its file is new).
                    return Err(FsError::Invalid("a conditional link of a file onto itself"));
                }
                if dtype == FileType::Directory.dtype() {
                    return Err(FsError::IsDir);
                }
                if v as u64 == ino {
                    // Already linked under this name (a repeated call).
                    return match tail.as_ref().is_some_and(|t| !t.is_empty()) {
                        false => Ok((true, None, None)),
                        true => Err(FsError::Invalid("not an unnamed file")),
                    };
                }
            }
            let mut inos: SmallVec<[u32; 3]> = SmallVec::new();
            inos.extend([dir as u32, ino as u32]);
            inos.extend(victim.map(|v| v.0));
            inos.sort_unstable();
            inos.dedup();
            if let Some(d) = dguard {
                fast_t = self.inode(ino).ok();
                fast_v = victim.and_then(|(v, ..)| self.inode(v as u64).ok());
                let tg = fast_t.as_ref().and_then(super::ns::try_wlock);
                let vg = fast_v.as_ref().and_then(super::ns::try_wlock);
                if let Some(tg) = tg {
                    if victim.is_none() || vg.is_some() {
                        let mut guards: SmallVec<[_; 3]> = SmallVec::new();
                        guards.extend([(dir as u32, d), (ino as u32, tg)]);
                        if let (Some((v, ..)), Some(vg)) = (victim, vg) {
                            guards.push((v, vg));
                        }
                        // In the order of `inos`, which indexes them.
                        guards.sort_unstable_by_key(|g| g.0);
                        // Looked up under the write lock still held.
                        let (victim, cookie) = match victim {
                            Some((v, t, c)) => (Some((v, t)), Some(c)),
                            None => (None, None),
                        };
                        break (guards, inos, victim, cookie);
                    }
                }
                continue; // the ordered path
            }
            arcs = SmallVec::new();
            let mut freed = false;
            for &n in &inos {
                let a = match n as u64 == dir {
                    true => Ok(darc.clone()),
                    false => self.inode(n as u64),
                };
                let a = match a {
                    Ok(a) => a,
                    // The file the name led to, freed since the lookup.
                    Err(FsError::NotFound) if n as u64 != ino => {
                        freed = true;
                        break;
                    }
                    Err(e) => return Err(e),
                };
                arcs.push((n, a));
            }
            if freed {
                continue;
            }
            let mut guards: SmallVec<[_; 3]> = SmallVec::new();
            for (n, a) in &arcs {
                match super::wlock(a) {
                    Ok(g) => guards.push((*n, g)),
                    Err(FsError::NotFound) if *n as u64 == ino => return Err(FsError::NotFound),
                    // Freed since the lookup (the directory or the file
                    // the name led to): look again.
                    Err(FsError::NotFound) => {
                        freed = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if freed {
                continue;
            }
            let d = &guards[inos.iter().position(|m| *m == dir as u32).expect("locked")].1;
            // Where the name leads now, under the directory's write lock
            // (the cookie too: the same file may have been named anew).
            let now_bound = d.names.get(name).map(|&c| (d.data[&c].r.dirent_ino(), c));
            if now_bound.map(|b| b.0) != victim.map(|v| v.0) {
                continue;
            }
            break (
                guards,
                inos,
                victim.map(|(v, t, _)| (v, t)),
                now_bound.map(|b| b.1),
            );
        };
        let idx = |n: u32| inos.iter().position(|m| *m == n).expect("locked");
        let (ti, di) = (idx(ino as u32), idx(dir as u32));
        if let Some(cond) = cond {
            // Under the directory's and the victim's write locks: what the
            // name leads to cannot change until the commit below.
            let bound = match victim {
                Some((v, _)) => self.bound_locked(&guards[idx(v)].1)?,
                None => Bound::Absent,
            };
            if !cond(&bound) {
                return Err(FsError::PreconditionFailed);
            }
        }
        if guards[ti].1.attr.nlink != 0 || guards[ti].1.attr.kind != FileType::Regular {
            return Err(FsError::Invalid("not an unnamed file"));
        }
        let now = now_ns();
        // The directory's new mtime/ctime ride on the new dirent
        // (FLAG_DIR_TIME, FORMAT.md) instead of a switch of its attribute
        // slot: naming the file is then one 8-byte publish, not a journalled
        // commit. Only when the clock is past the slot's ctime (it always
        // is, unless the clock went back): otherwise the slot switches.
        let dir_time = (now > guards[di].1.attr.ctime_ns).then_some(now);
        // Everything fallible first, before the transaction or any DRAM
        // state changes: the dirent's record (written, still unreachable).
        let id = self.alloc_records(1)?[0];
        let cookie = match victim_cookie {
            Some(c) => c,
            None => guards[di].1.next_seq.max(FIRST_COOKIE),
        };
        let fresh = match victim {
            Some(_) => None,
            None => {
                match self.new_dirent_pub(id, name, ino as u32, FileType::Regular, cookie, dir_time)
                {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.free_records_now(&[id]);
                        return Err(e);
                    }
                }
            }
        };
        // Undo of the above if the splice below fails: the record, and the
        // name bytes a fresh dirent took.
        let undo_name = |v: &Volume| {
            v.free_records_now(&[id]);
            if let Some(r) = &fresh {
                v.release_payload(&[r.slice()]);
            }
        };
        // The file: its tail pieces and its new attributes (named, sized).
        // Nothing reaches it until the name below is published, so its
        // changes are written in place rather than journalled.
        let mut commit = Commit::new();
        // Named into a setgid directory: the directory's group, as a file
        // created there takes it (the setgid-directory rule, `make_node`).
        let d = &guards[di].1.attr;
        let dir_group = (d.mode & super::ns::S_ISGID != 0).then_some(d.gid);
        let t = &mut guards[ti].1;
        // Made on another thread, its inode's write-back waits for that
        // thread's fence, not this commit's: write it back here too.
        let inode_pos = self.geo.inode_pos(t.ino).0;
        if t.unfenced_by
            .is_some_and(|by| by != crate::media::FlushThread::current())
        {
            self.pm
                .flush(inode_pos, pktfs_layout::inode::INODE_SIZE as u64);
        }
        if cfg!(debug_assertions) {
            commit.store_reach(inode_pos, pktfs_layout::inode::INODE_SIZE as u64);
        }
        let mut ta = t.attr;
        ta.nlink = 1;
        ta.ctime_ns = now;
        if let Some(g) = dir_group {
            ta.gid = g;
        }
        // Nothing could read an unnamed file: it was last "accessed" when
        // it came into being, which for a file made ahead of its upload
        // (netpath's spares) is now, not when it was made.
        ta.atime_ns = now;
        let pieces = tail.take().unwrap_or_default();
        if pieces.is_empty() {
            self.set_attr(&mut commit, t, ta);
        } else {
            let off = ta.size;
            let (ps, at) = match self.place_at_end(t, pieces) {
                Ok(x) => x,
                Err(e) => {
                    undo_name(self);
                    return Err(e);
                }
            };
            ta.size = at;
            ta.mtime_ns = now;
            if let Err(e) = self.splice_range_tx(&mut commit, t, off, at, ps, ta) {
                undo_name(self);
                return Err(e);
            }
        }
        commit.make_unreachable();
        // The name.
        match (victim, fresh) {
            (Some((v, _)), _) => {
                self.replace_dirent_pub(
                    &mut commit,
                    &mut guards[di].1,
                    cookie,
                    id,
                    ino as u32,
                    FileType::Regular,
                    dir_time,
                );
                let g = &mut guards[idx(v)].1;
                let mut va = g.attr;
                va.nlink -= 1;
                va.ctime_ns = now;
                // As unlink: persisted while linked or kept open.
                if va.nlink > 0 || g.pins > 0 {
                    self.set_attr(&mut commit, g, va);
                } else {
                    g.attr = va;
                }
            }
            (None, rec) => {
                let rec = rec.expect("a new dirent when nothing is replaced");
                let d = &mut guards[di].1;
                commit.store(
                    d.ino,
                    self.data_link_before(d, cookie),
                    id.0,
                    Some((self.geo.record_pos(id).0, 64)),
                );
                d.data.insert(cookie, rec);
                d.names.insert(name.into(), cookie);
                d.next_seq = cookie + 1;
            }
        }
        let d = &mut guards[di].1;
        let mut da = d.attr;
        da.mtime_ns = now;
        da.ctime_ns = now;
        if dir_time.is_some() {
            d.attr = da; // carried by the dirent; the next slot switch keeps it
        } else {
            self.set_attr(&mut commit, d, da);
        }
        commit.apply(self);
        let t = &mut guards[ti].1;
        t.unfenced_by = None;
        t.pins = t.pins.saturating_sub(1);
        // The version just named, described while it is still locked (a
        // later change cannot slip in before the caller asks).
        let digest = match describe {
            true => self.digest_locked(t).ok(),
            false => None,
        };
        // A replaced file nothing holds any more: pinned for the caller,
        // whose `Linked` frees it when dropped (`unpin`).
        let mut pinned = None;
        if let Some((v, _)) = victim {
            let g = &mut guards[idx(v)].1;
            if g.attr.nlink == 0 && g.pins == 0 {
                g.pins = 1;
                pinned = Some(v as u64);
            }
        }
        Ok((victim.is_some(), pinned, digest))
    }
}

/// An unnamed file (like O_TMPFILE) owned through its creation pin:
/// dropped while still unnamed, it is freed; [`TmpFile::link`] gives it a
/// name, and the pin goes with it (so it is released exactly once,
/// whichever way the upload ends).
#[derive(Debug)]
#[must_use = "dropping it at once frees the unnamed file"]
pub struct TmpFile<'v> {
    vol: &'v Volume,
    attr: Attr,
    /// Still holds the creation pin (not yet named).
    pinned: bool,
}

impl<'v> TmpFile<'v> {
    pub fn ino(&self) -> u64 {
        self.attr.ino
    }
    /// The attributes it was created with.
    pub fn attr(&self) -> &Attr {
        &self.attr
    }
    /// Has [`Self::link`] named it?
    pub fn is_linked(&self) -> bool {
        !self.pinned
    }
    /// [`Volume::rx_commit`] into this file.
    pub fn commit(&self, pieces: Vec<RxPiece<'_>>) -> Result<u64> {
        self.vol.rx_commit(self.attr.ino, pieces)
    }
    /// [`Volume::rx_link_deferred`]: append `tail` and name the file
    /// `dir/name` in one commit. On success the creation pin is spent and
    /// dropping this does nothing more; on error the file is still unnamed
    /// and still this handle's.
    pub fn link(
        &mut self,
        tail: Vec<RxPiece<'v>>,
        dir: u64,
        name: &[u8],
        replace: bool,
    ) -> Result<Linked<'v>> {
        self.link_if(tail, dir, name, replace, None)
    }
    /// [`Self::link`] under a precondition ([`Volume::rx_link_if`]).
    pub fn link_if(
        &mut self,
        tail: Vec<RxPiece<'v>>,
        dir: u64,
        name: &[u8],
        replace: bool,
        cond: Option<Precondition<'_>>,
    ) -> Result<Linked<'v>> {
        assert!(self.pinned, "the file is already named");
        let l = self
            .vol
            .rx_link_if(self.attr.ino, tail, dir, name, replace, cond)?;
        self.pinned = false;
        Ok(l)
    }
}

impl TmpFile<'_> {
    /// The same unnamed file, owned with a counted reference to its
    /// Volume instead of a borrow: for tables that outlive a connection
    /// (an S3 multipart upload's parts). Not yet named: panics if it was.
    pub fn into_owned(mut self, vol: &std::sync::Arc<Volume>) -> OwnedTmpFile {
        assert!(
            std::ptr::eq(self.vol, &**vol),
            "a TmpFile owned by another Volume"
        );
        assert!(self.pinned, "the file is already named");
        // The creation pin moves to the owned handle.
        self.pinned = false;
        OwnedTmpFile {
            vol: vol.clone(),
            attr: self.attr,
        }
    }
}

/// An unnamed file held by a counted reference to its Volume
/// ([`TmpFile::into_owned`]): freed when dropped (nothing can name it).
#[derive(Debug)]
#[must_use = "dropping it at once frees the unnamed file"]
pub struct OwnedTmpFile {
    vol: std::sync::Arc<Volume>,
    attr: Attr,
}

impl OwnedTmpFile {
    pub fn ino(&self) -> u64 {
        self.attr.ino
    }
}

impl Drop for OwnedTmpFile {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.vol.unpin(self.attr.ino, 1);
        }
    }
}

impl Drop for TmpFile<'_> {
    fn drop(&mut self) {
        // Not while unwinding (a second panic would abort): an unnamed
        // file nothing frees is freed by the next open (nothing reaches it).
        if self.pinned && !std::thread::panicking() {
            self.vol.unpin(self.attr.ino, 1);
        }
    }
}

impl Volume {
    /// [`Self::create_tmpfile`], owned: the returned [`TmpFile`] frees the
    /// file when dropped unless it was named.
    pub fn tmpfile(&self, perm: u32, uid: u32, gid: u32) -> Result<TmpFile<'_>> {
        let attr = self.create_tmpfile(perm, uid, gid)?;
        Ok(TmpFile {
            vol: self,
            attr,
            pinned: true,
        })
    }
}

/// The result of [`Volume::rx_link_deferred`]: whether a file was
/// replaced, and that file held (pinned) until this is dropped, when its
/// space goes back to the allocators.
#[derive(Debug)]
#[must_use = "dropping it at once frees the replaced file's space; hold it to do that later"]
pub struct Linked<'a> {
    vol: &'a Volume,
    replaced: bool,
    pinned: Option<u64>,
    digest: Option<ContentDigest>,
}

impl Linked<'_> {
    /// An existing file of that name was replaced.
    pub fn replaced(&self) -> bool {
        self.replaced
    }
    /// The named file's [`Volume::content_digest`] as the link left it,
    /// from [`Volume::rx_link_if`] (and [`TmpFile::link_if`]); None from
    /// the other link calls, if it could not be taken (a damaged record),
    /// or when the file already had the name.
    pub fn digest(&self) -> Option<&ContentDigest> {
        self.digest.as_ref()
    }
}

impl Drop for Linked<'_> {
    fn drop(&mut self) {
        if let Some(ino) = self.pinned.take() {
            self.vol.unpin(ino, 1);
        }
    }
}
