//! An S3 request's body as the session walks it: the digests S3 defines
//! (MD5 for the ETag, SHA-256 when the payload is signed, the checksum
//! the client names), computed on each received piece while its bytes are
//! hot in the cache (a second read of them, beside the CRC32C that lands
//! them); the
//! aws-chunked framing's chunk and trailer signatures; and the CRC32C of
//! the body combined from its pieces' own CRCs (no pass of its own).
//! Everything is checked before the body is named: a body that fails is
//! never visible.

use pktfs_fs::RxPiece;
use pktfs_s3::checksum::{Algorithm, BodyHasher, Value, Wanted};
use pktfs_s3::error::{Code, S3Error};
use pktfs_s3::sigv4::{ChunkVerifier, PayloadMode, Verified};

use super::super::head::Head;
use super::S3Head;
use crate::receive::body::Hooks;

/// Every checksum algorithm S3 clients send.
pub(super) const ALGORITHMS: [Algorithm; 5] = [
    Algorithm::Crc32,
    Algorithm::Crc32c,
    Algorithm::Crc64Nvme,
    Algorithm::Sha1,
    Algorithm::Sha256,
];

/// A request body parsed once it is in (kept in an unnamed file until
/// then, read back, parsed, and dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::http) enum XmlOp {
    DeleteObjects,
    Complete,
    CreateBucket,
    PutCors,
}

/// What the body is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::http) enum BodyKind {
    Object,
    Part { upload_id: String, number: u32 },
    Xml(XmlOp),
}

/// The `chunk-signature` of an aws-chunked chunk-size line.
#[derive(Debug, Clone, Copy)]
struct ChunkSig {
    sig: [u8; 64],
    present: bool,
}

impl Default for ChunkSig {
    fn default() -> ChunkSig {
        ChunkSig {
            sig: [0; 64],
            present: false,
        }
    }
}

impl ChunkSig {
    /// From a chunk-size line (`hex;chunk-signature=<64 hex>\r\n`), as
    /// SigV4's chunk-header parser reads it; absent when the line has
    /// none or a malformed one (the chunk's check then refuses it).
    fn of_line(line: &[u8]) -> ChunkSig {
        let mut s = ChunkSig::default();
        let line = line.strip_suffix(b"\r\n").unwrap_or(line);
        let sig = pktfs_s3::sigv4::parse_chunk_header(line)
            .ok()
            .and_then(|h| h.signature);
        if let Some(v) = sig.filter(|v| v.len() == 64) {
            s.sig.copy_from_slice(v);
            s.present = true;
        }
        s
    }
}

/// What a finished body was, its digests checked.
#[derive(Debug, Clone)]
pub(in crate::http) struct Finished {
    pub md5: Option<[u8; 16]>,
    pub crc32c: u32,
    pub size: u64,
    /// The checksum the client gave (verified) or asked to be computed.
    pub checksum: Option<Value>,
}

/// An S3 body being received (module docs).
pub(in crate::http) struct S3Body {
    pub kind: BodyKind,
    /// aws-chunked: the Content-Length the chunks must end at.
    limit: Option<u64>,
    /// x-amz-decoded-content-length: the data bytes the chunks carry.
    decoded_len: Option<u64>,
    hasher: Option<BodyHasher>,
    crc32c: u32,
    crc_len: u64,
    expect_sha256: Option<[u8; 32]>,
    content_md5: Option<[u8; 16]>,
    /// A checksum given in a header.
    checksum: Option<Value>,
    /// The checksum algorithm asked for, by header or trailer.
    algorithm: Option<Algorithm>,
    /// The checksum a trailer must bring (x-amz-trailer).
    trailer_alg: Option<Algorithm>,
    trailer_value: Option<Value>,
    trailer_signed: bool,
    chunks: Option<ChunkVerifier>,
    chunk_hash: Option<BodyHasher>,
    chunk_sig: ChunkSig,
    pub data_bytes: u64,
    /// PutObject: the metadata to store with the object.
    pub meta: super::meta::ObjectMeta,
    /// An XML body's request, acted on once the body is in.
    pub req: Option<Box<super::S3Req>>,
}

