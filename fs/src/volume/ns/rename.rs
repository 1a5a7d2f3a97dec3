//! rename(2): the one namespace change that touches two directories and
//! up to two more inodes (the one moved, the one it replaces), with
//! RENAME_NOREPLACE and RENAME_EXCHANGE; one journalled commit.

use pktfs_layout::{FileType, RecordId};

use super::super::commit::Commit;
use super::super::failstop::OrStop;
use super::super::{check_name, now_ns, Volume, MAX_NLINK};
use super::{unless_freed, Locked, BINDING_RETRIES, FIRST_COOKIE};
use crate::error::{FsError, Result};

/// rename(2) flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
}

impl Volume {
    /// rename(2) with RENAME_NOREPLACE / RENAME_EXCHANGE.
    pub fn rename(&self, sp: u64, sn: &[u8], dp: u64, dn: &[u8], flags: RenameFlags) -> Result<()> {
        self.check_writable()?;
        check_name(sn).map_err(|e| {
            if matches!(e, FsError::NameTooLong) {
                e
            } else {
                FsError::Invalid("bad source name")
            }
        })?;
        check_name(dn)?;
        if flags.exchange && flags.noreplace {
            return Err(FsError::Invalid("RENAME_EXCHANGE with RENAME_NOREPLACE"));
        }
        // Fast path: within one directory (the usual atomic replace), the
        // directory write-locked and the names looked up under it, the
        // inodes they lead to taken if no one holds them. It moves no
        // directory to another parent, so it need not take turns.
        if sp == dp {
            // Declared before the guards, so that they outlive them.
            let (darc, sarc, xarc);
            darc = self.inode(sp)?;
            let d = super::super::wlock(&darc)?;
            if d.attr.kind != FileType::Directory {
                return Err(FsError::NotDir);
            }
            let (s, skind) = d.child_kind(sn).ok_or(FsError::NotFound)?;
            let dst = d.child_kind(dn);
            if !Self::rename_proceeds(s, dst, flags)? {
                return Ok(());
            }
            sarc = self.inode(s as u64).ok();
            xarc = dst.and_then(|(x, _)| self.inode(x as u64).ok());
            let sg = sarc.as_ref().and_then(super::try_wlock);
            let xg = xarc.as_ref().and_then(super::try_wlock);
            if let Some(sg) = sg {
                if dst.is_none() || xg.is_some() {
                    let dir = sp as u32;
                    let mut guards = vec![(dir, d), (s, sg)];
                    if let (Some((x, _)), Some(xg)) = (dst, xg) {
                        guards.push((x, xg));
                    }
                    let mut l = Locked { guards };
                    return self.rename_locked(
                        &mut l,
                        (dir, sn),
                        (dir, dn),
                        (s, skind),
                        dst,
                        flags,
                    );
                }
            };
        }
        // Renames take turns: only they move directories, so the loop check
        // below sees no other move. Every other check is made under the
        // inode locks, after checking that both names still lead where
        // the lookups said (see ns.rs on locking).
        let _renaming = self.renames.lock().or_stop();
        for _ in 0..BINDING_RETRIES {
            let (s, skind) = self.child_of(sp, sn)?.ok_or(FsError::NotFound)?;
            let dst = self.child_of(dp, dn)?;
            let (sp, dp) = (sp as u32, dp as u32);
            if !Self::rename_proceeds(s, dst, flags)? {
                return Ok(());
            }
            // A directory may not move into itself or below itself.
            let is_below = |dir: u32, anc: u32| {
                let mut cur = dir;
                loop {
                    if cur == anc {
                        return true;
                    }
                    match self.ns.lock().or_stop().dir_parent.get(&cur) {
                        Some(&p) if p != cur => cur = p,
                        _ => return false,
                    }
                }
            };
            if skind == FileType::Directory && is_below(dp, s) {
                return Err(FsError::Invalid("cannot move a directory into itself"));
            }
            if let (true, Some((d, FileType::Directory))) = (flags.exchange, dst) {
                if is_below(sp, d) {
                    return Err(FsError::Invalid("cannot move a directory into itself"));
                }
            }
            let mut inos = vec![sp, dp, s];
            if let Some((d, _)) = dst {
                inos.push(d);
            }
            let Some(arcs) = unless_freed(self.arcs(&inos))? else {
                continue; // freed since the lookup
            };
            let Some(mut l) = unless_freed(Locked::new(&arcs))? else {
                continue; // freed since the lookup
            };
            if l.get(sp).child(sn) != Some(s) || l.get(dp).child(dn) != dst.map(|d| d.0) {
                continue;
            }
            if l.get(dp).attr.nlink == 0 {
                return Err(FsError::NotFound); // removed while open
            }
            return self.rename_locked(&mut l, (sp, sn), (dp, dn), (s, skind), dst, flags);
        }
        Err(FsError::Contended("the names"))
    }

