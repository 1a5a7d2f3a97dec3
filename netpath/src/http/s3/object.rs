//! Objects: PutObject (the body lands in an unnamed file's packet
//! buffers and is named once its digests are checked), GetObject and
//! HeadObject (the plain listener's GET, with S3's ETag and headers),
//! DeleteObject, CopyObject (records sharing the source's buffers: no
//! bytes copied), and what a body is once it is in.

use std::borrow::Cow;

use pktfs_fs::{Bound, ContentDigest, FileType, FsError, RxPiece, TmpFile};
use pktfs_s3::checksum::{etag, Algorithm, Value};
use pktfs_s3::error::{Code, S3Error};

use super::super::conn::{Conn, Next, Receive, Received};
use super::super::files::{Got, Labels};
use super::super::head::{Framing, Head};
use super::body::{BodyKind, Finished, S3Body, XmlOp};
use super::meta::{etag_of, ObjectMeta};
use super::precond::{
    check_copy_source, check_delete, copy_source_conditions, quoted_for_get, Snap, WriteCond,
    RETRIES,
};
use super::Ctx;
use super::{fs_error, S3Req};

/// The most a single PutObject stores, as S3 allows.
pub(super) const MAX_PUT_BYTES: u64 = 5 << 30;
/// The most an XML request body (Complete, DeleteObjects, CreateBucket)
/// may take, as the parser allows: 10,000 parts' entries fit.
pub(super) const MAX_XML_BYTES: u64 = pktfs_s3::xml::MAX_BODY_BYTES as u64;

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

/// GET/HEAD of an object: the stored S3 ETag (the MD5) and headers
/// while they describe the file, else the records' ([`etag_of`]).
struct ObjectLabels {
    /// `x-amz-checksum-mode: ENABLED`: the object's checksum too.
    checksum_mode: bool,
    /// GetObject's `response-*` query parameters: (header, value) to
    /// answer with in place of the stored one.
    overrides: Vec<(&'static str, String)>,
}

/// GetObject's query parameters that set an answer's header, and the
/// header each sets.
const RESPONSE_OVERRIDES: [(&str, &str); 6] = [
    ("response-cache-control", "Cache-Control"),
    ("response-content-disposition", "Content-Disposition"),
    ("response-content-encoding", "Content-Encoding"),
    ("response-content-language", "Content-Language"),
    ("response-content-type", "Content-Type"),
    ("response-expires", "Expires"),
];

/// The `response-*` overrides a GetObject asks for; a value that could not
/// be one header line (a control character) is InvalidArgument.
fn response_overrides(r: &S3Req) -> Result<Vec<(&'static str, String)>, S3Error> {
    let mut out = Vec::new();
    for (q, header) in RESPONSE_OVERRIDES {
        if let Some(v) = r.q(q) {
            if v.chars().any(|c| c.is_control()) {
                return Err(err(
                    Code::InvalidArgument,
                    format!("{q}: a header value cannot hold a control character"),
                ));
            }
            out.push((header, pktfs_s3::meta_value::to_header(v).into_owned()));
        }
    }
    Ok(out)
}

/// `extra` without its lines of the header `name`.
fn drop_header(extra: &mut String, name: &str) {
    let kept: String = extra
        .split_inclusive("\r\n")
        .filter(|l| {
            !l.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        })
        .collect();
    *extra = kept;
}

impl Labels for ObjectLabels {
    fn tag(&self, c: &Conn<'_>, d: &ContentDigest, whole: bool, extra: &mut String) -> String {
        let (tag, meta) = etag_of(c.vol, d);
        if let Some(m) = &meta {
            m.push_headers(extra, self.checksum_mode && whole);
            if let Some(p) = m.parts {
                extra.push_str(&format!("x-amz-mp-parts-count: {p}\r\n"));
            }
        }
        // Content-Type is the content_type() below.
        for (name, v) in self.overrides.iter().filter(|(n, _)| *n != "Content-Type") {
            drop_header(extra, name);
            extra.push_str(&format!("{name}: {v}\r\n"));
        }
        let stored_crc32c = meta.as_ref().is_some_and(|m| m.has_crc32c());
        if self.checksum_mode && whole && !stored_crc32c {
            // From the records' CRCs, combined: whatever wrote the file.
            let v = Value::Crc32c(d.crc32c);
            extra.push_str(&format!(
                "{}: {}\r\n",
                Algorithm::Crc32c.header_name(),
                v.to_base64()
            ));
            // A stored checksum said its type already.
            if meta.as_ref().is_none_or(|m| m.checksum.is_none()) {
                extra.push_str("x-amz-checksum-type: FULL_OBJECT\r\n");
            }
        }
        tag
    }

