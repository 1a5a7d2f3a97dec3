//! GET/HEAD (files with Range and conditional requests, directory
//! listings as text or JSON), DELETE, and the metrics endpoint.

use pktfs_fs::{ContentDigest, FileType, FsError};

use super::cond::{etag, evaluate, Current, Decision, Guard};
use super::conn::Conn;
use super::head::{resolve_range, Head, Method};
use super::response::{content_type, http_date, status_of};
use crate::config::Change;

/// A JSON listing is sent in pieces of about this size (chunked), so a
/// large directory costs its sorted names in memory, not its whole body.
const LISTING_PIECE: usize = 64 << 10;

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

/// The Prometheus text format served at the metrics path.
const METRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

    pub(super) fn get(&mut self, h: &Head) -> bool {
        if h.has_body() && !self.discard_body(h) {
            return false;
        }
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
                    return keep;
                }
                Err(e) => {
                    let code = if matches!(e, FsError::NotDir) {
                        404
                    } else {
                        status_of(&e)
                    };
                    self.error(code, &format!("{}: {e}", self.path.display()), keep);
                    return keep;
                }
            };
            if let Some(msg) = self.read_denied(a.ino) {
                self.error(403, &msg, keep);
                return keep;
            }
            if a.kind == FileType::Directory {
                return if h.accept_json {
                    self.listing_json(a.ino, h, send_body)
                } else {
                    self.listing(a.ino, keep, send_body)
                };
            }
            if a.kind != FileType::Regular {
                self.error(
                    404,
                    &format!("{}: not a regular file", self.path.display()),
                    keep,
                );
                return keep;
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
                    return keep;
                }
            };
            // The S3 listener's ETag is the stored one (MD5) while it
            // describes the file, and its headers go with the answer.
            let mut s3_extra = String::new();
            let tag = match self.s3 {
                true => self.s3_object_headers(&d, h.range.is_none(), &mut s3_extra),
                false => etag(&d),
            };
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
                    return self.send_out(false) && keep;
                }
                Decision::PreconditionFailed(why) => {
                    self.error(412, why, keep);
                    return keep;
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
                    return self.with_body(
                        416,
                        keep,
                        &extra,
                        b"416 Range Not Satisfiable\n",
                        send_body,
                    ) && keep;
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
                        return keep;
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
            let label = stable.then_some((&d, tag.as_str(), s3_extra.as_str()));
            return self.send_file(label, a.size, code, start, end, hold, keep);
        }
        self.error(503, "the file keeps changing; try again", keep);
        keep
    }

    #[allow(clippy::too_many_arguments)]
    /// `label`: the version's digest, its ETag and the S3 listener's
    /// header lines for it (None: unlabelled).
    fn send_file(
        &mut self,
        label: Option<(&ContentDigest, &str, &str)>,
        size: u64,
        code: u16,
        start: u64,
        end: u64,
        hold: Option<pktfs_fs::TxRange<'a>>,
        keep: bool,
    ) -> bool {
        let name = self.path.name().unwrap_or_default();
        // S3: the type it was stored with, else S3's default.
        let ty: std::borrow::Cow<'static, str> = match (self.s3, label) {
            (true, Some((d, _, _))) => self
                .s3_content_type(d)
                .map_or("binary/octet-stream".into(), Into::into),
            (true, None) => "binary/octet-stream".into(),
            (false, _) => content_type(name),
        };
        let mut extra = format!("Content-Type: {ty}\r\nAccept-Ranges: bytes\r\n");
        if let Some((d, tag, s3_extra)) = label {
            let lm = http_date(d.mtime_ns.div_euclid(1_000_000_000));
            extra.push_str(&format!("ETag: {tag}\r\nLast-Modified: {lm}\r\n"));
            extra.push_str(s3_extra);
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

    /// A directory as text: one name per line, "/" after directories.
    fn listing(&mut self, dir: u64, keep: bool, send_body: bool) -> bool {
        let mut body = Vec::new();
        let r = self.vol.readdir(dir, 0, |e| {
            body.extend_from_slice(&e.name);
            if e.kind == FileType::Directory {
                body.push(b'/');
            }
            body.push(b'\n');
            true
        });
        if let Err(e) = r {
            self.error(
                status_of(&e),
                &format!("{}: {e}", self.path.display()),
                keep,
            );
            return keep;
        }
        self.with_body(
            200,
            keep,
            "Content-Type: text/plain; charset=utf-8\r\n",
            &body,
            send_body,
        ) && keep
    }

    /// A directory as JSON: `[{"name", "type", "size", "mtime", "etag"}]`
    /// sorted by name (bytewise). HTTP/1.1: chunked, produced in pieces as
    /// it is sent; HTTP/1.0: the body ends with the connection.
    fn listing_json(&mut self, dir: u64, h: &Head, send_body: bool) -> bool {
        let mut names = Vec::new();
        let r = self.vol.readdir(dir, 0, |e| {
            names.push((e.name, e.ino, e.kind));
            true
        });
        if let Err(e) = r {
            self.error(
                status_of(&e),
                &format!("{}: {e}", self.path.display()),
                h.keep_alive,
            );
            return h.keep_alive;
        }
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Each entry's attributes need search on the directory (as a stat
        // of dir/name would); without it, names and types only.
        let searchable = self.permits(dir, pktfs_fs::Access::SEARCH);
        let keep = h.keep_alive && h.http11;
        self.begin(200, None, keep, "Content-Type: application/json\r\n");
        if !h.http11 {
            strip_framing(&mut self.out);
        }
        if !send_body {
            return self.send_out(false) && keep;
        }
        let mut piece = Vec::with_capacity(LISTING_PIECE + 1024);
        piece.push(b'[');
        let total = names.len();
        for (k, (name, ino, kind)) in names.into_iter().enumerate() {
            let entry = self.listing_entry(&name, ino, kind, searchable);
            // serde_json cannot fail on a Value.
            let _ = serde_json::to_writer(&mut piece, &entry);
            if k + 1 < total {
                piece.push(b',');
            }
            if piece.len() >= LISTING_PIECE && !self.send_piece(&mut piece, h.http11) {
                return false;
            }
        }
        piece.extend_from_slice(b"]\n");
        if !self.send_piece(&mut piece, h.http11) {
            return false;
        }
        if h.http11 {
            self.out.extend_from_slice(b"0\r\n\r\n");
        }
        self.send_out(false) && keep
    }

    fn listing_entry(
        &self,
        name: &[u8],
        ino: u64,
        kind: FileType,
        searchable: bool,
    ) -> serde_json::Value {
        let ty = match kind {
            FileType::Regular => "file",
            FileType::Directory => "dir",
            FileType::Symlink => "symlink",
            _ => "other",
        };
        // An entry removed since readdir, or unreadable, still shows its
        // name and type; what is unknown is null.
        let a = self.vol.getattr(ino).ok().filter(|_| searchable);
        let tag = match kind {
            FileType::Regular if searchable => self.vol.content_digest(ino).ok().map(|d| etag(&d)),
            _ => None,
        };
        let mtime = a.map(|a| {
            let t =
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(a.mtime_ns.max(0) as u64);
            humantime::format_rfc3339_nanos(t).to_string()
        });
        serde_json::json!({
            "name": String::from_utf8_lossy(name),
            "type": ty,
            "size": a.map(|a| a.size),
            "mtime": mtime,
            "etag": tag,
        })
    }

    /// Append `piece` to what is queued (as one chunk when chunked) and
    /// send it all.
    fn send_piece(&mut self, piece: &mut Vec<u8>, chunked: bool) -> bool {
        if piece.is_empty() {
            return true;
        }
        if chunked {
            self.out
                .extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            self.out.extend_from_slice(piece);
            self.out.extend_from_slice(b"\r\n");
        } else {
            self.out.extend_from_slice(piece);
        }
        piece.clear();
        let ok = self.send_out(true);
        self.out.clear();
        ok
    }

    /// `GET`/`HEAD` of the metrics path: the Prometheus text format. The
    /// path is reserved: a file of that name is not reachable over HTTP
    /// (it is through the mount and the CLI), and changes are refused.
    pub(super) fn metrics(&mut self, h: &Head) -> bool {
        if !matches!(h.method, Method::Get | Method::Head) {
            let msg = "the metrics path only answers GET and HEAD";
            return self.refuse(h, 405, msg);
        }
        if h.has_body() && !self.discard_body(h) {
            return false;
        }
        let text = self.sh.metrics.render(
            self.vol,
            self.sh.open_connections(),
            self.sh.spares.load(std::sync::atomic::Ordering::Relaxed),
            &self.sh.loops,
            self.sh.cfg.extra.as_ref(),
        );
        let extra = format!("Content-Type: {METRICS_TYPE}\r\nCache-Control: no-store\r\n");
        self.with_body(
            200,
            h.keep_alive,
            &extra,
            text.as_bytes(),
            h.method == Method::Get,
        ) && h.keep_alive
    }

    pub(super) fn delete(&mut self, h: &Head) -> bool {
        if let Some(r) = self.check_change(h) {
            return r;
        }
        if self.path.is_empty() {
            return self.refuse(h, 405, "cannot delete /");
        }
        if h.has_body() && !self.discard_body(h) {
            return false;
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
fn strip_framing(out: &mut Vec<u8>) {
    for key in [&b"\r\nContent-Length: "[..], b"\r\nTransfer-Encoding: "] {
        if let Some(at) = out.windows(key.len()).position(|w| w == key) {
            let from = at + 2;
            if let Some(len) = out[from..].windows(2).position(|w| w == b"\r\n") {
                out.drain(from..from + len + 2);
            }
        }
    }
}
