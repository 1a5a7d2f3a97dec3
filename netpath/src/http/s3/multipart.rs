//! Multipart uploads: each part an unnamed file that received its body
//! as any PutObject's; CompleteMultipartUpload makes a new unnamed file
//! whose records name the parts' buffer space (shared, counted: no byte
//! is copied), stores the object's metadata and names it in one commit.
//! The parts are freed when the upload ends.
//!
//! The table is this server's memory (module docs of `super`): at most
//! [`MAX_UPLOADS`] uploads, 10,000 parts each; an upload with no activity
//! for [`IDLE_NS`] is aborted when the next one is created.

use std::collections::BTreeMap;
use std::sync::Mutex;

use pktfs_fs::{OwnedTmpFile, RxPiece, TmpFile};
use pktfs_s3::checksum::{etag, multipart_etag, Algorithm, Value};
use pktfs_s3::error::{Code, S3Error};

use super::super::conn::Next;
use super::super::head::Head;
use super::body::{BodyKind, Finished, S3Body, ALGORITHMS};
use super::meta::ObjectMeta;
use super::precond::WriteCond;
use super::Ctx;
use super::{fs_error, S3Req};

/// Uploads in progress at once (each holds its parts' space).
pub(crate) const MAX_UPLOADS: usize = 1000;
/// Part numbers, as S3: 1 to 10,000.
const MAX_PART: u32 = 10_000;
/// Every part but the last must be at least this, as S3 requires.
const MIN_PART_BYTES: u64 = 5 << 20;
/// The most one part may be, as S3 allows.
pub(super) const MAX_PART_BYTES: u64 = 5 << 30;
/// An upload untouched this long is aborted (its parts freed).
const IDLE_NS: i64 = 24 * 3600 * 1_000_000_000;

/// A part of an upload, uploaded or copied (UploadPartCopy): the two are
/// kept alike, so ListParts and Complete cannot tell them apart.
pub(super) struct Part {
    /// An unnamed file holding the part's bytes (received, or records
    /// sharing another object's buffers).
    pub file: OwnedTmpFile,
    pub size: u64,
    /// The MD5 of the part's bytes: its ETag.
    pub md5: [u8; 16],
    /// The part's checksum in the upload's algorithm, when it has one.
    pub checksum: Option<Value>,
    pub at_ns: i64,
}

struct Upload {
    bucket: String,
    key: String,
    initiated_ns: i64,
    touched_ns: i64,
    meta: ObjectMeta,
    algorithm: Option<Algorithm>,
    full_object: bool,
    parts: BTreeMap<u32, Part>,
}

/// The uploads in progress, by id, and the last ones completed.
#[derive(Default)]
pub(crate) struct Uploads {
    m: Mutex<BTreeMap<String, Upload>>,
    done: Mutex<std::collections::VecDeque<Completed>>,
}

/// How many completed uploads are remembered, so that a client that
/// retries a CompleteMultipartUpload whose answer it lost gets the same
/// answer, as S3 gives it, instead of NoSuchUpload for an object that was
/// made (each entry is its id, names and answer: well under 2 KiB).
const COMPLETED_KEPT: usize = 256;

/// A completed upload's id, target and answer.
struct Completed {
    id: String,
    bucket: String,
    key: String,
    xml: String,
}

impl Uploads {
    /// The answer a completed upload `id` into `bucket`/`key` was given.
    fn completed(&self, id: &str, bucket: &str, key: &str) -> Option<String> {
        let g = self.done.lock().unwrap_or_else(|p| p.into_inner());
        g.iter()
            .find(|c| c.id == id && c.bucket == bucket && c.key == key)
            .map(|c| c.xml.clone())
    }