    /// The type it was stored with, else S3's default.
    fn content_type(&self, c: &Conn<'_>, d: Option<&ContentDigest>) -> Cow<'static, str> {
        if let Some((_, v)) = self.overrides.iter().find(|(n, _)| *n == "Content-Type") {
            return Cow::Owned(v.clone());
        }
        d.and_then(|d| etag_of(c.vol, d).1)
            .and_then(|m| m.content_type)
            .map_or("binary/octet-stream".into(), Into::into)
    }
}

impl<'a> Ctx<'_, 'a> {
    /// The range part `n` of the object `ino` lies in (None: the whole
    /// object, part 1 of one not uploaded in parts); InvalidPart past its
    /// parts.
    fn s3_part_range(
        &self,
        ino: u64,
        n: u32,
    ) -> Result<Option<super::super::head::RangeSpec>, S3Error> {
        let meta = ObjectMeta::load(self.vol, ino);
        let parts = meta.as_ref().and_then(|m| m.parts);
        let no_part = |count: u64| {
            err(
                Code::InvalidPart,
                format!("the object has {count} part(s): no part {n}"),
            )
        };
        let Some(count) = parts else {
            return if n == 1 { Ok(None) } else { Err(no_part(1)) };
        };
        let Some(sizes) = meta.and_then(|m| m.part_sizes) else {
            return Err(err(
                Code::NotImplemented,
                format!("the sizes of this object's {count} parts were not kept (more than {} runs of sizes): read it by Range", pktfs_s3::part_sizes::MAX_RUNS),
            ));
        };
        let Some(span) = sizes.span(n) else {
            return Err(no_part(u64::from(count)));
        };
        if span.len == 0 {
            return Err(err(Code::InvalidPart, format!("part {n} is empty")));
        }
        Ok(Some(super::super::head::RangeSpec::FromTo(
            span.offset,
            Some(span.offset.saturating_add(span.len - 1)),
        )))
    }

    /// Receive the body into an unnamed file (`s3_finish` once it is in):
    /// an aws-chunked body is walked as chunks, never past its
    /// Content-Length.
    pub(super) fn s3_receive(
        &mut self,
        h: &Head,
        framing: Framing,
        body: S3Body,
    ) -> Next<'a, Box<S3Body>> {
        let tmp = match self.upload_file() {
            Ok(t) => t,
            Err(e) => return self.refused(h, fs_error(&e, "a file for the body")),
        };
        if !self.send_continue(h) {
            drop(tmp); // never named: freed
            return Next::Done(false);
        }
        let framing = match body.limit() {
            Some(within) => Framing::Chunked {
                within: Some(within),
            },
            None => framing,
        };
        Next::Receive(Receive {
            file: tmp,
            framing,
            body: Box::new(body),
        })
    }

