//! The upload pipeline (PUT/POST): an unnamed file receives the body
//! (inline, or through a persister thread for large bodies), then one
//! commit appends the last pieces and gives the file its name. `201`/`204`
//! is sent only after that commit: never before the data is durable and
//! named, and an upload that does not complete is never visible.

use std::time::Instant;

use pktfs_fs::{FileType, FsError};

use super::cond::{push_etag, Decision, Guard};
use super::conn::{Conn, SMALL_BODY};
use super::framing::BodyError;
use super::head::{Framing, Head, TagList};
use super::response::status_of;
use crate::config::Change;
use crate::path::encode_segment;
use crate::receive::body::{Pieces, SpaceGuard, Walk};
use crate::receive::persist::with_persister;

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
    pub(super) fn put(&mut self, h: &Head) -> bool {
        if let Some(r) = self.check_change(h) {
            return r;
        }
        if self.path.is_empty() {
            return self.refuse(h, 405, "cannot store onto /");
        }
        let Some(framing) = h.framing() else {
            return self.refuse(
                h,
                411,
                "a body length (Content-Length or chunked) is required",
            );
        };
        // Early refusals, before anything is received or created.
        if let Some(msg) = self.put_denied() {
            return self.refuse(h, 403, &msg);
        }
        let st = self.vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        if let Framing::Length(n) = framing {
            if n > free {
                return self.refuse(h, 507, "the body is larger than the free space");
            }
            if n > pktfs_fs::volume::MAX_FILE_SIZE {
                return self.refuse(h, 413, "file too large");
            }
        }
        if matches!(framing, Framing::Chunked { .. }) {
            // A body of unknown length: refused before it is read unless
            // the volume has room beyond its reserve (the body is stopped
            // 507 if it then eats into it: `crate::receive::body::SpaceGuard`).
            let cfg = &self.sh.cfg;
            if free < 2 * cfg.upload_reserve_bytes.max(1)
                || st.records_free < 2 * cfg.upload_reserve_records.max(1)
            {
                return self.refuse(
                    h,
                    507,
                    "too little free space or records for a body of unknown length",
                );
            }
        }
        let n = self.path.len();
        let small = matches!(framing, Framing::Length(len) if len <= SMALL_BODY);
        if !small || h.cond.any() {
            // Before receiving a large body (or one whose preconditions
            // already fail): would it be refused at the end?
            match self.resolve(n) {
                Ok(a) if a.kind == FileType::Directory => {
                    return self.refuse(h, 409, "a directory has that name")
                }
                Ok(_) | Err(FsError::NotFound) => {}
                Err(e) => return self.refuse(h, status_of(&e), &e.to_string()),
            }
            if let Decision::PreconditionFailed(why) = self.preconditions(h) {
                return self.refuse(h, 412, why);
            }
        }
        let tmp = match self.upload_file() {
            Ok(t) => t,
            Err(e) => return self.refuse(h, status_of(&e), &e.to_string()),
        };
        if !self.send_continue(h) {
            self.drop_tmp(tmp);
            return false;
        }
        if let Some(ob) = self.outbox.as_mut() {
            // On an event loop the session receives the body where it
            // lands and then calls `put_finish`.
            ob.upload = Some((tmp, framing));
            return true;
        }
        let big = match framing {
            Framing::Length(n) => n >= self.sh.cfg.persister_min,
            Framing::Chunked { .. } | Framing::Stream => self.sh.cfg.persister_min != u64::MAX,
        };
        let r = if big {
            self.receive_pipelined(framing, tmp.ino())
        } else {
            self.receive_inline(framing, tmp.ino())
        };
        self.put_finish(h, tmp, r)
    }

    /// The unnamed file an upload's body goes into: the one made ahead
    /// (`spare`), else a new one.
    pub(super) fn upload_file(&mut self) -> Result<pktfs_fs::TmpFile<'a>, FsError> {
        match self.spare.take() {
            Some(t) => Ok(t.take()),
            None => self.vol.tmpfile(0o644, self.sh.uid, self.sh.gid),
        }
    }

    /// The body is in (`r`: its bytes and records, the last pieces still
    /// in `self.pieces`) or failed: name the file in one commit with the
    /// last pieces, and answer 201/204 only after it returned.
    pub(super) fn put_finish(
        &mut self,
        h: &Head,
        mut tmp: pktfs_fs::TmpFile<'a>,
        r: Result<(u64, u64), BodyError>,
    ) -> bool {
        let (bytes, records) = match r {
            Ok(t) => t,
            Err(e) => {
                self.drop_tmp(tmp);
                self.body_failed(e);
                return false;
            }
        };
        if bytes == 0 {
            // No data commit set the times: an unnamed file made ahead of
            // time must not carry its creation time as the upload's.
            let now = pktfs_fs::SetAttr {
                mtime: Some(pktfs_fs::TimeSet::Now),
                atime: Some(pktfs_fs::TimeSet::Now),
                ..Default::default()
            };
            if let Err(e) = self.vol.setattr(tmp.ino(), &now) {
                tracing::debug!("upload of {}: setting its times: {e}", self.path.display());
            }
        }
        // The body is durable in the unnamed file: give it its name.
        let keep = h.keep_alive;
        let linked = match self.link_upload(h, &mut tmp) {
            Ok((l, _parent)) => l,
            Err((code, msg)) => {
                self.drop_tmp(tmp);
                self.error(code, &msg, keep);
                return keep;
            }
        };
        // The new version's tag, so a client can make its next change
        // conditional on it (from the records' CRCs: no pass over data).
        let mut extra = std::mem::take(&mut self.scratch_head);
        extra.clear();
        if let Some(d) = linked.digest() {
            extra.push_str("ETag: ");
            push_etag(&mut extra, d);
            extra.push_str("\r\n");
        }
        let go_on = if linked.replaced() {
            self.head_only(204, keep, &extra) && keep
        } else {
            extra.push_str("Location: ");
            for s in self.path.segments() {
                extra.push('/');
                encode_segment(s, &mut extra);
            }
            extra.push_str("\r\nContent-Type: text/plain; charset=utf-8\r\n");
            let body = format!("stored {bytes} bytes as {records} records\n");
            self.with_body(201, keep, &extra, body.as_bytes(), true) && keep
        };
        self.scratch_head = extra;
        if self.outbox.is_some() && go_on {
            // On an event loop the answer is only queued: the session
            // drops this once it is sent (`on_sent`). A connection that
            // ends after this answer is not waited on: no next request
            // is delayed, and its linger could hold the space seconds.
            self.replaced = Some(linked);
            self.spare_wanted = true;
        }
        // Otherwise the answer was written, or nobody waits: the old
        // version goes now.
        go_on
    }

    /// Name an upload's unnamed file at the request's path, in one commit
    /// with its last pieces (`self.pieces`): the parent directories made
    /// as needed, permissions and preconditions checked once more now the
    /// body is in. On success the link (holding a replaced file) and the
    /// parent directory; on error the file is still unnamed and the
    /// answer is (status, message).
    pub(super) fn link_upload(
        &mut self,
        h: &Head,
        tmp: &mut pktfs_fs::TmpFile<'a>,
    ) -> Result<(pktfs_fs::Linked<'a>, u64), (u16, String)> {
        // Preconditions once more, now that the body is in (a change while
        // it arrived counts), checked by the link itself under the locks
        // of the directory and of the file it replaces: no concurrent
        // replacement can come between the check and the new name.
        // `If-None-Match: *` is the link's refusal to replace.
        let guard = Guard::new(&h.cond, h.method);
        let check = |b: &pktfs_fs::Bound| guard.check(b);
        let cond: Option<pktfs_fs::Precondition<'_>> = h.cond.any().then_some(&check);
        let replace = !matches!(h.cond.if_none_match, Some(TagList::Any));
        match self.link_named(tmp, replace, cond) {
            Ok(l) => Ok(l),
            Err(LinkError::Exists) => Err((412, "If-None-Match: *: the name exists".to_string())),
            Err(LinkError::Precondition) => Err((412, guard.why().to_string())),
            Err(LinkError::Status(code, msg)) => Err((code, msg)),
        }
    }

    /// [`Self::link_upload`]'s commit with the caller's precondition
    /// (`cond`, checked by the link under its locks) and replace rule: the
    /// S3 endpoint evaluates S3's preconditions itself and links with a
    /// guard of its own (`s3::precond`). The tail in `self.pieces` is spent
    /// whatever the outcome: a caller that may link again after a refused
    /// precondition commits it first.
    pub(super) fn link_named(
        &mut self,
        tmp: &mut pktfs_fs::TmpFile<'a>,
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
        let tail = std::mem::take(&mut self.pieces);
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

    /// The pieces an upload's body becomes, kept from the volume's
    /// reserve, their commits timed.
    pub(super) fn upload_pieces(&self) -> Pieces<'a> {
        let cfg = &self.sh.cfg;
        let guard = SpaceGuard::new(cfg.upload_reserve_bytes, cfg.upload_reserve_records);
        Pieces::new(Some(guard), Some(&self.sh.metrics.commit_seconds))
    }

    /// Receive the body into `ino` on this thread: (its bytes, its
    /// records); the last pieces are left in `self.pieces` for the link.
    fn receive_inline(&mut self, framing: Framing, ino: u64) -> Result<(u64, u64), BodyError> {
        let mut walk = Walk::new(framing, self.sh.cfg.max_header_bytes);
        let mut pieces = self.upload_pieces();
        if let Err(e) = self.walk_body(&mut walk, Some(&mut pieces), Some(ino), &mut ()) {
            pieces.abort(self.vol);
            return Err(e.widen());
        }
        self.pieces = pieces.tail(&mut ());
        Ok((
            walk.data_bytes(),
            pieces.records() + self.pieces.len() as u64,
        ))
    }

    /// A large body: this thread only receives and walks it; a persister
    /// thread makes the pieces and commits them (`crate::receive::persist`).
    /// Everything is committed before this returns Ok.
    fn receive_pipelined(&mut self, framing: Framing, ino: u64) -> Result<(u64, u64), BodyError> {
        let (vol, sh) = (self.vol, self.sh);
        let cfg = &sh.cfg;
        let batch = cfg.rx_chunk as u64;
        let (walked, committed) =
            with_persister(vol, ino, batch, &sh.metrics.commit_seconds, |p| {
                let p = p?;
                let guard = SpaceGuard::new(cfg.upload_reserve_bytes, cfg.upload_reserve_records);
                let mut pieces = Pieces::off_thread(Some(guard), p);
                let mut walk = Walk::new(framing, cfg.max_header_bytes);
                let r = self
                    .walk_body(&mut walk, Some(&mut pieces), None, &mut ())
                    .and_then(|()| {
                        pieces
                            .flush_small()
                            .map_err(crate::receive::body::BodyError::Fs)
                    });
                // Dropped here: the thread hears the body ended.
                drop(pieces);
                Some(r.map(|()| walk.data_bytes()))
            });
        match (walked, committed) {
            // No thread could be started: this one does it all.
            (None, _) => self.receive_inline(framing, ino),
            (Some(Ok(bytes)), Ok(records)) => Ok((bytes, records)),
            (Some(Err(e)), _) => Err(e.widen()),
            (Some(Ok(_)), Err(e)) => Err(BodyError::Fs(e)),
        }
    }

    /// Give up an upload: its uncommitted tail and its unnamed file.
    pub(super) fn drop_tmp(&mut self, tmp: pktfs_fs::TmpFile<'a>) {
        self.vol.rx_abort(std::mem::take(&mut self.pieces));
        drop(tmp); // frees the unnamed file
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
