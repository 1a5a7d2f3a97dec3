//! What CopyObject and UploadPartCopy share (the source: named by
//! `x-amz-copy-source`, granted, found, readable, its state read once for
//! its conditions; records copied from it that name its buffers, no byte
//! copied), and UploadPartCopy itself.
//!
//! # UploadPartCopy
//! A part copied from a range of another object is a part like an
//! uploaded one: an unnamed file whose records share the source's buffer
//! space, its size, the MD5 of its bytes (its ETag) and, when the upload
//! declared a checksum algorithm, its checksum in that algorithm. The
//! MD5 cannot come from the records (they carry CRC32Cs), so the part's
//! bytes are read once, from the part itself (each record checked
//! against its CRC32C as it is read), for the MD5 and a checksum other
//! than CRC32C in the same pass; a CRC32C is the records' CRCs combined.
//! ListParts and CompleteMultipartUpload then cannot tell it from an
//! uploaded part.

use pktfs_fs::{FileType, FsError, Seg};
use pktfs_s3::checksum::{etag, Algorithm, BodyHasher, Value, Wanted};
use pktfs_s3::error::{Code, S3Error};

use super::super::head::Head;
use super::multipart::{now_ns, Part, MAX_PART_BYTES};
use super::precond::{check_copy_source, copy_source_conditions, Snap};
use super::Ctx;
use super::{fs_error, S3Head, S3Req};

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

/// The bytes read at once for a copied part's digests (under the part's
/// own read lock, which nothing else takes).
const HASH_WINDOW: u64 = 8 << 20;

/// A copy's source, found and read.
#[derive(Debug)]
pub(super) struct Source {
    pub bucket: String,
    pub key: String,
    /// Its state when it was read (a regular file).
    pub snap: Snap,
}

impl Source {
    pub fn digest(&self) -> &pktfs_fs::ContentDigest {
        match &self.snap {
            Snap::File { digest, .. } => digest,
            _ => unreachable!("a copy source is a regular file"),
        }
    }
}

const RANGE_FORM: &str = "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy";

/// `x-amz-copy-source-range` as S3 reads it: (offset, length) of the
/// source's bytes. Absent: the whole source. A value not of the form
/// `bytes=first-last` (both offsets, first not after last) is
/// InvalidArgument; a range that does not lie within the source is
/// InvalidRange (416), as S3 answers them.
pub(super) fn copy_source_range(v: Option<&str>, size: u64) -> Result<(u64, u64), S3Error> {
    let Some(v) = v else {
        return Ok((0, size));
    };
    let num = |t: &str| {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse::<u64>().ok())
            .flatten()
    };
    let form = || err(Code::InvalidArgument, format!("{RANGE_FORM} (was {v})"));
    let (first, last) = v
        .strip_prefix("bytes=")
        .and_then(|r| r.split_once('-'))
        .ok_or_else(form)?;
    let (first, last) = match (num(first), num(last)) {
        (Some(f), Some(l)) if f <= l => (f, l),
        _ => return Err(form()),
    };
    if last >= size {
        return Err(err(
            Code::InvalidRange,
            format!("Range specified is not valid for source object of size: {size}"),
        ));
    }
    Ok((first, last - first + 1))
}

