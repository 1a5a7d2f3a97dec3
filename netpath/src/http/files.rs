//! What both protocols do with the Volume through a connection, as the
//! identity requests act as: walk a request's path, check what it may do,
//! send a regular file (GET/HEAD, labelled by the protocol), make an
//! upload's parent directories and give it its name.
//!
//! # Permissions
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

use std::time::Instant;

use pktfs_fs::{Access, ContentDigest, Cred, Denial, FileType, FsError, RxPiece, TmpFile};

use super::cond::{evaluate, Current, Decision};
use super::conn::Conn;
use super::head::{resolve_range, Head, Method};
use super::response::{http_date, status_of};
use crate::config::Change;

/// One pin on an inode, dropped with the value.
struct Pinned<'v> {
    vol: &'v pktfs_fs::Volume,
    ino: u64,
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        self.vol.unpin(self.ino, 1);
    }
}

/// How a GET labels the version it sends.
pub(super) trait Labels {
    /// The version's ETag (quoted) for the digest `d`; header lines that
    /// go with it are appended to `extra`. `whole`: no Range was asked.
    fn tag(&self, c: &Conn<'_>, d: &ContentDigest, whole: bool, extra: &mut String) -> String;
    /// The Content-Type of the file at the request's path, whose version
    /// is `d` (None: unlabelled, it changed while it was read).
    fn content_type(
        &self,
        c: &Conn<'_>,
        d: Option<&ContentDigest>,
    ) -> std::borrow::Cow<'static, str>;
}

/// What a GET found.
pub(super) enum Got {
    /// Answered: whether the connection goes on.
    Sent(bool),
    /// A directory (its inode): the protocol answers it.
    Directory(u64),
}

/// Why [`Conn::link_named`] did not name the file (it is still unnamed).
#[derive(Debug)]
pub(super) enum LinkError {
    /// `replace` was false and the name exists.
    Exists,
    /// The caller's precondition refused what the name leads to.
    Precondition,
    /// Anything else: the status and message to answer.
    Status(u16, String),
}

impl<'a> Conn<'a> {
    /// [`Self::resolve`] of the whole path, with a pin on what it leads to
    /// (none for the root): the file cannot be freed and its number reused
    /// by another file while the pin is held, so the attributes, version
    /// and bytes a GET takes of that number are all of one file.
    fn resolve_pinned(&self) -> Result<(pktfs_fs::Attr, Option<Pinned<'a>>), FsError> {
        let n = self.path.len();
        if n == 0 {
            return Ok((self.resolve(0)?, None));
        }
        let dir = self.resolve(n - 1)?;
        if dir.kind != FileType::Directory {
            return Err(FsError::NotFound);
        }
        let last = self.path.segments().nth(n - 1).ok_or(FsError::NotFound)?;
        if !self.permits(dir.ino, pktfs_fs::Access::SEARCH) {
            return Err(FsError::Access);
        }
        let a = self.vol.lookup_pinned(dir.ino, last)?;
        let pin = Pinned {
            vol: self.vol,
            ino: a.ino,
        };
        Ok((a, Some(pin)))
    }