    /// Space for a body of `n` bytes, or why not.
    pub(super) fn s3_room(&self, n: Option<u64>, max: u64) -> Result<(), S3Error> {
        let st = self.vol.statfs();
        let free = st.blocks_free.saturating_mul(st.block_size as u64);
        match n {
            Some(n) if n > max => Err(err(
                Code::EntityTooLarge,
                format!("{n} bytes is over the {max} this request may carry"),
            )),
            Some(n) if n > free => Err(err(
                Code::ServiceUnavailable,
                format!("the image has {free} bytes free, the body is {n}"),
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn s3_put_object(&mut self, h: &Head, r: S3Req) -> Next<'a, Box<S3Body>> {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.refused(h, e);
        }
        let Some(framing) = h.framing() else {
            return self.refused(
                h,
                err(
                    Code::MissingContentLength,
                    "PutObject needs a Content-Length",
                ),
            );
        };
        let sh = self.head;
        if r.target.dir_marker {
            return Next::answered(h, self.s3_put_dir(h));
        }
        let decoded = sh.data_len(h);
        if let Err(e) = self.s3_room(decoded, MAX_PUT_BYTES) {
            return self.refused(h, e);
        }
        if let Some(msg) = self.put_denied() {
            return self.refused(h, err(Code::AccessDenied, msg));
        }
        if let Ok(a) = self.resolve(self.path.len()) {
            if a.kind == FileType::Directory {
                return self.refused(h,
                    err(
                        Code::InvalidRequest,
                        format!(
                            "{} is a prefix of other keys (a directory): it cannot also be an object",
                            r.target.key
                        ),
                    ),
                );
            }
        }
        let meta = match ObjectMeta::from_request(sh) {
            Ok(m) => m,
            Err(msg) => return self.refused(h, err(Code::InvalidArgument, msg)),
        };
        // S3's preconditions, against the object's S3 ETag, before the
        // body is received (and again when it is named: `s3_object_done`).
        let early = WriteCond::of(h).and_then(|c| match c {
            Some(c) => self.s3_target_snap().and_then(|s| c.check(&s, false)),
            None => Ok(()),
        });
        if let Err(e) = early {
            return self.refused(h, e);
        }
        let mut body = match S3Body::new(h, sh, &r.verified, BodyKind::Object) {
            Ok(b) => b,
            Err(e) => return self.refused(h, e),
        };
        body.meta = meta;
        self.s3_receive(h, framing, body)
    }

    /// PUT of `dir/`: the directories of the key, made; no body.
    fn s3_put_dir(&mut self, h: &Head) -> bool {
        if h.has_body() && h.content_length != Some(0) {
            return self.s3_refuse(
                h,
                err(
                    Code::InvalidRequest,
                    "a key that ends in / names a directory: its body must be empty",
                ),
            );
        }
        if let Some(msg) = self.put_denied() {
            return self.s3_refuse(h, err(Code::AccessDenied, msg));
        }
        let notify = |c: crate::config::Change<'_>| self.sh.notify(c);
        match self.parent_dir(self.path.len(), &notify) {
            Ok(_) => {
                let tag = super::list::EMPTY_ETAG;
                self.s3_empty(h, 200, &format!("ETag: {tag}\r\n"))
            }
            Err(e) => {
                let e = fs_error(&e, &self.path.display());
                self.s3_error(&e, h.keep_alive);
                h.keep_alive
            }
        }
    }

    /// An S3 body is in (`r`): checked, then acted on by kind.
    pub(super) fn s3_finish(&mut self, h: &Head, r: Received<'a>, mut body: S3Body) -> bool {
        let Received {
            file: tmp, tail, ..
        } = r;
        let keep = h.keep_alive;
        let kind = body.kind.clone();
        let meta = std::mem::take(&mut body.meta);
        let req = body.req.take();
        let fin = match body.finish() {
            Ok(f) => f,
            Err(e) => {
                self.vol.rx_abort(tail);
                drop(tmp); // never named: freed
                self.s3_error(&e, keep);
                return keep;
            }
        };
        match kind {
            BodyKind::Object => self.s3_object_done(h, tmp, tail, fin, meta),
            BodyKind::Part { upload_id, number } => {
                self.s3_part_done(h, tmp, tail, fin, &upload_id, number)
            }
            BodyKind::Xml(op) => {
                let Some(req) = req else {
                    self.vol.rx_abort(tail);
                    self.s3_error(&err(Code::InternalError, "no request"), keep);
                    return keep;
                };
                self.s3_xml_done(h, tmp, tail, fin, op, *req)
            }
        }
    }

    /// PutObject's body is in and checked: its metadata stored, then the
    /// name given in one commit with the last pieces; 200 after that.
    fn s3_object_done(
        &mut self,
        h: &Head,
        mut tmp: TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
        fin: Finished,
        mut meta: ObjectMeta,
    ) -> bool {
        let keep = h.keep_alive;
        let md5 = fin.md5.expect("an object's MD5 is computed");
        meta.etag = etag(&md5);
        meta.size = fin.size;
        meta.crc32c = fin.crc32c;
        if let Some(c) = &fin.checksum {
            meta.set_checksum(c);
            meta.checksum_type = Some("FULL_OBJECT".into());
        }
        if fin.size == 0 {
            // No data commit set the times (a spare file carries its
            // creation time).
            let now = pktfs_fs::SetAttr {
                mtime: Some(pktfs_fs::TimeSet::Now),
                atime: Some(pktfs_fs::TimeSet::Now),
                ..Default::default()
            };
            if let Err(e) = self.vol.setattr(tmp.ino(), &now) {
                tracing::debug!("S3 upload of {}: its times: {e}", self.path.display());
            }
        }
        // Two commits, in this order: the metadata onto the still-unnamed
        // file (one xattr record, published), then the name with the last
        // pieces (`s3_link`; a conditional PUT commits the pieces first, a
        // third commit, so that a refused link can be tried again). A
        // crash between them leaves an unnamed file, which the next open
        // frees: the object is either whole, metadata included, or absent.
        if let Err(e) = meta.store(self.vol, tmp.ino()) {
            self.vol.rx_abort(tail);
            drop(tmp); // never named: freed
            let e = fs_error(&e, "storing the object's metadata");
            self.s3_error(&e, keep);
            return keep;
        }
        // The preconditions passed before the body came (`s3_put_object`);
        // now against the object as it is when the name is given.
        let linked =
            match WriteCond::of(h).and_then(|c| self.s3_link(&mut tmp, tail, c.as_ref(), true)) {
                Ok(l) => l,
                Err(e) => {
                    drop(tmp); // still unnamed: freed
                    self.s3_error(&e, keep);
                    return keep;
                }
            };
        debug_assert!(linked.digest().is_none_or(|d| d.crc32c == fin.crc32c));
        let mut extra = format!("ETag: {}\r\n", meta.etag);
        if let Some(c) = &fin.checksum {
            extra.push_str(&format!(
                "{}: {}\r\nx-amz-checksum-type: FULL_OBJECT\r\n",
                c.algorithm().header_name(),
                c.to_base64()
            ));
        }
        let go_on = self.s3_empty(h, 200, &extra);
        if go_on {
            // The replaced version is freed once the answer is out
            // (`on_sent`), and a spare made for the next upload.
            self.replaced = Some(linked);
            self.spare_wanted = true;
        }
        go_on
    }

    pub(super) fn s3_get_object(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        let sh = self.head;
        let part = match r.q("partNumber") {
            None => None,
            Some(_) if h.range.is_some() => {
                let e = err(
                    Code::InvalidRequest,
                    "Range and partNumber cannot both be given",
                );
                return self.s3_refuse(h, e);
            }
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=10_000).contains(&n) => Some(n),
                _ => {
                    let e = err(
                        Code::InvalidArgument,
                        "partNumber is a number from 1 to 10000",
                    );
                    return self.s3_refuse(h, e);
                }
            },
        };
        let mut ranged = None;
        match self.resolve(self.path.len()) {
            Ok(a) if a.kind == FileType::Regular => {
                if let Some(n) = part {
                    match self.s3_part_range(a.ino, n) {
                        Ok(range) => ranged = range,
                        Err(e) => return self.s3_refuse(h, e),
                    }
                }
            }
            Ok(a) if a.kind == FileType::Directory && r.target.dir_marker => {
                let tag = super::list::EMPTY_ETAG;
                let lm = super::super::response::http_date(a.mtime_ns.div_euclid(1_000_000_000));
                return self.s3_empty(
                    h,
                    200,
                    &format!(
                        "ETag: {tag}\r\nLast-Modified: {lm}\r\nContent-Type: application/x-directory\r\n"
                    ),
                );
            }
            Err(FsError::Access) => {
                let msg = self.walk_denied(self.path.len());
                return self.s3_refuse(h, err(Code::AccessDenied, msg));
            }
            Ok(_) | Err(FsError::NotFound) | Err(FsError::NotDir) => {
                return self.s3_refuse(
                    h,
                    err(
                        Code::NoSuchKey,
                        format!("no object {} in bucket {}", r.target.key, r.target.bucket),
                    ),
                )
            }
            Err(e) => return self.s3_refuse(h, fs_error(&e, &r.target.key)),
        }
        let overrides = match response_overrides(r) {
            Ok(o) => o,
            Err(e) => return self.s3_refuse(h, e),
        };
        let labels = ObjectLabels {
            checksum_mode: sh
                .header("x-amz-checksum-mode")
                .is_some_and(|v| v.eq_ignore_ascii_case("ENABLED")),
            overrides,
        };
        // The shared GET compares the conditions with the quoted S3 ETag
        // (`ObjectLabels`): tags sent without quotes, as S3 takes them,
        // are quoted for it.
        let got = match (quoted_for_get(&h.cond), ranged) {
            (None, None) => self.get_file(h, &labels),
            (c, range) => {
                let mut q = h.clone();
                if let Some(c) = c {
                    q.cond = c;
                }
                if range.is_some() {
                    q.range = range;
                }
                self.get_file(&q, &labels)
            }
        };
        match got {
            Got::Sent(go_on) => go_on,
            // It became a prefix of other keys since it was looked up.
            Got::Directory(_) => self.s3_refuse(
                h,
                err(
                    Code::NoSuchKey,
                    format!("no object {} in bucket {}", r.target.key, r.target.bucket),
                ),
            ),
        }
    }