impl<'a> Ctx<'_, 'a> {
    /// The copy's source (`x-amz-copy-source`, percent-encoded,
    /// `BUCKET/KEY` with an optional leading `/` and `?versionId=null`):
    /// the key's read grant on its bucket, the file's read permission,
    /// and its state read once.
    pub(super) fn s3_copy_source(&self, sh: &S3Head, r: &S3Req) -> Result<Source, S3Error> {
        let raw = sh.header("x-amz-copy-source").unwrap_or_default();
        let (src, version) = raw.split_once('?').unwrap_or((raw, ""));
        if !(version.is_empty() || version == "versionId=null") {
            return Err(err(
                Code::NotImplemented,
                format!("x-amz-copy-source with {version}: object versions are not implemented by pktfs"),
            ));
        }
        let src = pktfs_s3::names::percent_decode(src)
            .map_err(|e| err(Code::InvalidArgument, format!("x-amz-copy-source: {e}")))?;
        let src = src.strip_prefix('/').unwrap_or(&src);
        let Some((sb, sk)) = src.split_once('/') else {
            return Err(err(
                Code::InvalidArgument,
                "x-amz-copy-source must be BUCKET/KEY",
            ));
        };
        if !self.s3_may(&r.key, sb, pktfs_s3::keys::Access::Read) {
            return Err(err(
                Code::AccessDenied,
                format!("key {} has no read grant on bucket {sb}", r.key.id),
            ));
        }
        let kp = pktfs_s3::names::key_path(sk)
            .map_err(|e| err(Code::InvalidArgument, format!("x-amz-copy-source: {e}")))?;
        if kp.dir_marker {
            return Err(err(Code::InvalidRequest, "the copy source is a directory"));
        }
        self.s3_bucket(sb)?;
        let not_found = || err(Code::NoSuchKey, format!("no object {sk} in bucket {sb}"));
        for _ in 0..super::precond::RETRIES {
            let parts =
                std::iter::once(sb.as_bytes()).chain(kp.segments.iter().map(|s| s.as_bytes()));
            let a = match self.vol.resolve_parts(parts, self.who()) {
                Ok(a) if a.kind == FileType::Regular => a,
                Ok(_) | Err(FsError::NotFound | FsError::NotDir) => return Err(not_found()),
                Err(e) => return Err(fs_error(&e, sk)),
            };
            if self.who().is_some() && !self.permits(a.ino, pktfs_fs::Access::READ) {
                return Err(err(
                    Code::AccessDenied,
                    format!("no read permission on {sk}"),
                ));
            }
            match Snap::of(self.vol, &a) {
                Ok(snap) => {
                    return Ok(Source {
                        bucket: sb.to_string(),
                        key: sk.to_string(),
                        snap,
                    })
                }
                // Replaced between the two reads: look again.
                Err(FsError::NotFound) => continue,
                Err(e) => return Err(fs_error(&e, sk)),
            }
        }
        Err(err(Code::SlowDown, "the source keeps changing; try again"))
    }

    /// Records for `len` bytes of `src` at `off`, made in the unnamed
    /// file `dst` from offset 0, naming the source's buffer space (no
    /// byte copied); then the source must still be the state its
    /// conditions were evaluated against.
    pub(super) fn s3_copy_records(
        &self,
        src: &Source,
        off: u64,
        len: u64,
        dst: u64,
    ) -> Result<(), S3Error> {
        let d = src.digest();
        let mut at = 0;
        while at < len {
            match self.vol.copy_range(d.ino, off + at, dst, at, len - at) {
                // The source ended early: it changed (seen below).
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) => return Err(fs_error(&e, &src.key)),
            }
        }
        let now = self.vol.content_digest(d.ino);
        if at != len || !now.is_ok_and(|n| n == *d) {
            return Err(err(
                Code::SlowDown,
                "the source changed during the copy; try again",
            ));
        }
        Ok(())
    }

    /// The MD5 of the unnamed file `ino`'s `len` bytes and its checksum
    /// in `alg`, its bytes read once (a CRC32C is `crc32c`, its records'
    /// CRCs combined).
    fn s3_part_digests(
        &self,
        ino: u64,
        len: u64,
        crc32c: u32,
        alg: Option<Algorithm>,
    ) -> Result<([u8; 16], Option<Value>), S3Error> {
        let mut wanted = Wanted {
            md5: true,
            ..Wanted::default()
        };
        if let Some(a) = alg {
            wanted = wanted.with(a);
        }
        let mut h = BodyHasher::new(wanted);
        let zeros = [0u8; 4096];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(HASH_WINDOW);
            self.vol
                .read_with(ino, at, n, |segs| {
                    for s in segs {
                        match s {
                            Seg::Data(d) => h.update(d),
                            Seg::Zero(mut k) => {
                                while k > 0 {
                                    let m = k.min(zeros.len());
                                    h.update(&zeros[..m]);
                                    k -= m;
                                }
                            }
                        }
                    }
                })
                .map_err(|e| fs_error(&e, "reading the copied part"))?;
            at += n;
        }
        if h.len_bytes() != len {
            return Err(err(Code::InternalError, "the copied part read short"));
        }
        let dg = h.finish();
        let md5 = dg.md5.expect("MD5 is wanted");
        let checksum = match alg {
            None => None,
            Some(Algorithm::Crc32c) => Some(Value::Crc32c(crc32c)),
            Some(a) => Some(dg.value(a).expect("the algorithm is wanted")),
        };
        Ok((md5, checksum))
    }

    pub(super) fn s3_upload_part_copy(&mut self, h: &Head, r: &S3Req) -> bool {
        match self.s3_part_copy(h, r) {
            Ok(go_on) => go_on,
            Err(e) => self.s3_refuse(h, e),
        }
    }

    /// UploadPartCopy (module docs).
    fn s3_part_copy(&mut self, h: &Head, r: &S3Req) -> Result<bool, S3Error> {
        let sh = self.head;
        let number = Self::s3_part_number(r)?;
        self.s3_bucket(&r.target.bucket)?;
        let algorithm = self.s3_upload_algorithm(r)?;
        if h.has_body() && h.content_length != Some(0) {
            return Err(err(
                Code::InvalidRequest,
                "UploadPartCopy takes no body: the part's bytes are the source's",
            ));
        }
        let src = self.s3_copy_source(sh, r)?;
        check_copy_source(&copy_source_conditions(sh), &src.snap)?;
        let size = src.digest().size;
        let (off, len) = copy_source_range(sh.header("x-amz-copy-source-range"), size)?;
        if len > MAX_PART_BYTES {
            return Err(err(
                Code::EntityTooLarge,
                format!("a part is at most {MAX_PART_BYTES} bytes; the range is {len}"),
            ));
        }
        let tmp = self
            .vol
            .tmpfile(0o644, self.sh.uid, self.sh.gid)
            .map_err(|e| fs_error(&e, "a file for the part"))?;
        self.s3_copy_records(&src, off, len, tmp.ino())?;
        let d = self
            .vol
            .content_digest(tmp.ino())
            .map_err(|e| fs_error(&e, "the copied part"))?;
        if d.size != len {
            return Err(err(Code::InternalError, "the copied part is not the range"));
        }
        let (md5, checksum) = self.s3_part_digests(tmp.ino(), len, d.crc32c, algorithm)?;
        let at_ns = now_ns();
        let part = Part {
            file: tmp.into_owned(&self.sh.vol),
            size: len,
            md5,
            checksum,
            at_ns,
        };
        let id = r.q("uploadId").unwrap_or_default().to_string();
        self.s3_keep_part(&id, number, part)?;
        let sums: Vec<(Algorithm, String)> = checksum
            .iter()
            .map(|c| (c.algorithm(), c.to_base64()))
            .collect();
        tracing::debug!(
            source = %format!("{}/{}", src.bucket, src.key),
            off,
            len,
            part = number,
            "UploadPartCopy: records sharing the source's buffers"
        );
        let xml = pktfs_s3::xml::copy_part(&etag(&md5), at_ns, &sums);
        Ok(self.s3_xml(h, 200, "", &xml))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_source_range_as_s3_reads_it() {
        assert_eq!(copy_source_range(None, 10).unwrap(), (0, 10));
        assert_eq!(copy_source_range(Some("bytes=0-9"), 10).unwrap(), (0, 10));
        assert_eq!(copy_source_range(Some("bytes=3-3"), 10).unwrap(), (3, 1));
        for bad in [
            "byte=1-2",
            "bytes=invalid-range",
            "bytes=5-4",
            "bytes=-2-3",
            "bytes=aa-1",
            "bytes=1-aa",
            "bytes=1-",
            "bytes=-1",
            "bytes=+1-2",
            "1-2",
            "bytes=0-1,3-4",
        ] {
            let e = copy_source_range(Some(bad), 10).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{bad}");
            assert!(e.message.contains("bytes=first-last"), "{bad}: {e:?}");
        }
        for out in ["bytes=0-10", "bytes=10-12", "bytes=100-200"] {
            let e = copy_source_range(Some(out), 10).unwrap_err();
            assert_eq!(e.code, Code::InvalidRange, "{out}");
            assert!(e.message.contains("size: 10"), "{out}: {e:?}");
        }
        assert!(copy_source_range(Some("bytes=0-0"), 0).is_err());
    }
}
