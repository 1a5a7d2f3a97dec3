//! The plain listener's changes: PUT/POST (the body received into an
//! unnamed file, named in one commit with its last pieces; `201`/`204`
//! only after that commit) and DELETE, under the conditional fields of
//! RFC 9110 (checked from the head, and again by the Volume under the
//! change's locks).

use pktfs_fs::{FileType, FsError, RxPiece, TmpFile};

use super::super::cond::{evaluate, push_etag, Current, Decision, Guard};
use super::super::conn::{Conn, Next, Receive, Received, SMALL_BODY};
use super::super::files::LinkError;
use super::super::head::{Framing, Head, TagList};
use super::super::response::status_of;
use crate::config::Change;
use crate::path::encode_segment;

impl<'a> Conn<'a> {
    /// Why nothing is stored at or below the metrics path.
    fn reserved_msg(&self) -> String {
        let m = self.sh.cfg.metrics_path.as_deref().unwrap_or_default();
        format!(
            "{}: the metrics path {m} is reserved: nothing is stored at or below it",
            self.path.display()
        )
    }

    /// The target's state for preconditions.
    fn current(&self) -> Result<Current, FsError> {
        let b = match self.resolve(self.path.len()) {
            Ok(a) if a.kind == FileType::Regular => {
                let d = self.vol.content_digest(a.ino)?;
                pktfs_fs::Bound::Present {
                    digest: Some(d),
                    mtime_ns: d.mtime_ns,
                    ctime_ns: a.ctime_ns,
                }
            }
            Ok(a) => pktfs_fs::Bound::Present {
                digest: None,
                mtime_ns: a.mtime_ns,
                ctime_ns: a.ctime_ns,
            },
            Err(FsError::NotFound) | Err(FsError::NotDir) => pktfs_fs::Bound::Absent,
            Err(e) => return Err(e),
        };
        Ok(Current::of(&b))
    }

    /// Evaluate a change's preconditions against the target now. A
    /// target that cannot be read (damaged) fails them: its version is
    /// unknown.
    pub(super) fn preconditions(&self, h: &Head) -> Decision {
        if !h.cond.any() {
            return Decision::Proceed;
        }
        match self.current() {
            Ok(cur) => evaluate(&h.cond, h.method, &cur),
            Err(_) => Decision::PreconditionFailed("the current version cannot be determined"),
        }
    }

    pub(super) fn check_change(&mut self, h: &Head) -> Option<bool> {
        // The token was checked for every method before this (`auth`).
        if self.sh.read_only() {
            return Some(self.refuse(h, 405, "this server is read-only"));
        }
        None
    }

    /// PUT/POST: refused from the head if it can be, else its body is
    /// received into an unnamed file ([`Conn::put_finish`] once it is in).
    pub(super) fn put(&mut self, h: &Head) -> Next<'a, ()> {
        let refused = |c: &mut Self, code, msg: &str| Next::answered(h, c.refuse(h, code, msg));
        if let Some(r) = self.check_change(h) {
            return Next::answered(h, r);
        }
        if h.reserved {
            // `PUT /metrics/x` would make a directory the listing of
            // which GET /metrics/ could never show.
            let msg = self.reserved_msg();
            return refused(self, 405, &msg);
        }
        if self.path.is_empty() {
            return refused(self, 405, "cannot store onto /");
        }
        let Some(framing) = h.framing() else {
            return refused(
                self,
                411,
                "a body length (Content-Length or chunked) is required",
            );
        };
        // Early refusals, before anything is received or created.
        if let Some(msg) = self.put_denied() {
            return refused(self, 403, &msg);
        }
        let st = self.vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        if let Framing::Length(n) = framing {
            if n > free {
                return refused(self, 507, "the body is larger than the free space");
            }
            if n > pktfs_fs::volume::MAX_FILE_SIZE {
                return refused(self, 413, "file too large");
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
                return refused(
                    self,
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
                    return refused(self, 409, "a directory has that name")
                }
                Ok(_) | Err(FsError::NotFound) => {}
                Err(e) => return refused(self, status_of(&e), &e.to_string()),
            }
            if let Decision::PreconditionFailed(why) = self.preconditions(h) {
                return refused(self, 412, why);
            }
        }
        let tmp = match self.upload_file() {
            Ok(t) => t,
            Err(e) => return refused(self, status_of(&e), &e.to_string()),
        };
        if !self.send_continue(h) {
            drop(tmp); // never named: freed
            return Next::Done(false);
        }
        Next::Receive(Receive {
            file: tmp,
            framing,
            body: (),
        })
    }

    /// The body is in: name the file in one commit with its last pieces,
    /// and answer 201/204 only after it returned.
    pub(super) fn put_finish(&mut self, h: &Head, r: Received<'a>) -> bool {
        let Received {
            file: mut tmp,
            tail,
            bytes,
            records,
        } = r;
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
        let linked = match self.link_upload(h, &mut tmp, tail) {
            Ok((l, _parent)) => l,
            Err((code, msg)) => {
                drop(tmp); // still unnamed: freed
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
    /// with its last pieces (`tail`), under the request's preconditions
    /// checked once more now the body is in ([`Conn::link_named`]). On
    /// error the file is still unnamed and the answer is (status, message).
    fn link_upload(
        &mut self,
        h: &Head,
        tmp: &mut TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
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
        match self.link_named(tmp, tail, replace, cond) {
            Ok(l) => Ok(l),
            Err(LinkError::Exists) => Err((412, "If-None-Match: *: the name exists".to_string())),
            Err(LinkError::Precondition) => Err((412, guard.why().to_string())),
            Err(LinkError::Status(code, msg)) => Err((code, msg)),
        }
    }

    pub(super) fn delete(&mut self, h: &Head) -> bool {
        if let Some(r) = self.check_change(h) {
            return r;
        }
        if self.path.is_empty() {
            return self.refuse(h, 405, "cannot delete /");
        }
        let keep = h.keep_alive;
        if let Some(msg) = self.delete_denied() {
            self.error(403, &msg, keep);
            return keep;
        }
        // If-Match / If-Unmodified-Since are checked by the removal itself,
        // under its locks: nothing can replace the file in between.
        let guard = Guard::new(&h.cond, h.method);
        let check = |b: &pktfs_fs::Bound| guard.check(b);
        let cond: Option<pktfs_fs::Precondition<'_>> = h.cond.any().then_some(&check);
        let n = self.path.len();
        let r = match self.resolve(n - 1) {
            Ok(p) if p.kind == FileType::Directory => {
                let name = self.path.name().expect("non-empty");
                self.vol
                    .remove_if(p.ino, name, cond)
                    .map(|ino| (p.ino, ino))
            }
            Ok(_) | Err(FsError::NotDir) | Err(FsError::NotFound) => match cond {
                // The parent is missing: so is the target.
                Some(c) if !c(&pktfs_fs::Bound::Absent) => Err(FsError::PreconditionFailed),
                _ => Err(FsError::NotFound),
            },
            Err(e) => Err(e),
        };
        match r {
            Ok((parent, ino)) => {
                let name = self.path.name().expect("non-empty").to_vec();
                self.sh.notify(Change::Removed {
                    parent,
                    name: &name,
                    ino,
                });
                self.head_only(204, keep, "") && keep
            }
            Err(FsError::PreconditionFailed) => {
                self.error(412, guard.why(), keep);
                keep
            }
            Err(e) => {
                self.error(
                    status_of(&e),
                    &format!("{}: {e}", self.path.display()),
                    keep,
                );
                keep
            }
        }
    }
}
