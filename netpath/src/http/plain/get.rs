//! GET/HEAD on the plain listener: a file with its CRC ETag and the type
//! its name says, a directory as its listing (text, or JSON for a client
//! that asks for it), and the metrics path.

use std::borrow::Cow;

use pktfs_fs::{ContentDigest, FileType};

use super::super::cond::etag;
use super::super::conn::Conn;
use super::super::files::{strip_framing, Got, Labels};
use super::super::head::{Head, Method};
use super::super::response::{content_type, status_of};

/// A JSON listing is sent in pieces of about this size (chunked), so a
/// large directory costs its sorted names in memory, not its whole body.
const LISTING_PIECE: usize = 64 << 10;

/// The Prometheus text format served at the metrics path.
const METRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The plain listener's labels: the records' CRC tag, the type by name.
struct ByContent;

impl Labels for ByContent {
    #[inline]
    fn tag(&self, _c: &Conn<'_>, d: &ContentDigest, _whole: bool, _extra: &mut String) -> String {
        etag(d)
    }
    #[inline]
    fn content_type(&self, c: &Conn<'_>, _d: Option<&ContentDigest>) -> Cow<'static, str> {
        content_type(c.path.name().unwrap_or_default())
    }
}

impl<'a> Conn<'a> {
    pub(super) fn get(&mut self, h: &Head) -> bool {
        match self.get_file(h, &ByContent) {
            Got::Sent(keep) => keep,
            Got::Directory(ino) => {
                let send_body = h.method == Method::Get;
                if h.accept_json {
                    self.listing_json(ino, h, send_body)
                } else {
                    self.listing(ino, h.keep_alive, send_body)
                }
            }
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
            let msg = "the metrics path only answers GET and HEAD: it is reserved, nothing is stored there";
            return self.refuse(h, 405, msg);
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
}