    pub(super) fn s3_delete_object(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        if let Some(msg) = self.delete_denied() {
            return self.s3_refuse(h, err(Code::AccessDenied, msg));
        }
        let done = match (h.cond.if_match.is_some(), r.target.dir_marker) {
            (true, false) => self.s3_remove_if_match(h),
            // A directory marker has no ETag of its own to compare.
            (true, true) => Err(err(
                Code::NotImplemented,
                "If-Match on a key that ends in / (a directory) is not implemented by pktfs; nothing was done",
            )),
            (false, dir) => self.s3_remove(dir),
        };
        match done {
            Ok(()) => self.s3_empty(h, 204, ""),
            Err(e) => {
                self.s3_error(&e, h.keep_alive);
                h.keep_alive
            }
        }
    }

    /// DeleteObject with If-Match: the object removed only while it is
    /// exactly the state whose S3 ETag matched (`precond`).
    fn s3_remove_if_match(&mut self, h: &Head) -> Result<(), S3Error> {
        for _ in 0..RETRIES {
            let snap = self.s3_target_snap()?;
            check_delete(&h.cond, &snap)?;
            if matches!(snap, Snap::Absent) {
                return Ok(());
            }
            if self.s3_remove_guarded(false, Some(&snap))? {
                return Ok(());
            }
        }
        Err(err(
            Code::ConditionalRequestConflict,
            "the object kept changing while If-Match was checked; retry",
        ))
    }