    fn remember(&self, c: Completed) {
        let mut g = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if g.len() == COMPLETED_KEPT {
            g.pop_front();
        }
        g.push_back(c);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Upload>> {
        self.m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Abort every upload into `bucket` (it is being deleted).
    pub fn abort_bucket(&self, bucket: &str) {
        let gone: Vec<Upload> = {
            let mut g = self.lock();
            let ids: Vec<String> = g
                .iter()
                .filter(|(_, u)| u.bucket == bucket)
                .map(|(k, _)| k.clone())
                .collect();
            ids.iter().filter_map(|k| g.remove(k)).collect()
        };
        // Parts are freed here, outside the lock.
        drop(gone);
    }
}

pub(super) fn now_ns() -> i64 {
    crate::util::now_ns() as i64
}

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

fn no_upload(id: &str) -> S3Error {
    err(
        Code::NoSuchUpload,
        format!("no multipart upload {id} (completed, aborted, or this server restarted since)"),
    )
}

/// 128 random bits, hex: an upload id nobody can guess.
fn new_id() -> Result<String, S3Error> {
    let mut b = [0u8; 16];
    let mut got = 0;
    while got < b.len() {
        match rustix::rand::getrandom(&mut b[got..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(err(
                    Code::InternalError,
                    format!("no random bytes for an upload id: {e}"),
                ))
            }
        }
    }
    Ok(hex::encode(b))
}

/// An ETag as compared: without quotes.
fn bare(tag: &str) -> &str {
    tag.trim().trim_matches('"')
}

impl<'a> Ctx<'_, 'a> {
    fn upload_id<'r>(&self, r: &'r S3Req) -> &'r str {
        r.q("uploadId").unwrap_or_default()
    }

    /// The upload the request names was completed lately (a retried
    /// Complete is answered as the first was).
    pub(super) fn s3_upload_completed(&self, r: &S3Req) -> bool {
        let id = self.upload_id(r);
        self.st
            .uploads
            .completed(id, &r.target.bucket, &r.target.key)
            .is_some()
    }

    /// The upload the request names exists, for its bucket and key.
    pub(super) fn s3_upload_exists(&self, r: &S3Req) -> Result<(), S3Error> {
        let id = self.upload_id(r);
        let g = self.st.uploads.lock();
        match g.get(id) {
            Some(u) if u.bucket == r.target.bucket && u.key == r.target.key => Ok(()),
            _ => Err(no_upload(id)),
        }
    }

    pub(super) fn s3_create_upload(&mut self, h: &Head, r: &S3Req) -> bool {
        match self.s3_create(h, r) {
            Ok(go_on) => go_on,
            Err(e) => self.s3_refuse(h, e),
        }
    }

    fn s3_create(&mut self, h: &Head, r: &S3Req) -> Result<bool, S3Error> {
        self.s3_bucket(&r.target.bucket)?;
        if r.target.dir_marker {
            return Err(err(
                Code::InvalidRequest,
                "a multipart upload's key cannot end in /",
            ));
        }
        if let Some(msg) = self.put_denied() {
            return Err(err(Code::AccessDenied, msg));
        }
        let sh = self.head;
        let meta = ObjectMeta::from_request(sh).map_err(|m| err(Code::InvalidArgument, m))?;
        let algorithm = match sh.header("x-amz-checksum-algorithm") {
            None => None,
            Some(v) => Some(Algorithm::from_name(v).ok_or_else(|| {
                err(
                    Code::InvalidRequest,
                    format!("x-amz-checksum-algorithm {v}"),
                )
            })?),
        };
        let full_object = match sh.header("x-amz-checksum-type") {
            None | Some("COMPOSITE") => false,
            Some("FULL_OBJECT") => {
                if matches!(algorithm, Some(Algorithm::Sha1 | Algorithm::Sha256)) {
                    return Err(err(
                        Code::InvalidRequest,
                        "FULL_OBJECT checksums are CRCs (CRC32, CRC32C, CRC64NVME)",
                    ));
                }
                true
            }
            Some(v) => {
                return Err(err(
                    Code::InvalidRequest,
                    format!("x-amz-checksum-type {v}"),
                ))
            }
        };
        let id = new_id()?;
        let now = now_ns();
        let expired: Vec<Upload> = {
            let mut g = self.st.uploads.lock();
            let old: Vec<String> = g
                .iter()
                .filter(|(_, u)| now - u.touched_ns > IDLE_NS)
                .map(|(k, _)| k.clone())
                .collect();
            let expired = old.iter().filter_map(|k| g.remove(k)).collect();
            if g.len() >= MAX_UPLOADS {
                drop(g);
                return Err(err(
                    Code::SlowDown,
                    format!(
                        "{MAX_UPLOADS} multipart uploads are in progress: complete or abort some"
                    ),
                ));
            }
            g.insert(
                id.clone(),
                Upload {
                    bucket: r.target.bucket.clone(),
                    key: r.target.key.clone(),
                    initiated_ns: now,
                    touched_ns: now,
                    meta,
                    algorithm,
                    full_object,
                    parts: BTreeMap::new(),
                },
            );
            expired
        };
        drop(expired);
        let xml = pktfs_s3::xml::initiate_multipart(&r.target.bucket, &r.target.key, &id);
        let mut extra = String::new();
        if let Some(a) = algorithm {
            extra.push_str(&format!(
                "x-amz-checksum-algorithm: {}\r\nx-amz-checksum-type: {}\r\n",
                a.xml_name().trim_start_matches("Checksum"),
                if full_object {
                    "FULL_OBJECT"
                } else {
                    "COMPOSITE"
                }
            ));
        }
        Ok(self.s3_xml(h, 200, &extra, &xml))
    }

    /// The request's part number (1 to 10,000).
    pub(super) fn s3_part_number(r: &S3Req) -> Result<u32, S3Error> {
        match r.q("partNumber").map(str::parse::<u32>) {
            Some(Ok(n)) if (1..=MAX_PART).contains(&n) => Ok(n),
            _ => Err(err(Code::InvalidArgument, "partNumber must be 1 to 10000")),
        }
    }

    /// The checksum algorithm of the upload the request names (which
    /// exists, for its bucket and key).
    pub(super) fn s3_upload_algorithm(&self, r: &S3Req) -> Result<Option<Algorithm>, S3Error> {
        let id = self.upload_id(r);
        let g = self.st.uploads.lock();
        match g.get(id) {
            Some(u) if u.bucket == r.target.bucket && u.key == r.target.key => Ok(u.algorithm),
            _ => Err(no_upload(id)),
        }
    }

    /// Keep `part` as part `number` of upload `id` (replacing a part of
    /// that number, freed here), unless the upload ended meanwhile.
    pub(super) fn s3_keep_part(&self, id: &str, number: u32, part: Part) -> Result<(), S3Error> {
        let replaced = {
            let mut g = self.st.uploads.lock();
            match g.get_mut(id) {
                Some(u) => {
                    u.touched_ns = now_ns();
                    Ok(u.parts.insert(number, part))
                }
                None => Err(part),
            }
        };
        // Freed outside the lock.
        match replaced {
            Ok(old) => {
                drop(old);
                Ok(())
            }
            Err(part) => {
                drop(part);
                Err(no_upload(id))
            }
        }
    }

    pub(super) fn s3_upload_part(&mut self, h: &Head, r: S3Req) -> Next<'a, Box<S3Body>> {
        let number = match Self::s3_part_number(&r) {
            Ok(n) => n,
            Err(e) => return self.refused(h, e),
        };
        if let Err(e) = self.s3_upload_exists(&r) {
            return self.refused(h, e);
        }
        let Some(framing) = h.framing() else {
            return self.refused(
                h,
                err(
                    Code::MissingContentLength,
                    "UploadPart needs a Content-Length",
                ),
            );
        };
        let sh = self.head;
        let decoded = sh.data_len(h);
        if let Err(e) = self.s3_room(decoded, MAX_PART_BYTES) {
            return self.refused(h, e);
        }
        let kind = BodyKind::Part {
            upload_id: self.upload_id(&r).to_string(),
            number,
        };
        let body = match S3Body::new(h, sh, &r.verified, kind) {
            Ok(b) => b,
            Err(e) => return self.refused(h, e),
        };
        self.s3_receive(h, framing, body)
    }

    /// A part's body is in and checked: kept (replacing a part of that
    /// number) until the upload completes or is aborted.
    pub(super) fn s3_part_done(
        &mut self,
        h: &Head,
        tmp: TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
        fin: Finished,
        id: &str,
        number: u32,
    ) -> bool {
        let keep = h.keep_alive;
        if let Err(e) = tmp.commit(tail) {
            drop(tmp);
            self.s3_error(&fs_error(&e, "storing the part"), keep);
            return keep;
        }
        let md5 = fin.md5.expect("a part's MD5 is computed");
        let part = Part {
            file: tmp.into_owned(&self.sh.vol),
            size: fin.size,
            md5,
            checksum: fin.checksum,
            at_ns: now_ns(),
        };
        if let Err(e) = self.s3_keep_part(id, number, part) {
            self.s3_error(&e, keep);
            return keep;
        }
        let mut extra = format!("ETag: {}\r\n", etag(&md5));
        if let Some(c) = &fin.checksum {
            extra.push_str(&format!(
                "{}: {}\r\n",
                c.algorithm().header_name(),
                c.to_base64()
            ));
        }
        self.s3_empty(h, 200, &extra)
    }

    /// CompleteMultipartUpload, its part list in: the object made from
    /// the parts' records and named; the upload ends.
    pub(super) fn s3_complete(&mut self, h: &Head, r: &S3Req, xml: &[u8]) -> bool {
        let keep = h.keep_alive;
        let id = self.upload_id(r).to_string();
        let list = match pktfs_s3::xml::parse_complete(xml) {
            Ok(l) => l,
            Err(e) => {
                self.s3_error(&err(Code::MalformedXML, e.to_string()), keep);
                return keep;
            }
        };
        // Taken out of the table: a concurrent part or completion of the
        // same upload finds none. Put back if this one fails.
        let upload = {
            let mut g = self.st.uploads.lock();
            match g.remove(&id) {
                Some(u) if u.bucket == r.target.bucket && u.key == r.target.key => Some(u),
                Some(u) => {
                    g.insert(id.clone(), u);
                    None
                }
                None => None,
            }
        };
        let Some(upload) = upload else {
            // A retry of a completion that succeeded gets its answer again.
            let done = self
                .st
                .uploads
                .completed(&id, &r.target.bucket, &r.target.key);
            if let Some(xml) = done {
                return self.s3_xml(h, 200, "", &xml);
            }
            self.s3_error(&no_upload(&id), keep);
            return keep;
        };
        match self.s3_assemble(h, &upload, &list) {
            Ok((meta, linked)) => {
                drop(upload); // the parts' own files are freed
                let location = format!("/{}/{}", r.target.bucket, r.target.key);
                let mut sums = Vec::new();
                if let Some((n, v)) = &meta.checksum {
                    if let Some(a) = Algorithm::from_header_name(n) {
                        sums.push((a, v.clone()));
                    }
                }
                let xml = pktfs_s3::xml::complete_multipart(
                    &location,
                    &r.target.bucket,
                    &r.target.key,
                    &meta.etag,
                    &sums,
                    meta.checksum_type.as_deref(),
                );
                self.st.uploads.remember(Completed {
                    id,
                    bucket: r.target.bucket.clone(),
                    key: r.target.key.clone(),
                    xml: xml.clone(),
                });
                let go_on = self.s3_xml(h, 200, "", &xml);
                if go_on {
                    self.replaced = Some(linked);
                }
                go_on
            }
            Err(e) => {
                let mut g = self.st.uploads.lock();
                g.insert(id, upload);
                drop(g);
                self.s3_error(&e, keep);
                keep
            }
        }
    }

    /// The object of `list`'s parts, named.
    fn s3_assemble(
        &mut self,
        h: &Head,
        u: &Upload,
        list: &[pktfs_s3::xml::CompletePart],
    ) -> Result<(ObjectMeta, pktfs_fs::Linked<'a>), S3Error> {
        if list.is_empty() {
            return Err(err(Code::MalformedXML, "the part list is empty"));
        }
        let mut chosen: Vec<&Part> = Vec::with_capacity(list.len());
        let mut prev = 0;
        for (k, p) in list.iter().enumerate() {
            if p.number <= prev {
                return Err(err(
                    Code::InvalidPartOrder,
                    "the parts must be listed in ascending order, each once",
                ));
            }
            prev = p.number;
            let part = u.parts.get(&p.number).ok_or_else(|| {
                err(
                    Code::InvalidPart,
                    format!("part {} was not uploaded", p.number),
                )
            })?;
            if bare(&p.etag) != bare(&etag(&part.md5)) {
                return Err(err(
                    Code::InvalidPart,
                    format!("part {}: the ETag is not the part's", p.number),
                ));
            }
            // A checksum listed for a part must be the part's own.
            for (alg, v) in &p.checksums {
                let same = part
                    .checksum
                    .is_some_and(|c| c.algorithm() == *alg && c.to_base64() == v.trim());
                if !same {
                    return Err(err(
                        Code::InvalidPart,
                        format!(
                            "part {}: the {} listed is not the part's",
                            p.number,
                            alg.xml_name()
                        ),
                    ));
                }
            }
            if k + 1 < list.len() && part.size < MIN_PART_BYTES {
                return Err(err(
                    Code::EntityTooSmall,
                    format!(
                        "part {} is {} bytes: every part but the last must be at least 5 MiB",
                        p.number, part.size
                    ),
                ));
            }
            chosen.push(part);
        }
        let mut tmp = self
            .vol
            .tmpfile(0o644, self.sh.uid, self.sh.gid)
            .map_err(|e| fs_error(&e, "a file for the object"))?;
        // Each part's records, named again at the object's offsets: the
        // buffers are shared (counted), not copied.
        let mut off = 0u64;
        for p in &chosen {
            let mut at = 0;
            while at < p.size {
                match self
                    .vol
                    .copy_range(p.file.ino(), at, tmp.ino(), off + at, p.size - at)
                {
                    Ok(0) => return Err(err(Code::InternalError, "a part ended early")),
                    Ok(n) => at += n,
                    Err(e) => return Err(fs_error(&e, "linking a part")),
                }
            }
            off += p.size;
        }
        let d = self
            .vol
            .content_digest(tmp.ino())
            .map_err(|e| fs_error(&e, "the object"))?;
        let mut meta = u.meta.clone();
        let md5s: Vec<[u8; 16]> = chosen.iter().map(|p| p.md5).collect();
        meta.etag = multipart_etag(&md5s);
        meta.size = d.size;
        meta.crc32c = d.crc32c;
        meta.parts = Some(chosen.len() as u32);
        meta.part_sizes = pktfs_s3::part_sizes::PartSizes::of(chosen.iter().map(|p| p.size));
        let sums: Option<Vec<Value>> = chosen.iter().map(|p| p.checksum).collect();
        if let (Some(_), Some(sums)) = (u.algorithm, sums) {
            if u.full_object {
                let with_len: Vec<(Value, u64)> = sums
                    .into_iter()
                    .zip(chosen.iter().map(|p| p.size))
                    .collect();
                let v = pktfs_s3::checksum::combine_full(&with_len)
                    .map_err(|e| err(Code::InvalidRequest, e.to_string()))?;
                meta.set_checksum(&v);
                meta.checksum_type = Some("FULL_OBJECT".into());
            } else {
                let c = pktfs_s3::checksum::composite(&sums)
                    .map_err(|e| err(Code::InvalidRequest, e.to_string()))?;
                let name = sums[0].algorithm().header_name().to_string();
                meta.checksum = Some((name, c));
                meta.checksum_type = Some("COMPOSITE".into());
            }
        }
        self.s3_complete_sums(&meta)?;
        meta.store(self.vol, tmp.ino())
            .map_err(|e| fs_error(&e, "storing the object's metadata"))?;
        // If-Match / If-None-Match: * against the object's S3 ETag.
        let wc = WriteCond::of(h)?;
        let linked = self.s3_link(&mut tmp, Vec::new(), wc.as_ref(), false)?;
        Ok((meta, linked))
    }

    /// What CompleteMultipartUpload's head says the object must be: its
    /// checksum (`x-amz-checksum-*`, compared with the one assembled; a
    /// COMPOSITE value with or without its `-N`), the checksum's type,
    /// and its size (`x-amz-mp-object-size`). Checked before it is named.
    fn s3_complete_sums(&self, meta: &ObjectMeta) -> Result<(), S3Error> {
        let sh = self.head;
        let strip = |v: &str| v.trim().split('-').next().unwrap_or("").to_string();
        for alg in ALGORITHMS {
            let Some(v) = sh.header(alg.header_name()) else {
                continue;
            };
            match &meta.checksum {
                Some((n, have)) if n == alg.header_name() => {
                    if strip(have) != strip(v) {
                        return Err(err(
                            Code::BadDigest,
                            format!("{}: {v} is not the object's ({have})", alg.header_name()),
                        ));
                    }
                }
                _ => {
                    return Err(err(
                        Code::InvalidRequest,
                        format!(
                            "{} given, but the upload's parts carry no {} checksum",
                            alg.header_name(),
                            alg.name()
                        ),
                    ))
                }
            }
        }
        if let Some(t) = sh.header("x-amz-checksum-type") {
            if meta.checksum_type.as_deref() != Some(t) {
                return Err(err(
                    Code::InvalidRequest,
                    format!(
                        "x-amz-checksum-type {t}, but the object's checksum is {}",
                        meta.checksum_type.as_deref().unwrap_or("none")
                    ),
                ));
            }
        }
        if let Some(v) = sh.header("x-amz-mp-object-size") {
            let want: u64 = v.parse().map_err(|_| {
                err(
                    Code::InvalidArgument,
                    format!("x-amz-mp-object-size {v} is not a size"),
                )
            })?;
            if want != meta.size {
                return Err(err(
                    Code::InvalidRequest,
                    format!(
                        "x-amz-mp-object-size is {want}, the parts make {} bytes",
                        meta.size
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(super) fn s3_abort_upload(&mut self, h: &Head, r: &S3Req) -> bool {
        let id = self.upload_id(r);
        let gone = {
            let mut g = self.st.uploads.lock();
            match g.get(id) {
                Some(u) if u.bucket == r.target.bucket && u.key == r.target.key => g.remove(id),
                _ => None,
            }
        };
        match gone {
            Some(u) => {
                drop(u);
                self.s3_empty(h, 204, "")
            }
            None => {
                self.s3_error(&no_upload(id), h.keep_alive);
                h.keep_alive
            }
        }
    }

    pub(super) fn s3_list_parts(&mut self, h: &Head, r: &S3Req) -> bool {
        let id = self.upload_id(r);
        let marker: u32 = r
            .q("part-number-marker")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let max: u32 = r
            .q("max-parts")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000)
            .min(1000);
        let listed = {
            let g = self.st.uploads.lock();
            match g.get(id) {
                Some(u) if u.bucket == r.target.bucket && u.key == r.target.key => {
                    let mut parts = Vec::new();
                    let mut truncated = false;
                    for (n, p) in u.parts.range(marker + 1..) {
                        if parts.len() as u32 >= max {
                            truncated = true;
                            break;
                        }
                        parts.push(pktfs_s3::xml::Part {
                            number: *n,
                            etag: etag(&p.md5),
                            size: p.size,
                            last_modified_unix_ns: p.at_ns,
                            checksums: p
                                .checksum
                                .iter()
                                .map(|c| (c.algorithm(), c.to_base64()))
                                .collect(),
                        });
                    }
                    Some((parts, truncated))
                }
                _ => None,
            }
        };
        let Some((parts, truncated)) = listed else {
            self.s3_error(&no_upload(id), h.keep_alive);
            return h.keep_alive;
        };
        let next = truncated.then(|| parts.last().map_or(marker, |p| p.number));
        let xml = pktfs_s3::xml::list_parts(
            &r.target.bucket,
            &r.target.key,
            id,
            marker,
            next,
            max,
            truncated,
            &parts,
        );
        self.s3_xml(h, 200, "", &xml)
    }

    pub(super) fn s3_list_uploads(&mut self, h: &Head, r: &S3Req) -> bool {
        if let Err(e) = self.s3_bucket(&r.target.bucket) {
            return self.s3_refuse(h, e);
        }
        let prefix = r.q("prefix").unwrap_or("");
        let delimiter = r.q("delimiter").filter(|d| !d.is_empty());
        let key_marker = r.q("key-marker").unwrap_or("");
        let id_marker = r.q("upload-id-marker").unwrap_or("");
        let max: u32 = r
            .q("max-uploads")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000)
            .min(1000);
        let mut all: Vec<(String, String, i64)> = {
            let g = self.st.uploads.lock();
            g.iter()
                .filter(|(_, u)| u.bucket == r.target.bucket && u.key.starts_with(prefix))
                .map(|(id, u)| (u.key.clone(), id.clone(), u.initiated_ns))
                .collect()
        };
        all.sort();
        let mut uploads = Vec::new();
        let mut prefixes: Vec<String> = Vec::new();
        let mut truncated = false;
        for (key, id, at) in all {
            let after = key.as_str() > key_marker
                || (key == key_marker && !id_marker.is_empty() && id.as_str() > id_marker);
            if !after {
                continue;
            }
            if (uploads.len() + prefixes.len()) as u32 >= max {
                truncated = true;
                break;
            }
            if let Some(d) = delimiter {
                if let Some(i) = key[prefix.len()..].find(d) {
                    let cp = key[..prefix.len() + i + d.len()].to_string();
                    if prefixes.last() != Some(&cp) {
                        prefixes.push(cp);
                    }
                    continue;
                }
            }
            uploads.push(pktfs_s3::xml::Upload {
                key,
                upload_id: id,
                initiated_unix_ns: at,
            });
        }
        let (nk, ni) = match (truncated, uploads.last()) {
            (true, Some(u)) => (Some(u.key.clone()), Some(u.upload_id.clone())),
            _ => (None, None),
        };
        let xml = pktfs_s3::xml::list_multipart_uploads(
            &r.target.bucket,
            prefix,
            key_marker,
            id_marker,
            nk.as_deref(),
            ni.as_deref(),
            max,
            truncated,
            &uploads,
            delimiter,
            &prefixes,
        );
        self.s3_xml(h, 200, "", &xml)
    }
}
