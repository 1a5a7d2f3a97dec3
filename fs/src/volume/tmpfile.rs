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
use super::{check_name, now_ns, write_new_inode, Attr, Inode, InodeWrite, Rec, Volume};
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
        let ask = LinkAsk {
            ino,
            dir,
            name,
            replace,
            cond,
            describe,
        };
        let mut tail = Some(tail);
        let r = self.rx_link_inner(&ask, &mut tail);
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
    ///
    /// Look up what the name leads to, lock the inodes by number, and
    /// check that the name still leads there (ns.rs, "Locking"); no lock
    /// is held between the lookup and the locks, so an upload waiting for
    /// a directory another upload holds across its commit delays nobody
    /// else. The first try is a fast path ([`Self::rx_link_fast`]); later
    /// tries take the ordered way ([`Self::rx_link_ordered`]). Either
    /// goes on to [`Self::rx_link_locked`] once it holds the locks.
    fn rx_link_inner(
        &self,
        ask: &LinkAsk<'_>,
        tail: &mut Option<Vec<RxPiece<'_>>>,
    ) -> Result<LinkOutcome> {
        self.check_writable()?;
        check_name(ask.name)?;
        if let Some(done) = self.rx_link_fast(ask, tail)? {
            return Ok(done);
        }
        // The fast try was the first of BINDING_RETRIES.
        for _ in 1..super::ns::BINDING_RETRIES {
            if let Some(done) = self.rx_link_ordered(ask, tail)? {
                return Ok(done);
            }
        }
        Err(FsError::Contended("the name"))
    }

    /// Lock and check, the fast way: the lookup under the directory's
    /// write lock, kept if the file and the file the name leads to can be
    /// taken without waiting (never out of number order). `None`: one of
    /// them is held by someone else; take the ordered way.
    fn rx_link_fast(
        &self,
        ask: &LinkAsk<'_>,
        tail: &mut Option<Vec<RxPiece<'_>>>,
    ) -> Result<Option<LinkOutcome>> {
        // Declared before the guards, so that they outlive them.
        let (darc, tarc, varc);
        darc = self.inode(ask.dir)?;
        let d = super::wlock(&darc)?;
        let victim = link_lookup(&d, ask.name)?;
        if let Some(done) = link_target_check(ask, victim, tail)? {
            return Ok(Some(done));
        }
        tarc = self.inode(ask.ino).ok();
        varc = victim.and_then(|(v, ..)| self.inode(v as u64).ok());
        let tg = tarc.as_ref().and_then(super::ns::try_wlock);
        let vg = varc.as_ref().and_then(super::ns::try_wlock);
        let Some(tg) = tg else {
            return Ok(None);
        };
        if victim.is_some() && vg.is_none() {
            return Ok(None);
        }
        let mut guards: SmallVec<[_; 3]> = SmallVec::new();
        guards.extend([(ask.dir as u32, d), (ask.ino as u32, tg)]);
        if let (Some((v, ..)), Some(vg)) = (victim, vg) {
            guards.push((v, vg));
        }
        // Looked up under the write lock still held.
        let mut l = LinkLocks::new(guards, ask, victim.map(|(v, _, c)| (v, c)));
        self.rx_link_locked(ask, tail, &mut l).map(Some)
    }

    /// Lock and check, the ordered way: the lookup under the directory's
    /// read lock, every inode then locked in ascending number, and the
    /// name checked again under the directory's write lock. `None`: the
    /// name moved, or an inode it led to was freed, in between; look again.
    fn rx_link_ordered(
        &self,
        ask: &LinkAsk<'_>,
        tail: &mut Option<Vec<RxPiece<'_>>>,
    ) -> Result<Option<LinkOutcome>> {
        let (dir, ino) = (ask.dir, ask.ino);
        let darc = self.inode(dir)?;
        let victim = link_lookup(&*super::rlock(&darc)?, ask.name)?;
        if let Some(done) = link_target_check(ask, victim, tail)? {
            return Ok(Some(done));
        }
        let mut inos: SmallVec<[u32; 3]> = SmallVec::new();
        inos.extend([dir as u32, ino as u32]);
        inos.extend(victim.map(|v| v.0));
        inos.sort_unstable();
        inos.dedup();
        let mut arcs: SmallVec<[_; 3]> = SmallVec::new();
        for &n in &inos {
            let a = match n as u64 == dir {
                true => Ok(darc.clone()),
                false => self.inode(n as u64),
            };
            match a {
                Ok(a) => arcs.push((n, a)),
                // The file the name led to, freed since the lookup.
                Err(FsError::NotFound) if n as u64 != ino => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let mut guards: SmallVec<[_; 3]> = SmallVec::new();
        for (n, a) in &arcs {
            match super::wlock(a) {
                Ok(g) => guards.push((*n, g)),
                Err(FsError::NotFound) if *n as u64 == ino => return Err(FsError::NotFound),
                // Freed since the lookup (the directory or the file the
                // name led to): look again.
                Err(FsError::NotFound) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let mut l = LinkLocks::new(guards, ask, None);
        // Where the name leads now, under the directory's write lock (the
        // cookie too: the same file may have been named anew).
        let d = l.dir();
        let now_bound = d
            .names
            .get(ask.name)
            .map(|&c| (d.data[&c].r.dirent_ino(), c));
        if now_bound.map(|b| b.0) != victim.map(|v| v.0) {
            return Ok(None);
        }
        l.set_victim(now_bound);
        self.rx_link_locked(ask, tail, &mut l).map(Some)
    }

    /// [`Self::rx_link`] with the directory, the file and what the name
    /// leads to write-locked, in its phases: the checks that need the
    /// locks; the name's record (everything fallible first, before the
    /// transaction or any DRAM state changes); the file (its write-back,
    /// its attributes, its tail); the name; the directory's times; the
    /// commit; then DRAM follows.
    fn rx_link_locked(
        &self,
        ask: &LinkAsk<'_>,
        tail: &mut Option<Vec<RxPiece<'_>>>,
        l: &mut LinkLocks<'_>,
    ) -> Result<LinkOutcome> {
        self.rx_link_check_locked(ask, l)?;
        let now = now_ns();
        // The directory's new mtime/ctime ride on the new dirent
        // (FLAG_DIR_TIME, FORMAT.md) instead of a switch of its attribute
        // slot: naming the file is then one 8-byte publish, not a journalled
        // commit. Only when the clock is past the slot's ctime (it always
        // is, unless the clock went back): otherwise the slot switches.
        let dir_time = (now > l.dir().attr.ctime_ns).then_some(now);
        let name = self.rx_link_write_name(ask, l, dir_time)?;
        // The file: its tail pieces and its new attributes (named, sized).
        // Nothing reaches it until the name below is published, so its
        // changes are written in place rather than journalled.
        let mut commit = Commit::new();
        self.write_back_unnamed(&mut commit, l.file());
        let ta = named_attr(l, now);
        let pieces = tail.take().unwrap_or_default();
        if let Err(e) = self.place_tail(&mut commit, l.file(), pieces, ta, now) {
            name.undo(self);
            return Err(e);
        }
        commit.make_unreachable();
        self.rx_link_publish_name(&mut commit, ask, l, name, dir_time, now);
        self.touch_dir(&mut commit, l.dir(), dir_time, now);
        commit.apply(self);
        Ok(self.rx_link_after(ask, l))
    }

    /// The checks that need the locks: the precondition, on what the name
    /// leads to (under the directory's and that file's write locks, it
    /// cannot change until the commit), and that the file is still
    /// unnamed.
    fn rx_link_check_locked(&self, ask: &LinkAsk<'_>, l: &mut LinkLocks<'_>) -> Result<()> {
        if let Some(cond) = ask.cond {
            let bound = match l.victim_inode() {
                Some(v) => self.bound_locked(v)?,
                None => Bound::Absent,
            };
            if !cond(&bound) {
                return Err(FsError::PreconditionFailed);
            }
        }
        let t = &l.file().attr;
        if t.nlink != 0 || t.kind != FileType::Regular {
            return Err(FsError::Invalid("not an unnamed file"));
        }
        Ok(())
    }

    /// The name's record, written and still unreachable: a new dirent
    /// (carrying the directory's times when `dir_time`), or, when the name
    /// replaces a file, the record its dirent is rewritten into.
    fn rx_link_write_name(
        &self,
        ask: &LinkAsk<'_>,
        l: &mut LinkLocks<'_>,
        dir_time: Option<i64>,
    ) -> Result<NewName> {
        let id = self.alloc_records(1)?[0];
        let (cookie, fresh) = match l.victim {
            Some((_, c)) => (c, None),
            None => {
                let cookie = l.dir().next_seq.max(FIRST_COOKIE);
                let kind = FileType::Regular;
                match self.new_dirent_pub(id, ask.name, ask.ino as u32, kind, cookie, dir_time) {
                    Ok(r) => (cookie, Some(r)),
                    Err(e) => {
                        self.free_records_now(&[id]);
                        return Err(e);
                    }
                }
            }
        };
        Ok(NewName { id, cookie, fresh })
    }

    /// Made on another thread, an unnamed file's inode write-back waits for
    /// that thread's fence, not this commit's: write it back here too.
    fn write_back_unnamed(&self, commit: &mut Commit, t: &Inode) {
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
    }

    /// Place the tail: `pieces` appended at the end of the unnamed file
    /// `t`, spliced in with its new attributes `ta` (sized, modified
    /// `now`); with no pieces, only the attributes. On error nothing
    /// changed and the pieces' references were dropped.
    fn place_tail(
        &self,
        commit: &mut Commit,
        t: &mut Inode,
        pieces: Vec<RxPiece<'_>>,
        mut ta: AttrSlot,
        now: i64,
    ) -> Result<()> {
        if pieces.is_empty() {
            self.set_attr(commit, t, ta);
            return Ok(());
        }
        let off = ta.size;
        let (ps, at) = self.place_at_end(t, pieces)?;
        ta.size = at;
        ta.mtime_ns = now;
        self.splice_range_tx(commit, t, off, at, ps, ta)
    }

    /// The name: the dirent linked at the directory's tail, or rewritten
    /// in place over the file it replaces, which loses a link.
    fn rx_link_publish_name(
        &self,
        commit: &mut Commit,
        ask: &LinkAsk<'_>,
        l: &mut LinkLocks<'_>,
        name: NewName,
        dir_time: Option<i64>,
        now: i64,
    ) {
        let NewName { id, cookie, fresh } = name;
        match fresh {
            None => {
                let kind = FileType::Regular;
                let ino = ask.ino as u32;
                self.replace_dirent_pub(commit, l.dir(), cookie, id, ino, kind, dir_time);
                let v = l
                    .victim_inode()
                    .expect("a replaced file when no dirent is new");
                let mut va = v.attr;
                va.nlink -= 1;
                va.ctime_ns = now;
                // As unlink: persisted while linked or kept open.
                if va.nlink > 0 || v.pins > 0 {
                    self.set_attr(commit, v, va);
                } else {
                    v.attr = va;
                }
            }
            Some(rec) => {
                let d = l.dir();
                commit.store(
                    d.ino,
                    self.data_link_before(d, cookie),
                    id.0,
                    Some((self.geo.record_pos(id).0, 64)),
                );
                d.data.insert(cookie, rec);
                d.names.insert(ask.name.into(), cookie);
                d.next_seq = cookie + 1;
            }
        }
    }

    /// The directory's times: carried by the new dirent when `dir_time`
    /// (the next slot switch keeps them), else a switch of its slot.
    fn touch_dir(&self, commit: &mut Commit, d: &mut Inode, dir_time: Option<i64>, now: i64) {
        let mut da = d.attr;
        da.mtime_ns = now;
        da.ctime_ns = now;
        if dir_time.is_some() {
            d.attr = da;
        } else {
            self.set_attr(commit, d, da);
        }
    }

    /// DRAM follows the commit: the file is durable and named (its
    /// creation pin spent), described if asked, and a replaced file
    /// nothing holds any more is pinned for the caller.
    fn rx_link_after(&self, ask: &LinkAsk<'_>, l: &mut LinkLocks<'_>) -> LinkOutcome {
        let t = l.file();
        t.unfenced_by = None;
        t.pins = t.pins.saturating_sub(1);
        // The version just named, described while it is still locked (a
        // later change cannot slip in before the caller asks).
        let digest = match ask.describe {
            true => self.digest_locked(t).ok(),
            false => None,
        };
        // Pinned for the caller, whose `Linked` frees it when dropped
        // (`unpin`).
        let mut pinned = None;
        if let (Some((v, _)), Some(g)) = (l.victim, l.victim_inode()) {
            if g.attr.nlink == 0 && g.pins == 0 {
                g.pins = 1;
                pinned = Some(v as u64);
            }
        }
        (l.victim.is_some(), pinned, digest)
    }
}

/// What [`Volume::rx_link`] and its variants were asked: name the unnamed
/// file `ino` `dir/name`.
struct LinkAsk<'a> {
    ino: u64,
    dir: u64,
    name: &'a [u8],
    replace: bool,
    cond: Option<Precondition<'a>>,
    /// Take the named version's digest ([`Linked::digest`]).
    describe: bool,
}

/// What a link did: whether it replaced a file, the replaced file when
/// pinned for the caller, and the named version's digest when asked.
type LinkOutcome = (bool, Option<u64>, Option<ContentDigest>);

/// What `name` leads to in the directory `d`: the inode, its dirent's
/// dtype and cookie.
fn link_lookup(d: &Inode, name: &[u8]) -> Result<Option<(u32, u8, u64)>> {
    if d.attr.kind != FileType::Directory {
        return Err(FsError::NotDir);
    }
    Ok(d.names.get(name).map(|&c| {
        let r = &d.data[&c].r;
        (r.dirent_ino(), r.dirent_dtype(), c)
    }))
}

/// What the name leads to, against what was asked: an error, `Some` when
/// the file already has this name (a repeated call: nothing to do), else
/// `None`, go on.
fn link_target_check(
    ask: &LinkAsk<'_>,
    victim: Option<(u32, u8, u64)>,
    tail: &Option<Vec<RxPiece<'_>>>,
) -> Result<Option<LinkOutcome>> {
    let Some((v, dtype, _)) = victim else {
        return Ok(None);
    };
    if !ask.replace {
        return Err(FsError::Exists);
    }
    if ask.cond.is_some() && v as u64 == ask.ino {
        // Not a case a conditional upload makes (its file is new).
        return Err(FsError::Invalid("a conditional link of a file onto itself"));
    }
    if dtype == FileType::Directory.dtype() {
        return Err(FsError::IsDir);
    }
    if v as u64 == ask.ino {
        // Already linked under this name (a repeated call).
        return match tail.as_ref().is_some_and(|t| !t.is_empty()) {
            false => Ok(Some((true, None, None))),
            true => Err(FsError::Invalid("not an unnamed file")),
        };
    }
    Ok(None)
}

/// The file's attributes once named: one link, changed `now`, and last
/// "accessed" `now` (nothing could read an unnamed file: it was last
/// accessed when it came into being, which for a file made ahead of its
/// upload, netpath's spares, is now, not when it was made). Named into a
/// setgid directory, it takes the directory's group, as a file created
/// there does (the setgid-directory rule, `setgid_rule` in ns/node.rs).
fn named_attr(l: &mut LinkLocks<'_>, now: i64) -> AttrSlot {
    let d = &l.dir().attr;
    let dir_group = (d.mode & super::ns::S_ISGID != 0).then_some(d.gid);
    let mut ta = l.file().attr;
    ta.nlink = 1;
    ta.ctime_ns = now;
    if let Some(g) = dir_group {
        ta.gid = g;
    }
    ta.atime_ns = now;
    ta
}

/// The inodes a link changes, write-locked in ascending number: the
/// directory, the unnamed file, and the file the name leads to (the
/// victim, replaced), with that file's number and dirent cookie.
struct LinkLocks<'a> {
    guards: SmallVec<[(u32, InodeWrite<'a>); 3]>,
    /// Where the directory, the file and the victim are in `guards`.
    di: usize,
    ti: usize,
    vi: Option<usize>,
    victim: Option<(u32, u64)>,
}

impl<'a> LinkLocks<'a> {
    /// `guards` of the directory, the file and, when `victim`, the file
    /// the name leads to.
    fn new(
        mut guards: SmallVec<[(u32, InodeWrite<'a>); 3]>,
        ask: &LinkAsk<'_>,
        victim: Option<(u32, u64)>,
    ) -> LinkLocks<'a> {
        guards.sort_unstable_by_key(|g| g.0);
        let at = |n: u32| guards.iter().position(|g| g.0 == n).expect("locked");
        let (di, ti) = (at(ask.dir as u32), at(ask.ino as u32));
        let mut l = LinkLocks {
            guards,
            di,
            ti,
            vi: None,
            victim: None,
        };
        l.set_victim(victim);
        l
    }
    fn set_victim(&mut self, victim: Option<(u32, u64)>) {
        self.victim = victim;
        self.vi = victim.map(|(v, _)| self.guards.iter().position(|g| g.0 == v).expect("locked"));
    }
    fn dir(&mut self) -> &mut Inode {
        &mut self.guards[self.di].1
    }
    fn file(&mut self) -> &mut Inode {
        &mut self.guards[self.ti].1
    }
    fn victim_inode(&mut self) -> Option<&mut Inode> {
        Some(&mut self.guards[self.vi?].1)
    }
}

/// The name's record, written before anything else changes: its cookie,
/// and the new dirent when the name was free.
struct NewName {
    id: RecordId,
    cookie: u64,
    fresh: Option<Rec>,
}

impl NewName {
    /// Undo of [`Volume::rx_link_write_name`] when the tail cannot be
    /// placed: the record, and the name bytes a new dirent took.
    fn undo(&self, v: &Volume) {
        v.free_records_now(&[self.id]);
        if let Some(r) = &self.fresh {
            v.release_payload(&[r.slice()]);
        }
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