    /// Remove the object at `self.path` (a missing one is no error, as
    /// in S3), then its parent directories that it leaves empty, up to
    /// the bucket. `dir`: the key names a directory (`dir/`), removed if
    /// empty.
    pub(super) fn s3_remove(&mut self, dir: bool) -> Result<(), S3Error> {
        self.s3_remove_guarded(dir, None).map(|_| ())
    }

    /// [`Self::s3_remove`]; with `snap`, only while the key leads to
    /// exactly that state: false when it no longer does (nothing
    /// removed).
    fn s3_remove_guarded(&mut self, dir: bool, snap: Option<&Snap>) -> Result<bool, S3Error> {
        let n = self.path.len();
        let parent = match self.resolve(n - 1) {
            Ok(p) if p.kind == FileType::Directory => p.ino,
            Ok(_) | Err(FsError::NotFound) | Err(FsError::NotDir) => return Ok(true),
            Err(e) => return Err(fs_error(&e, &self.path.display())),
        };
        let name = self.path.name().expect("a key").to_vec();
        let r = if dir {
            self.vol.rmdir(parent, &name).map(|_| 0)
        } else {
            // Only a file: a directory is a prefix, not an object.
            let file = |b: &Bound| {
                matches!(
                    b,
                    Bound::Present {
                        digest: Some(_),
                        ..
                    }
                ) && snap.is_none_or(|s| s.is(b))
            };
            self.vol.remove_if(parent, &name, Some(&file))
        };
        match r {
            Ok(ino) => {
                self.sh.notify(crate::config::Change::Removed {
                    parent,
                    name: &name,
                    ino,
                });
            }
            Err(FsError::PreconditionFailed) if snap.is_some() => return Ok(false),
            Err(FsError::NotFound | FsError::PreconditionFailed | FsError::NotEmpty) => {
                return Ok(true)
            }
            Err(e) => return Err(fs_error(&e, &self.path.display())),
        }
        // Directories only the key made: gone with it (the bucket stays).
        for k in (2..n).rev() {
            let Ok(p) = self.resolve(k - 1) else { break };
            let seg = self.path.segments().nth(k - 1).expect("k < n").to_vec();
            let Ok((ino, _)) = self.vol.lookup_kind(p.ino, &seg) else {
                break;
            };
            if self.vol.rmdir(p.ino, &seg).is_err() {
                break;
            }
            self.sh.notify(crate::config::Change::Removed {
                parent: p.ino,
                name: &seg,
                ino,
            });
        }
        Ok(true)
    }