    /// What the flags say of the names found: an error, nothing to do
    /// (`false`: both names lead to the same file, where POSIX says do
    /// nothing), or go on.
    fn rename_proceeds(s: u32, dst: Option<(u32, FileType)>, flags: RenameFlags) -> Result<bool> {
        if flags.exchange && dst.is_none() {
            return Err(FsError::NotFound);
        }
        if flags.noreplace && dst.is_some() {
            return Err(FsError::Exists);
        }
        Ok(dst.is_none_or(|(d, _)| d != s))
    }

    /// [`Self::rename`] with both parents, the inode moved (`s`) and the
    /// one replaced or exchanged (`dst`) write-locked, the names checked.
    /// In its phases: the checks that need the locks; the dirents (to a
    /// free name, over a file it replaces, or exchanged); what every
    /// rename changes besides; one commit; DRAM follows.
    fn rename_locked(
        &self,
        l: &mut Locked<'_>,
        (sp, sn): (u32, &[u8]),
        (dp, dn): (u32, &[u8]),
        (s, skind): (u32, FileType),
        dst: Option<(u32, FileType)>,
        flags: RenameFlags,
    ) -> Result<()> {
        let moves_dir = skind == FileType::Directory && sp != dp;
        Self::rename_check_locked(l, dp, skind, dst, flags, moves_dir)?;
        let now = now_ns();
        let mut commit = Commit::new();
        let scookie = l.get(sp).names[sn];
        let (src, to) = ((sp, scookie), (dp, dn));
        match (dst, flags.exchange) {
            (None, _) => self.rename_to_free_name(&mut commit, l, src, to, (s, skind))?,
            (Some(d), false) => self.rename_over(&mut commit, l, src, to, (s, skind), d, now)?,
            (Some(d), true) => self.rename_exchange(&mut commit, l, src, to, (s, skind), d, now)?,
        }
        self.rename_common(
            &mut commit,
            l,
            (sp, dp),
            (s, skind),
            moves_dir && !flags.exchange,
            now,
        );
        commit.apply(self);
        // DRAM follows: the rename map, and a replaced inode nothing
        // holds any more freed.
        if skind == FileType::Directory {
            self.ns.lock().or_stop().dir_parent.insert(s, dp);
        }
        if let (Some((d, dkind)), false) = (dst, flags.exchange) {
            let v = l.get(d);
            if v.attr.nlink == 0 {
                if dkind == FileType::Directory {
                    self.ns.lock().or_stop().dir_parent.remove(&d);
                }
                if v.pins == 0 {
                    self.free_inode_storage(v);
                }
            }
        }
        Ok(())
    }

    /// The checks that need the locks: a replaced inode must be of the
    /// moved one's kind (an empty directory for a directory), and a
    /// directory moved to another parent must not take that parent past
    /// its link limit (unless it replaces a directory there: net zero).
    fn rename_check_locked(
        l: &mut Locked<'_>,
        dp: u32,
        skind: FileType,
        dst: Option<(u32, FileType)>,
        flags: RenameFlags,
        moves_dir: bool,
    ) -> Result<()> {
        if !flags.exchange {
            if let Some((d, dkind)) = dst {
                match (skind == FileType::Directory, dkind == FileType::Directory) {
                    (true, false) => return Err(FsError::NotDir),
                    (false, true) => return Err(FsError::IsDir),
                    (true, true) if !l.get(d).names.is_empty() => return Err(FsError::NotEmpty),
                    _ => {}
                }
            }
        }
        let dst_is_dir = matches!(dst, Some((_, FileType::Directory)));
        let replaces_dir = dst_is_dir && !flags.exchange;
        if moves_dir && !replaces_dir && l.get(dp).attr.nlink >= MAX_NLINK {
            return Err(FsError::TooManyLinks);
        }
        Ok(())
    }

    /// To a free name: a new dirent written first (it may fail for space),
    /// then the old one unlinked and the new one linked at dp's tail.
    fn rename_to_free_name(
        &self,
        commit: &mut Commit,
        l: &mut Locked<'_>,
        (sp, scookie): (u32, u64),
        (dp, dn): (u32, &[u8]),
        (s, skind): (u32, FileType),
    ) -> Result<()> {
        let id = self.alloc_records(1)?[0];
        let cookie = l.get(dp).next_seq.max(FIRST_COOKIE);
        let rec = match self.new_dirent(id, dn, None, s, skind, cookie, RecordId::NONE, None) {
            Ok(r) => r,
            Err(e) => {
                self.free_records_now(&[id]);
                return Err(e);
            }
        };
        self.unlink_dirent(commit, l.get(sp), scookie);
        let d = l.get(dp);
        commit.store(
            d.ino,
            self.data_link_before(d, cookie),
            id.0,
            Some((self.geo.record_pos(id).0, 64)),
        );
        d.data.insert(cookie, rec);
        d.names.insert(dn.into(), cookie);
        d.next_seq = cookie + 1;
        Ok(())
    }

