//! What both protocols do with the Volume through a connection: walk a
//! request's path as the identity requests act as, send a regular file
//! (GET/HEAD, labelled by the protocol), make an upload's parent
//! directories and give it its name.

use std::time::Instant;

use pktfs_fs::{ContentDigest, FileType, FsError, RxPiece, TmpFile};

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