    pub(super) fn s3_copy_object(&mut self, h: &Head, r: &S3Req) -> bool {
        match self.s3_copy(h, r) {
            Ok(go_on) => go_on,
            Err(e) => self.s3_refuse(h, e),
        }
    }

    fn s3_copy(&mut self, h: &Head, r: &S3Req) -> Result<bool, S3Error> {
        let sh = self.head;
        self.s3_bucket(&r.target.bucket)?;
        if h.has_body() && h.content_length != Some(0) {
            return Err(err(Code::InvalidRequest, "CopyObject takes no body"));
        }
        if r.target.dir_marker {
            return Err(err(Code::InvalidRequest, "a copy's key cannot end in /"));
        }
        // The destination's If-Match / If-None-Match, the source's
        // x-amz-copy-source-if-*: both against S3 ETags.
        let wc = WriteCond::of(h)?;
        let src = self.s3_copy_source(sh, r)?;
        check_copy_source(&copy_source_conditions(sh), &src.snap)?;
        let replace = match sh.header("x-amz-metadata-directive") {
            None | Some("COPY") => false,
            Some("REPLACE") => true,
            Some(v) => {
                return Err(err(
                    Code::InvalidArgument,
                    format!("x-amz-metadata-directive {v}"),
                ))
            }
        };
        let same = src.bucket == r.target.bucket && src.key == r.target.key;
        if same && !replace {
            return Err(err(
                Code::InvalidRequest,
                "this copy request is illegal because it is trying to copy an object to itself without changing the object's metadata",
            ));
        }
        if let Some(msg) = self.put_denied() {
            return Err(err(Code::AccessDenied, msg));
        }
        let Snap::File {
            digest: sd,
            etag: tag,
            meta: smeta,
            ..
        } = &src.snap
        else {
            return Err(err(Code::NoSuchKey, "the copy source is not an object"));
        };
        let sd = *sd;
        let mut meta = match (replace, smeta) {
            (true, _) => ObjectMeta::from_request(sh).map_err(|m| err(Code::InvalidArgument, m))?,
            (false, Some(m)) => (**m).clone(),
            (false, None) => ObjectMeta::default(),
        };
        // The copy's checksum: what the source has, or, asked for, a
        // CRC32C (its records') or the source's own in that algorithm;
        // any other would need the bytes read, which a copy does not do.
        if let Some(v) = sh.header("x-amz-checksum-algorithm") {
            let a = Algorithm::from_name(v).ok_or_else(|| {
                err(
                    Code::InvalidRequest,
                    format!("x-amz-checksum-algorithm {v}"),
                )
            })?;
            let stored = smeta
                .as_ref()
                .and_then(|m| m.checksum.clone().map(|c| (c, m.checksum_type.clone())))
                .filter(|((n, _), _)| n == a.header_name());
            match (a, stored) {
                (_, Some((c, ty))) => {
                    meta.checksum = Some(c);
                    meta.checksum_type = ty;
                }
                (Algorithm::Crc32c, None) => {
                    meta.set_checksum(&Value::Crc32c(sd.crc32c));
                    meta.checksum_type = Some("FULL_OBJECT".into());
                }
                (a, None) => {
                    return Err(err(
                        Code::NotImplemented,
                        format!(
                            "CopyObject with x-amz-checksum-algorithm {} of a source stored without one (pktfs copies no bytes to compute it)",
                            a.name()
                        ),
                    ))
                }
            }
        }
        let mut tmp = self
            .vol
            .tmpfile(0o644, self.sh.uid, self.sh.gid)
            .map_err(|e| fs_error(&e, "a file for the copy"))?;
        // The copy's records name the source's buffer space (shared,
        // counted): no byte is copied.
        self.s3_copy_records(&src, 0, sd.size, tmp.ino())?;
        let d = self
            .vol
            .content_digest(tmp.ino())
            .map_err(|e| fs_error(&e, &src.key))?;
        if d.size != sd.size || d.crc32c != sd.crc32c {
            return Err(err(
                Code::SlowDown,
                "the source changed during the copy; try again",
            ));
        }
        meta.etag = tag.clone();
        meta.size = d.size;
        meta.crc32c = d.crc32c;
        meta.store(self.vol, tmp.ino())
            .map_err(|e| fs_error(&e, "storing the copy's metadata"))?;
        let linked = self.s3_link(&mut tmp, Vec::new(), wc.as_ref(), false)?;
        let now = crate::util::now_ns() as i64;
        let sums: Vec<(Algorithm, String)> = meta
            .checksum
            .iter()
            .filter_map(|(n, v)| Algorithm::from_header_name(n).map(|a| (a, v.clone())))
            .collect();
        let xml = pktfs_s3::xml::copy_object(&meta.etag, now, &sums);
        let go_on = self.s3_xml(h, 200, "", &xml);
        if go_on {
            // The replaced version is freed once the answer is out.
            self.replaced = Some(linked);
        }
        Ok(go_on)
    }