    /// Over a file it replaces: the old dirent unlinked, the target's
    /// rewritten to name `s`; the replaced inode loses its link (all of
    /// them, a directory, whose parent loses a link too).
    #[allow(clippy::too_many_arguments)]
    fn rename_over(
        &self,
        commit: &mut Commit,
        l: &mut Locked<'_>,
        (sp, scookie): (u32, u64),
        (dp, dn): (u32, &[u8]),
        (s, skind): (u32, FileType),
        (d, dkind): (u32, FileType),
        now: i64,
    ) -> Result<()> {
        let id = self.alloc_records(1)?[0];
        let dcookie = l.get(dp).names[dn];
        self.unlink_dirent(commit, l.get(sp), scookie);
        self.replace_dirent(commit, l.get(dp), dcookie, id, s, skind, None);
        let victim = l.get(d);
        let mut va = victim.attr;
        va.ctime_ns = now;
        va.nlink = if dkind == FileType::Directory {
            0
        } else {
            va.nlink - 1
        };
        // As unlink: persisted while linked or kept open.
        if va.nlink > 0 || victim.pins > 0 {
            self.set_attr(commit, victim, va);
        } else {
            victim.attr = va;
        }
        if dkind == FileType::Directory {
            // dp loses the replaced subdirectory.
            let dpi = l.get(dp);
            let mut a = dpi.attr;
            a.nlink -= 1;
            self.set_attr(commit, dpi, a);
        }
        Ok(())
    }

    /// RENAME_EXCHANGE: both dirents rewritten, each naming the other's
    /// inode. Between two parents, an exchanged directory changes parent
    /// and the parents' link counts follow the directories; within one,
    /// the other inode's ctime changes.
    #[allow(clippy::too_many_arguments)]
    fn rename_exchange(
        &self,
        commit: &mut Commit,
        l: &mut Locked<'_>,
        (sp, scookie): (u32, u64),
        (dp, dn): (u32, &[u8]),
        (s, skind): (u32, FileType),
        (d, dkind): (u32, FileType),
        now: i64,
    ) -> Result<()> {
        let ids = self.alloc_records(2)?;
        let dcookie = l.get(dp).names[dn];
        self.replace_dirent(commit, l.get(sp), scookie, ids[0], d, dkind, None);
        self.replace_dirent(commit, l.get(dp), dcookie, ids[1], s, skind, None);
        if sp == dp {
            let x = l.get(d);
            let mut a = x.attr;
            a.ctime_ns = now;
            self.set_attr(commit, x, a);
            return Ok(());
        }
        let dmoves = dkind == FileType::Directory;
        if dmoves {
            let x = l.get(d);
            let mut a = x.attr;
            a.parent = sp;
            a.ctime_ns = now;
            self.set_attr(commit, x, a);
            self.ns.lock().or_stop().dir_parent.insert(d, sp);
        }
        let delta = |v: &mut u32, plus: bool, minus: bool| {
            if plus && !minus {
                *v += 1;
            }
            if minus && !plus {
                *v -= 1;
            }
        };
        let sdir = skind == FileType::Directory;
        let x = l.get(sp);
        let mut a = x.attr;
        delta(&mut a.nlink, dmoves, sdir);
        self.set_attr(commit, x, a);
        let x = l.get(dp);
        let mut a = x.attr;
        delta(&mut a.nlink, sdir, dmoves);
        self.set_attr(commit, x, a);
        Ok(())
    }

    /// What every rename changes besides its dirents: times on both
    /// parents, a directory moved (not exchanged) to another parent's
    /// link from the old parent to the new, and the moved inode's ctime
    /// (and a directory's parent link).
    fn rename_common(
        &self,
        commit: &mut Commit,
        l: &mut Locked<'_>,
        (sp, dp): (u32, u32),
        (s, skind): (u32, FileType),
        moves_dir_link: bool,
        now: i64,
    ) {
        for p in [sp, dp] {
            let x = l.get(p);
            let mut a = x.attr;
            a.mtime_ns = now;
            a.ctime_ns = now;
            self.set_attr(commit, x, a);
        }
        if moves_dir_link {
            let x = l.get(sp);
            let mut a = x.attr;
            a.nlink -= 1;
            self.set_attr(commit, x, a);
            let x = l.get(dp);
            let mut a = x.attr;
            a.nlink += 1;
            self.set_attr(commit, x, a);
        }
        let x = l.get(s);
        let mut a = x.attr;
        a.ctime_ns = now;
        if skind == FileType::Directory {
            a.parent = dp;
        }
        self.set_attr(commit, x, a);
    }
}