impl std::fmt::Debug for S3Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Body")
            .field("kind", &self.kind)
            .field("limit", &self.limit)
            .field("data_bytes", &self.data_bytes)
            .finish_non_exhaustive()
    }
}

fn bad(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

impl S3Body {
    /// The body of `h`, signed as `verified` says, for `kind`.
    pub fn new(
        h: &Head,
        sh: &S3Head,
        verified: &Verified,
        kind: BodyKind,
    ) -> Result<S3Body, S3Error> {
        let mut b = S3Body {
            kind,
            limit: None,
            decoded_len: None,
            hasher: None,
            crc32c: 0,
            crc_len: 0,
            expect_sha256: None,
            content_md5: None,
            checksum: None,
            algorithm: None,
            trailer_alg: None,
            trailer_value: None,
            trailer_signed: false,
            chunks: None,
            chunk_hash: None,
            chunk_sig: ChunkSig::default(),
            data_bytes: 0,
            meta: Default::default(),
            req: None,
        };
        let streaming = match &verified.payload {
            PayloadMode::Unsigned => false,
            PayloadMode::Sha256(x) => {
                b.expect_sha256 = Some(*x);
                false
            }
            PayloadMode::StreamingSigned { trailer } => {
                b.chunks = verified.chunk_verifier();
                b.trailer_signed = *trailer;
                true
            }
            PayloadMode::StreamingUnsignedTrailer => true,
        };
        if streaming {
            if h.chunked {
                return Err(bad(
                    Code::InvalidRequest,
                    "an aws-chunked body must be sent with a Content-Length, not Transfer-Encoding: chunked",
                ));
            }
            b.limit = Some(h.content_length.ok_or_else(|| {
                bad(
                    Code::MissingContentLength,
                    "an aws-chunked body needs a Content-Length",
                )
            })?);
            let d = sh.header("x-amz-decoded-content-length").ok_or_else(|| {
                bad(
                    Code::MissingContentLength,
                    "an aws-chunked body needs x-amz-decoded-content-length",
                )
            })?;
            b.decoded_len = Some(d.parse().map_err(|_| {
                bad(
                    Code::InvalidArgument,
                    "x-amz-decoded-content-length is not a number",
                )
            })?);
        }
        if let Some(v) = sh.header("content-md5") {
            b.content_md5 = Some(
                pktfs_s3::checksum::content_md5(v)
                    .map_err(|e| bad(Code::InvalidDigest, format!("Content-MD5: {e}")))?,
            );
        }
        // CompleteMultipartUpload's x-amz-checksum-* fields are the
        // object's checksum, checked when it is assembled, not its XML
        // body's.
        let object_sums = b.kind == BodyKind::Xml(XmlOp::Complete);
        for alg in ALGORITHMS.into_iter().filter(|_| !object_sums) {
            if let Some(v) = sh.header(alg.header_name()) {
                if b.checksum.is_some() {
                    return Err(bad(
                        Code::InvalidRequest,
                        "more than one x-amz-checksum-* header",
                    ));
                }
                let v = Value::parse(alg, v)
                    .map_err(|e| bad(Code::BadDigest, format!("{}: {e}", alg.header_name())))?;
                b.checksum = Some(v);
                b.algorithm = Some(alg);
            }
        }
        if let Some(t) = sh.header("x-amz-trailer") {
            let alg = Algorithm::from_header_name(&t.to_ascii_lowercase()).ok_or_else(|| {
                bad(
                    Code::InvalidRequest,
                    format!("x-amz-trailer names {t}, not a checksum this server knows"),
                )
            })?;
            if !streaming {
                return Err(bad(
                    Code::InvalidRequest,
                    "x-amz-trailer needs an aws-chunked body",
                ));
            }
            b.trailer_alg = Some(alg);
            b.algorithm.get_or_insert(alg);
        }
        for name in ["x-amz-checksum-algorithm", "x-amz-sdk-checksum-algorithm"] {
            if let Some(v) = sh.header(name) {
                let alg = Algorithm::from_name(v).ok_or_else(|| {
                    bad(
                        Code::InvalidRequest,
                        format!("{name}: {v} is not a checksum algorithm this server knows"),
                    )
                })?;
                b.algorithm.get_or_insert(alg);
            }
        }
        let object = matches!(b.kind, BodyKind::Object | BodyKind::Part { .. });
        let alg = b.algorithm;
        b.hasher = Some(BodyHasher::new(Wanted {
            md5: object || b.content_md5.is_some(),
            sha256: b.expect_sha256.is_some() || alg == Some(Algorithm::Sha256),
            crc32: alg == Some(Algorithm::Crc32),
            crc64nvme: alg == Some(Algorithm::Crc64Nvme),
            sha1: alg == Some(Algorithm::Sha1),
        }));
        Ok(b)
    }

    /// aws-chunked: the Content-Length its chunks must end at.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Data bytes of the body, in order.
    fn data(&mut self, bytes: &[u8]) {
        self.data_bytes += bytes.len() as u64;
        if let Some(h) = self.hasher.as_mut() {
            h.update(bytes);
        }
        if let Some(h) = self.chunk_hash.as_mut() {
            h.update(bytes);
        }
    }

    /// A chunk-size line: `size` data bytes follow, signed by `sig`.
    fn chunk_start(&mut self, size: u64, sig: ChunkSig) -> Result<(), S3Error> {
        if self.chunks.is_none() {
            return Ok(());
        }
        if !sig.present {
            return Err(bad(
                Code::SignatureDoesNotMatch,
                "an aws-chunked chunk without its chunk-signature",
            ));
        }
        self.chunk_sig = sig;
        self.chunk_hash = Some(BodyHasher::new(Wanted {
            sha256: true,
            ..Wanted::default()
        }));
        if size == 0 {
            // The last chunk: signed over no data.
            return self.chunk_end();
        }
        Ok(())
    }

    /// A chunk's data ended: its signature is checked now.
    fn chunk_end(&mut self) -> Result<(), S3Error> {
        let (Some(v), Some(h)) = (self.chunks.as_mut(), self.chunk_hash.take()) else {
            return Ok(());
        };
        let sha = h.finish().sha256.expect("sha256 wanted");
        v.chunk(&sha, &self.chunk_sig.sig).map_err(|e| {
            bad(
                Code::SignatureDoesNotMatch,
                format!("an aws-chunked chunk's signature: {e}"),
            )
        })
    }

    /// The trailer section (`name:value` lines, the blank line last).
    fn trailers(&mut self, section: &[u8]) -> Result<(), S3Error> {
        let text = std::str::from_utf8(section)
            .map_err(|_| bad(Code::InvalidRequest, "a trailer that is not text"))?;
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut sig: Option<String> = None;
        for line in text.split('\n').map(|l| l.trim_end_matches('\r')) {
            if line.is_empty() {
                continue;
            }
            let Some((n, v)) = line.split_once(':') else {
                return Err(bad(Code::InvalidRequest, "a malformed trailer"));
            };
            let (n, v) = (n.trim().to_ascii_lowercase(), v.trim());
            if n == "x-amz-trailer-signature" {
                sig = Some(v.to_string());
                continue;
            }
            if let Some(alg) = Algorithm::from_header_name(&n) {
                if Some(alg) != self.trailer_alg {
                    return Err(bad(
                        Code::InvalidRequest,
                        format!("the trailer {n} was not announced in x-amz-trailer"),
                    ));
                }
                let val =
                    Value::parse(alg, v).map_err(|e| bad(Code::BadDigest, format!("{n}: {e}")))?;
                self.trailer_value = Some(val);
            }
            fields.push((n, v.to_string()));
        }
        if self.trailer_signed {
            let Some(v) = self.chunks.as_mut() else {
                return Ok(());
            };
            let sig = sig.ok_or_else(|| {
                bad(
                    Code::SignatureDoesNotMatch,
                    "the trailer has no x-amz-trailer-signature",
                )
            })?;
            let f: Vec<(&str, &str)> = fields
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            v.trailer(&f, sig.as_bytes()).map_err(|e| {
                bad(
                    Code::SignatureDoesNotMatch,
                    format!("the trailer's signature: {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// Fold pieces about to be committed into the body's CRC32C (each
    /// piece exactly once, in order).
    fn fold_pieces(&mut self, pieces: &[RxPiece<'_>]) {
        for p in pieces {
            self.crc32c = pktfs_s3::checksum::crc32c_combine(self.crc32c, p.crc(), p.len() as u64);
            self.crc_len += p.len() as u64;
        }
    }

    /// The body is in: every digest it was sent with is checked.
    pub fn finish(mut self) -> Result<Finished, S3Error> {
        if let Some(d) = self.decoded_len {
            if d != self.data_bytes {
                return Err(bad(
                    Code::IncompleteBody,
                    format!(
                        "x-amz-decoded-content-length says {d} bytes, the chunks carried {}",
                        self.data_bytes
                    ),
                ));
            }
        }
        if let Some(v) = &self.chunks {
            // The last (zero-length) chunk was seen and signed, and the
            // trailer when one was announced.
            v.finish().map_err(|e| {
                bad(
                    Code::IncompleteBody,
                    format!("the aws-chunked body ended early: {e}"),
                )
            })?;
        }
        debug_assert_eq!(self.crc_len, self.data_bytes, "every piece folded once");
        let digests = self
            .hasher
            .take()
            .map(BodyHasher::finish)
            .unwrap_or_default();
        if let (Some(want), Some(got)) = (self.expect_sha256, digests.sha256) {
            if want != got {
                return Err(bad(
                    Code::XAmzContentSHA256Mismatch,
                    "the body's SHA-256 is not the x-amz-content-sha256 it was signed with",
                ));
            }
        }
        if let (Some(want), Some(got)) = (self.content_md5, digests.md5) {
            if want != got {
                return Err(bad(
                    Code::BadDigest,
                    "the Content-MD5 you specified did not match what was received",
                ));
            }
        }
        if self.trailer_alg.is_some() && self.trailer_value.is_none() {
            return Err(bad(
                Code::IncompleteBody,
                "the checksum announced in x-amz-trailer was not sent",
            ));
        }
        let computed = |alg: Algorithm| -> Option<Value> {
            Some(match alg {
                Algorithm::Crc32c => Value::Crc32c(self.crc32c),
                Algorithm::Crc32 => Value::Crc32(digests.crc32?),
                Algorithm::Crc64Nvme => Value::Crc64Nvme(digests.crc64nvme?),
                Algorithm::Sha1 => Value::Sha1(digests.sha1?),
                Algorithm::Sha256 => Value::Sha256(digests.sha256?),
            })
        };
        let given = self.trailer_value.take().or(self.checksum.take());
        let checksum = match given {
            Some(v) => {
                let alg = v.algorithm();
                let ours = computed(alg);
                if ours.as_ref().map(Value::to_base64) != Some(v.to_base64()) {
                    return Err(bad(
                        Code::BadDigest,
                        format!(
                            "the {} you specified did not match the calculated checksum",
                            alg.xml_name().trim_start_matches("Checksum")
                        ),
                    ));
                }
                Some(v)
            }
            None => self.algorithm.and_then(computed),
        };
        Ok(Finished {
            md5: digests.md5,
            crc32c: self.crc32c,
            size: self.data_bytes,
            checksum,
        })
    }
}

/// The walker's hooks (`crate::receive::body`): an S3 body is checked as
/// it passes, and its CRC32C is its pieces' CRCs combined.
impl Hooks for Box<S3Body> {
    type Error = S3Error;
    const SEES_PIECES: bool = true;

    #[inline]
    fn data(&mut self, bytes: &[u8]) {
        S3Body::data(self, bytes);
    }

    fn chunk_start(&mut self, line: &[u8], size: u64) -> Result<(), S3Error> {
        S3Body::chunk_start(self, size, ChunkSig::of_line(line))
    }

    fn chunk_end(&mut self) -> Result<(), S3Error> {
        S3Body::chunk_end(self)
    }

    fn trailers(&mut self, section: &[u8]) -> Result<(), S3Error> {
        S3Body::trailers(self, section)
    }

    #[inline]
    fn pieces(&mut self, pieces: &[RxPiece<'_>]) {
        self.fold_pieces(pieces);
    }
}