    /// A request whose XML body is acted on once it is in (received into
    /// an unnamed file, read back, dropped).
    pub(super) fn s3_xml_body(&mut self, h: &Head, r: S3Req, op: XmlOp) -> Next<'a, Box<S3Body>> {
        let Some(framing) = h.framing() else {
            return match op {
                XmlOp::CreateBucket => Next::answered(h, self.s3_create_bucket_now(h, &r)),
                _ => self.refused(
                    h,
                    err(Code::MissingContentLength, "this request needs a body"),
                ),
            };
        };
        let sh = self.head;
        let decoded = sh.data_len(h);
        if decoded == Some(0) && op == XmlOp::CreateBucket {
            return Next::answered(h, self.s3_create_bucket_now(h, &r));
        }
        if let Err(e) = self.s3_room(decoded, MAX_XML_BYTES) {
            return self.refused(h, e);
        }
        // What can be refused before the body is.
        let early = match op {
            XmlOp::DeleteObjects => self.s3_bucket(&r.target.bucket).map(|_| ()),
            XmlOp::Complete => self
                .s3_upload_exists(&r)
                .or_else(|e| self.s3_upload_completed(&r).then_some(()).ok_or(e))
                .and_then(|()| WriteCond::of(h).map(|_| ())),
            XmlOp::CreateBucket => Ok(()),
            XmlOp::PutCors => self.s3_bucket(&r.target.bucket).map(|_| ()),
        };
        if let Err(e) = early {
            return self.refused(h, e);
        }
        let mut body = match S3Body::new(h, sh, &r.verified, BodyKind::Xml(op)) {
            Ok(b) => b,
            Err(e) => return self.refused(h, e),
        };
        body.req = Some(Box::new(r));
        self.s3_receive(h, framing, body)
    }

    /// An XML body is in: read back (it is at most `MAX_XML_BYTES`) and
    /// acted on.
    fn s3_xml_done(
        &mut self,
        h: &Head,
        tmp: TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
        fin: Finished,
        op: XmlOp,
        r: S3Req,
    ) -> bool {
        let keep = h.keep_alive;
        let xml = tmp
            .commit(tail)
            .and_then(|_| self.vol.read(tmp.ino(), 0, fin.size.min(MAX_XML_BYTES)));
        drop(tmp);
        let xml = match xml {
            Ok(x) => x,
            Err(e) => {
                self.s3_error(&fs_error(&e, "reading the request body"), keep);
                return keep;
            }
        };
        match op {
            XmlOp::DeleteObjects => self.s3_delete_objects(h, &r, &xml),
            XmlOp::Complete => self.s3_complete(h, &r, &xml),
            XmlOp::PutCors => self.s3_put_cors_now(h, &r, &xml),
            XmlOp::CreateBucket => match pktfs_s3::xml::parse_create_bucket(&xml) {
                Ok(_) => {
                    if let Err(e) = super::unserved::create_bucket_body(&xml) {
                        self.s3_error(&e, keep);
                        return keep;
                    }
                    self.s3_create_bucket_now(h, &r)
                }
                Err(e) => {
                    self.s3_error(&err(Code::MalformedXML, e.to_string()), keep);
                    keep
                }
            },
        }
    }

    /// DeleteObjects: each key removed as DeleteObject would (the bucket's
    /// write grant was checked), the outcome of each answered.
    fn s3_delete_objects(&mut self, h: &Head, r: &S3Req, xml: &[u8]) -> bool {
        let keep = h.keep_alive;
        let req = match pktfs_s3::xml::parse_delete(xml) {
            Ok(d) => d,
            Err(e) => {
                self.s3_error(&err(Code::MalformedXML, e.to_string()), keep);
                return keep;
            }
        };
        // Versions and per-key conditions are not done: nothing is
        // deleted rather than every key whatever they said.
        if let Err(e) = super::unserved::delete_objects_body(xml) {
            self.s3_error(&e, keep);
            return keep;
        }
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        let saved = self.path.clone();
        for key in req.keys {
            let target = format!("/{}/{}", r.target.bucket, key);
            let outcome = match pktfs_s3::names::key_path(&key) {
                Err(e) => Err(err(Code::InvalidArgument, e.to_string())),
                Ok(kp) => {
                    let mut p = crate::path::ReqPath::new();
                    let enc = {
                        let mut s = String::new();
                        pktfs_s3::names::uri_encode(&target, false, &mut s);
                        s
                    };
                    match p.parse(&enc) {
                        Err(m) => Err(err(Code::InvalidArgument, m)),
                        Ok(()) => {
                            self.path = p;
                            match self.delete_denied() {
                                Some(m) => Err(err(Code::AccessDenied, m)),
                                None => self.s3_remove(kp.dir_marker),
                            }
                        }
                    }
                }
            };
            match outcome {
                Ok(()) => deleted.push(key),
                Err(e) => errors.push((key, e.code, e.message)),
            }
        }
        self.path = saved;
        let xml = pktfs_s3::xml::delete_result(&deleted, &errors, req.quiet);
        self.s3_xml(h, 200, "", &xml)
    }
}