    /// GET/HEAD of what the path leads to, labelled by `labels`: a
    /// regular file is sent (with Range and the conditional fields); a
    /// directory is handed back for the protocol to answer.
    pub(super) fn get_file(&mut self, h: &Head, labels: &impl Labels) -> Got {
        debug_assert!(!h.has_body(), "a GET's body is read before it is served");
        let send_body = h.method == Method::Get;
        let keep = h.keep_alive;
        // Take a hold on the bytes to send, and make sure it is the version
        // the name led to before and after (attributes for the head and
        // the held bytes must agree).
        for _ in 0..8 {
            let (a, _pin) = match self.resolve_pinned() {
                Ok(a) => a,
                Err(FsError::Access) => {
                    let msg = self.walk_denied(self.path.len());
                    self.error(403, &msg, keep);
                    return Got::Sent(keep);
                }
                Err(e) => {
                    let code = if matches!(e, FsError::NotDir) {
                        404
                    } else {
                        status_of(&e)
                    };
                    self.error(code, &format!("{}: {e}", self.path.display()), keep);
                    return Got::Sent(keep);
                }
            };
            if let Some(msg) = self.read_denied(a.ino) {
                self.error(403, &msg, keep);
                return Got::Sent(keep);
            }
            if a.kind == FileType::Directory {
                return Got::Directory(a.ino);
            }
            if a.kind != FileType::Regular {
                self.error(
                    404,
                    &format!("{}: not a regular file", self.path.display()),
                    keep,
                );
                return Got::Sent(keep);
            }
            // The version: checksum, size and time from one view. A file
            // that changes all the time (a raw stream being received) is
            // still sent, as a prefix, but unlabelled (see `stable`).
            let d = match self.vol.content_digest(a.ino) {
                Ok(d) => d,
                Err(FsError::NotFound) => continue, // removed meanwhile
                Err(e) => {
                    self.error(
                        status_of(&e),
                        &format!("{}: {e}", self.path.display()),
                        keep,
                    );
                    return Got::Sent(keep);
                }
            };
            // The version's tag and the header lines that go with it (the
            // S3 listener's: its stored ETag and metadata).
            let mut tag_extra = String::new();
            let tag = labels.tag(self, &d, h.range.is_none(), &mut tag_extra);
            let cur = Current::Present {
                etag: Some(tag.clone()),
                mtime_s: d.mtime_ns.div_euclid(1_000_000_000),
            };
            match evaluate(&h.cond, h.method, &cur) {
                Decision::Proceed => {}
                Decision::NotModified => {
                    let extra = format!(
                        "ETag: {tag}\r\nLast-Modified: {}\r\n",
                        http_date(d.mtime_ns.div_euclid(1_000_000_000))
                    );
                    self.begin(304, None, keep, &extra);
                    // A 304 has no body and no framing headers.
                    strip_framing(&mut self.out);
                    return Got::Sent(self.send_out(false) && keep);
                }
                Decision::PreconditionFailed(why) => {
                    self.error(412, why, keep);
                    return Got::Sent(keep);
                }
            }
            let (code, start, end) = match resolve_range(h.range, a.size) {
                Ok(None) => (200, 0, a.size),
                Ok(Some((s, e))) => (206, s, e),
                Err(()) if self.form.is_some() => {
                    // S3's InvalidRange, as its Error XML.
                    let why = format!("the range is not within the object's {} bytes", a.size);
                    self.error(416, &why, keep);
                    return Got::Sent(keep);
                }
                Err(()) => {
                    let extra = format!(
                        "Content-Range: bytes */{}\r\nContent-Type: text/plain; charset=utf-8\r\n",
                        a.size
                    );
                    let body = b"416 Range Not Satisfiable\n";
                    return Got::Sent(self.with_body(416, keep, &extra, body, send_body) && keep);
                }
            };
            // A local range is held whole (no copy, no DRAM); one with
            // tiered records is planned and sent a window at a time
            // (`super::tiered`).
            let hold = if send_body && end > start {
                match self.vol.tx_range(a.ino, start, end - start) {
                    Ok(x) => Some(x),
                    // Known before the head: say so rather than send a
                    // body that fails its checksum (the Volume logged the
                    // file and range).
                    Err(
                        e @ (FsError::Damaged { .. }
                        | FsError::DamagedInode { .. }
                        | FsError::Failed(_)),
                    ) => {
                        self.error(500, &format!("{}: {e}", self.path.display()), keep);
                        return Got::Sent(keep);
                    }
                    // Anything else: the file changed under us; look again.
                    Err(_) => continue,
                }
            } else {
                None
            };
            // The name must still lead to the same file, and the hold must
            // cover the range (a file that only grew, like a raw stream
            // being received, is fine: the held bytes are what is sent).
            let after = self.resolve(self.path.len());
            let ok = after.as_ref().is_ok_and(|b| b.ino == a.ino)
                && hold.as_ref().is_none_or(|x| range_size(x) >= end);
            if !ok {
                drop(hold);
                continue;
            }
            // Label the version only if it did not change meanwhile.
            let version = (d.mtime_ns, d.size);
            let stable = (a.mtime_ns, a.size) == version
                && after.is_ok_and(|b| (b.mtime_ns, b.size) == version);
            let label = stable.then_some((&d, tag.as_str(), tag_extra.as_str()));
            let ty = labels.content_type(self, label.map(|l| l.0));
            let sent = self.send_file(label, &ty, (a.size, code, start, end), hold, keep);
            return Got::Sent(sent);
        }
        self.error(503, "the file keeps changing; try again", keep);
        Got::Sent(keep)
    }

    /// The answer's head and the held range: `label` the version's digest,
    /// its ETag and the header lines that go with it (None: unlabelled);
    /// `(size, code, start, end)` the file's size, 200 or 206 and the range.
    fn send_file(
        &mut self,
        label: Option<(&ContentDigest, &str, &str)>,
        ty: &str,
        (size, code, start, end): (u64, u16, u64, u64),
        hold: Option<pktfs_fs::TxRange<'a>>,
        keep: bool,
    ) -> bool {
        let mut extra = format!("Content-Type: {ty}\r\nAccept-Ranges: bytes\r\n");
        if let Some((d, tag, tag_extra)) = label {
            let lm = http_date(d.mtime_ns.div_euclid(1_000_000_000));
            extra.push_str(&format!("ETag: {tag}\r\nLast-Modified: {lm}\r\n"));
            extra.push_str(tag_extra);
        }
        if code == 206 {
            extra.push_str(&format!(
                "Content-Range: bytes {start}-{}/{size}\r\n",
                end - 1
            ));
        }
        self.begin(code, Some(end - start), keep, &extra);
        match hold {
            Some(pktfs_fs::TxRange::Tiered(plan)) => self.send_tiered(plan, keep),
            Some(pktfs_fs::TxRange::Local(h)) => self.send_with(Some(h), false) && keep,
            None => self.send_with(None, false) && keep,
        }
    }

    /// Name an upload's unnamed file at the request's path, in one commit
    /// with its last pieces (`tail`): the parent directories made as
    /// needed, the permissions checked once more now the body is in, and
    /// the caller's precondition (`cond`, checked by the link under its
    /// locks) and replace rule. On success the link (holding a replaced
    /// file) and the parent directory; on error the file is still unnamed.
    /// `tail` is spent whatever the outcome: a caller that may link again
    /// after a refused precondition commits it first.
    pub(super) fn link_named(
        &mut self,
        tmp: &mut TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
        replace: bool,
        cond: Option<pktfs_fs::Precondition<'_>>,
    ) -> Result<(pktfs_fs::Linked<'a>, u64), LinkError> {
        let n = self.path.len();
        let notify = |c: Change<'_>| self.sh.notify(c);
        let parent = match self.parent_dir(n - 1, &notify) {
            Ok(p) => p,
            Err(e) => {
                let code = if matches!(e, FsError::NotDir | FsError::Exists) {
                    409
                } else {
                    status_of(&e)
                };
                let msg = match e {
                    FsError::Access => self
                        .put_denied()
                        .unwrap_or_else(|| self.denied("no write or search permission")),
                    e => format!("{}: {e}", self.path.display()),
                };
                return Err(LinkError::Status(code, msg));
            }
        };
        // Checked again now that the body is in (the early check may be
        // stale), before the name is given.
        if let Some(msg) = self.entry_denied(parent) {
            return Err(LinkError::Status(403, msg));
        }
        let mut name = std::mem::take(&mut self.scratch_name);
        name.clear();
        name.extend_from_slice(self.path.name().expect("non-empty path"));
        // One call, under the directory's lock: whether a file was replaced
        // comes back from it (no separate lookup that would queue behind
        // other uploads into the same directory).
        // `linked` holds a replaced file until the answer is out: its space
        // is freed after, off the client's wait (see the end).
        let t0 = Instant::now();
        let linked = tmp.link_if(tail, parent, &name, replace, cond);
        self.sh
            .metrics
            .commit_seconds
            .observe(t0.elapsed().as_secs_f64());
        let linked = match linked {
            Ok(l) => l,
            Err(e) => {
                self.scratch_name = name;
                return Err(match e {
                    FsError::IsDir => LinkError::Status(409, "a directory has that name".into()),
                    FsError::Exists if !replace => LinkError::Exists,
                    FsError::PreconditionFailed => LinkError::Precondition,
                    e => LinkError::Status(status_of(&e), format!("{}: {e}", self.path.display())),
                });
            }
        };
        self.stored_file();
        self.sh.notify(Change::Entry {
            parent,
            name: &name,
            ino: tmp.ino(),
        });
        self.scratch_name = name;
        Ok((linked, parent))
    }

    /// The directory for the first `n` segments, created if missing (as
    /// the identity requests act as: search on each, write and search
    /// where one is created; the new ones are its, `Shared::uid`/`gid`).
    pub(super) fn parent_dir(&self, n: usize, notify: &dyn Fn(Change<'_>)) -> Result<u64, FsError> {
        self.vol.make_dirs(
            self.path.segments().take(n),
            (0o755, self.sh.uid, self.sh.gid),
            self.who(),
            &mut |parent, name, ino| notify(Change::Entry { parent, name, ino }),
        )
    }
}

/// The file size when a range was held or planned.
fn range_size(r: &pktfs_fs::TxRange<'_>) -> u64 {
    match r {
        pktfs_fs::TxRange::Local(h) => h.size(),
        pktfs_fs::TxRange::Tiered(p) => p.size(),
    }
}

/// Drop the body-framing line (`Content-Length`/`Transfer-Encoding`) from
/// a head built by `begin`: for a 304, and for an HTTP/1.0 body that ends
/// with the connection.
pub(super) fn strip_framing(out: &mut Vec<u8>) {
    for key in [&b"\r\nContent-Length: "[..], b"\r\nTransfer-Encoding: "] {
        if let Some(at) = out.windows(key.len()).position(|w| w == key) {
            let from = at + 2;
            if let Some(len) = out[from..].windows(2).position(|w| w == b"\r\n") {
                out.drain(from..from + len + 2);
            }
        }
    }
}

impl<'a> Conn<'a> {
    /// Walk the path's first `segs` segments from the root (symlinks are
    /// not followed), with search permission on each directory walked
    /// (else [`FsError::Access`]).
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
