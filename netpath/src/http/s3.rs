//! The S3 endpoint: the S3 REST API (path-style) on the HTTP sessions of
//! the same event loops, over the same Volume. Buckets are the image's
//! top-level directories; an object's key is its path under the bucket
//! (`logs/2026/a.pcap` is the file `/BUCKET/logs/2026/a.pcap`), visible
//! in a mount the moment it is answered.
//!
//! # Why not an S3 server crate
//! s3s (the maintained Rust S3 protocol crate) owns the HTTP layer: hyper,
//! async, bodies as streams of DRAM buffers. Here a PutObject's body lands
//! in the image's packet buffers the kernel picked, is checksummed while
//! hot and linked as the file's records: one copy from the wire. So the
//! protocol's pure parts (SigV4, checksums, XML, names, keys) are the
//! `pktfs_s3` crate, and this module drives them from the loops'
//! sessions: the head as [`S3Head`], the body walk with [`S3Body`].
//!
//! # Who may do what
//! Every request is signed with SigV4 (Authorization header, presigned
//! query, or aws-chunked bodies whose every chunk is signed) by a key
//! stored in the image (`pktfs keys add`); anonymous requests are refused
//! (AccessDenied). A key's grants name buckets (or `*`) with read and/or
//! write ([`pktfs_s3::keys`]): read for HeadBucket, the listings,
//! GetObject/HeadObject, ListParts, ListMultipartUploads; write for
//! CreateBucket, DeleteBucket, PutObject, CopyObject and UploadPartCopy
//! (and read of the source), DeleteObject(s), the multipart changes. The
//! file-system checks then apply as for the plain HTTP listener: requests
//! act as `Config::as_user`. A refused, unsigned or wrongly signed request
//! stores nothing: the signature is checked from the head before any
//! body is received, a streaming body's chunks before it is named, and a
//! body whose digest disagrees is never linked. What S3 defines and this
//! endpoint does not do (a header, a query parameter, a sub-resource that
//! would change what a request does) is NotImplemented before anything
//! is received or stored ([`unserved`]); preconditions are S3's, against
//! the S3 ETag, exact against concurrent writers ([`precond`]).
//!
//! # What is kept per object
//! The ETag (the MD5 of the bytes, as S3 defines it; multipart:
//! the MD5 of the parts' MD5s, `-N`), Content-Type, the `x-amz-meta-*`
//! fields and the checksum the client gave are kept in one extended
//! attribute, `user.s3` ([`meta`]), with the size and CRC32C of the
//! content they describe. A file changed through the mount no longer
//! matches them: its ETag is then the plain listener's (from the
//! records' CRCs). CRC32C needs no attribute: it is the records' CRCs
//! combined.
//!
//! # Limits
//! Multipart uploads in progress live in this server's memory (their
//! parts are unnamed files): at most [`multipart::MAX_UPLOADS`], each at
//! most 10,000 parts. A server that stops or is killed forgets them, and
//! the image's next open frees their parts: nothing of an unfinished
//! upload is ever visible.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pktfs_fs::{FileType, FsError};
use pktfs_s3::error::{Code, S3Error};
use pktfs_s3::keys::{Access, AccessKey, KeyStore};
use pktfs_s3::sigv4::{self, SigningKey, Verified};

use super::conn::{Conn, ErrorForm, Next, Protocol, Received, SMALL_BODY};
use super::head::{Head, Method};
use crate::loops::Session;
use crate::receive::body::BodyError;
use crate::shared::Shared;

mod body;
mod bucket;
mod copy;
mod cors;
mod list;
pub(crate) mod meta;
mod multipart;
mod object;
mod owner;
mod precond;
mod unserved;

pub(super) use body::S3Body;

/// Signing keys derived (per key, day and region) kept before the cache
/// is emptied: a day's key is 4 HMACs, a request's check one more.
const SIGNING_KEYS_MAX: usize = 1024;

/// The S3 endpoint served by the loops (one listener), with the state its
/// connections share.
#[derive(Debug)]
pub(crate) struct S3Listener {
    pub sh: Arc<Shared>,
    pub state: S3State,
}

impl crate::loops::Protocol for S3Listener {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn open<'v>(
        &'v self,
        vol: &'v pktfs_fs::Volume,
        peer: std::net::SocketAddr,
    ) -> Option<Box<dyn Session<'v> + 'v>> {
        let p = S3 {
            st: &self.state,
            head: S3Head::default(),
        };
        super::session::open(&self.sh, vol, peer, p, Some(&self.state))
    }
}

/// S3 on one connection: the listener's state and the request being
/// served's head as SigV4 signs it.
#[derive(Debug)]
pub(super) struct S3<'a> {
    st: &'a S3State,
    head: S3Head,
}

impl<'a> Protocol<'a> for S3<'a> {
    type Body = Box<S3Body>;

    fn head_fields(&mut self, req: &httparse::Request<'_, '_>) {
        self.head = S3Head::of(req);
    }

    /// Every request is judged on its signature once it is whole.
    fn admits(&self, _c: &Conn<'a>, _h: &Head) -> bool {
        true
    }

    fn request(&mut self, c: &mut Conn<'a>, h: &Head) -> Next<'a, Box<S3Body>> {
        Ctx {
            c,
            st: self.st,
            head: &self.head,
        }
        .handle(h)
    }

    fn body_done(
        &mut self,
        c: &mut Conn<'a>,
        h: &Head,
        r: Received<'a>,
        body: Box<S3Body>,
    ) -> bool {
        Ctx {
            c,
            st: self.st,
            head: &self.head,
        }
        .s3_finish(h, r, *body)
    }

    fn body_failed(&mut self, c: &mut Conn<'a>, e: BodyError<S3Error>) {
        if let Some(e) = c.body_failed(e) {
            answer_error(c, self.st, &e, false);
            c.linger();
        }
    }
}

/// Every refusal on the S3 listener is S3's Error XML, the core's own
/// (a head too large, a body too slow) included.
impl ErrorForm for S3State {
    fn answer(&self, c: &mut Conn<'_>, code: u16, msg: &str, keep: bool) {
        let e = S3Error::new(code_of_status(code), msg);
        answer_error(c, self, &e, keep);
    }
}

/// One request being served: the connection, the listener's state and
/// the request's head as SigV4 signs it. The S3 operations are its
/// methods; it derefs to the connection for what every protocol does.
pub(super) struct Ctx<'c, 'a> {
    c: &'c mut Conn<'a>,
    st: &'a S3State,
    head: &'c S3Head,
}

impl<'a> std::ops::Deref for Ctx<'_, 'a> {
    type Target = Conn<'a>;
    fn deref(&self) -> &Conn<'a> {
        self.c
    }
}

impl<'a> std::ops::DerefMut for Ctx<'_, 'a> {
    fn deref_mut(&mut self) -> &mut Conn<'a> {
        self.c
    }
}

/// An S3 request's head as SigV4 signs it: the target and every field.
#[derive(Clone, Debug, Default)]
pub(crate) struct S3Head {
    pub target: String,
    /// (lowercased name, value as sent).
    pub headers: Vec<(String, Vec<u8>)>,
}

impl S3Head {
    pub fn of(req: &httparse::Request<'_, '_>) -> S3Head {
        S3Head {
            target: req.path.unwrap_or("").to_string(),
            headers: req
                .headers
                .iter()
                .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                .collect(),
        }
    }

    /// The path part of the target, as sent.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The raw query after `?` ("" when none).
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The body's data bytes: an aws-chunked body's
    /// x-amz-decoded-content-length, else the Content-Length.
    pub fn data_len(&self, h: &Head) -> Option<u64> {
        self.header("x-amz-decoded-content-length")
            .and_then(|v| v.parse().ok())
            .or(h.content_length)
    }

    /// The first field of that (lowercase) name, trimmed, as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .map(str::trim)
    }
}

/// The S3 endpoint's state shared by its connections.
#[derive(Default)]
pub(crate) struct S3State {
    /// The key store as last read from the image, with the Volume's
    /// version of it then.
    keys: Mutex<Option<(u64, Arc<KeyStore>)>>,
    signing: Mutex<HashMap<(String, String, String), Arc<SigningKey>>>,
    pub uploads: multipart::Uploads,
    /// Request ids (x-amz-request-id): a counter, unique per server run.
    next_request: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for S3State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3State").finish_non_exhaustive()
    }
}

impl S3State {
    /// The key of that id, from the store in the image (re-read when it
    /// changed).
    pub(super) fn key(
        &self,
        vol: &pktfs_fs::Volume,
        id: &str,
    ) -> Result<Option<AccessKey>, S3Error> {
        let version = vol.s3_keys_version();
        let mut g = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = matches!(&*g, Some((v, _)) if *v == version);
        if !fresh {
            let store = crate::control::keys::load(vol).map_err(|e| {
                tracing::error!("the image's S3 key store cannot be read: {e}");
                S3Error::new(Code::InternalError, "the key store cannot be read")
            })?;
            *g = Some((version, Arc::new(store)));
        }
        let store = &g.as_ref().expect("just set").1;
        Ok(store.get(id).cloned())
    }

    fn signing_key(&self, key: &AccessKey, date: &str, region: &str) -> Arc<SigningKey> {
        let k = (key.id.clone(), date.to_string(), region.to_string());
        let mut g = self.signing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = g.get(&k) {
            return s.clone();
        }
        if g.len() >= SIGNING_KEYS_MAX {
            g.clear();
        }
        let s = Arc::new(SigningKey::derive(&key.secret, date, region));
        g.insert(k, s.clone());
        s
    }

    fn request_id(&self) -> String {
        let n = self
            .next_request
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{n:016X}")
    }
}

/// The S3 error code for an HTTP status the shared handlers answer with.
pub(super) fn code_of_status(status: u16) -> Code {
    match status {
        400 => Code::InvalidRequest,
        403 => Code::AccessDenied,
        404 => Code::NoSuchKey,
        405 => Code::MethodNotAllowed,
        408 => Code::RequestTimeout,
        409 => Code::InvalidRequest,
        411 => Code::MissingContentLength,
        412 => Code::PreconditionFailed,
        413 => Code::EntityTooLarge,
        416 => Code::InvalidRange,
        501 => Code::NotImplemented,
        503 | 507 => Code::ServiceUnavailable,
        _ => Code::InternalError,
    }
}

/// The S3 error for a Volume error met while acting on `what`.
pub(super) fn fs_error(e: &FsError, what: &str) -> S3Error {
    let code = match e {
        FsError::NotFound => Code::NoSuchKey,
        FsError::Access => Code::AccessDenied,
        FsError::NoSpace(_) => Code::ServiceUnavailable,
        FsError::TooBig => Code::EntityTooLarge,
        FsError::NameTooLong => Code::KeyTooLongError,
        FsError::PreconditionFailed => Code::PreconditionFailed,
        FsError::Exists | FsError::IsDir | FsError::NotDir | FsError::NotEmpty => {
            Code::InvalidRequest
        }
        FsError::Invalid(_) => Code::InvalidArgument,
        FsError::Contended(_) => Code::SlowDown,
        _ => Code::InternalError,
    };
    S3Error::new(code, format!("{what}: {e}"))
}

/// What an S3 request names: the bucket and the key (both decoded).
#[derive(Debug)]
pub(super) struct Target {
    pub bucket: String,
    pub key: String,
    /// The key ends in `/`: a directory marker.
    pub dir_marker: bool,
}

/// What the request asks, from its method, target and query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    ListBuckets,
    CreateBucket,
    HeadBucket,
    DeleteBucket,
    GetLocation,
    GetVersioning,
    ListObjects {
        v2: bool,
    },
    /// ListObjectVersions: buckets keep no versions, so every object is
    /// its one version, `null`.
    ListVersions,
    /// PutBucketCors, GetBucketCors, DeleteBucketCors.
    PutCors,
    GetCors,
    DeleteCors,
    ListUploads,
    DeleteObjects,
    PutObject,
    CopyObject,
    GetObject,
    DeleteObject,
    CreateUpload,
    UploadPart,
    /// UploadPart with `x-amz-copy-source`: the part's bytes are a
    /// range of another object's.
    UploadPartCopy,
    CompleteUpload,
    AbortUpload,
    ListParts,
}

impl Op {
    /// It makes a bucket, an object or a part of one.
    fn creates(self) -> bool {
        use Op::*;
        matches!(
            self,
            CreateBucket
                | PutObject
                | CopyObject
                | CreateUpload
                | UploadPart
                | UploadPartCopy
                | CompleteUpload
        )
    }

    fn access(self) -> Option<Access> {
        use Op::*;
        match self {
            ListBuckets => None,
            HeadBucket
            | GetLocation
            | GetVersioning
            | ListObjects { .. }
            | ListVersions
            | GetCors
            | ListUploads
            | GetObject
            | ListParts => Some(Access::Read),
            _ => Some(Access::Write),
        }
    }
}

/// Sub-resources S3 has that this endpoint does not serve: asked for,
/// they are NotImplemented rather than taken for a listing or an object.
const UNSERVED: &[&str] = &[
    "acl",
    "policy",
    "lifecycle",
    "tagging",
    "website",
    "logging",
    "notification",
    "replication",
    "encryption",
    "object-lock",
    "retention",
    "legal-hold",
    "torrent",
    "restore",
    "select",
    "accelerate",
    "analytics",
    "inventory",
    "metrics",
    "ownershipControls",
    "publicAccessBlock",
    "requestPayment",
    "intelligent-tiering",
    "attributes",
    "policyStatus",
    "metadataTable",
    "metadataConfiguration",
    "metadataJournalTable",
    "metadataInventoryTable",
    "session",
    "renameObject",
    "abac",
];

fn route(method: Method, t: &Target, q: &[(String, String)]) -> Result<Op, S3Error> {
    let has = |k: &str| q.iter().any(|(n, _)| n == k);
    if let Some((n, _)) = q.iter().find(|(n, _)| UNSERVED.contains(&n.as_str())) {
        return Err(S3Error::new(
            Code::NotImplemented,
            format!("the `{n}` sub-resource is not served by pktfs"),
        ));
    }
    let not_allowed = || {
        S3Error::new(
            Code::MethodNotAllowed,
            format!("{} is not allowed on this resource", method.as_str()),
        )
    };
    if t.bucket.is_empty() {
        return match method {
            Method::Get | Method::Head => Ok(Op::ListBuckets),
            _ => Err(not_allowed()),
        };
    }
    if t.key.is_empty() {
        // A bucket's sub-resources served for one method only: another
        // method is not taken for the bucket call without them.
        if has("cors") {
            return match method {
                Method::Put => Ok(Op::PutCors),
                Method::Get => Ok(Op::GetCors),
                Method::Delete => Ok(Op::DeleteCors),
                _ => Err(not_allowed()),
            };
        }
        if let Some(sub) = ["versioning", "location", "uploads", "versions", "delete"]
            .into_iter()
            .find(|k| has(k))
        {
            let served = matches!(
                (sub, method),
                (
                    "versioning" | "location" | "uploads" | "versions",
                    Method::Get
                ) | ("delete", Method::Post)
            );
            if !served {
                return Err(if sub == "versioning" && method == Method::Put {
                    S3Error::new(
                        Code::NotImplemented,
                        "PutBucketVersioning: pktfs keeps no object versions",
                    )
                } else {
                    not_allowed()
                });
            }
        }
        return match method {
            Method::Put => Ok(Op::CreateBucket),
            Method::Head => Ok(Op::HeadBucket),
            Method::Delete => Ok(Op::DeleteBucket),
            Method::Post if has("delete") => Ok(Op::DeleteObjects),
            Method::Get if has("location") => Ok(Op::GetLocation),
            Method::Get if has("versioning") => Ok(Op::GetVersioning),
            Method::Get if has("uploads") => Ok(Op::ListUploads),
            Method::Get if has("versions") => Ok(Op::ListVersions),
            Method::Get => Ok(Op::ListObjects {
                v2: q.iter().any(|(n, v)| n == "list-type" && v == "2"),
            }),
            _ => Err(not_allowed()),
        };
    }
    let upload = has("uploadId");
    match method {
        Method::Put if upload && has("partNumber") => Ok(Op::UploadPart),
        Method::Put if upload => Err(S3Error::new(
            Code::InvalidArgument,
            "UploadPart needs partNumber",
        )),
        Method::Put => Ok(Op::PutObject),
        Method::Get | Method::Head if upload => Ok(Op::ListParts),
        Method::Get | Method::Head => Ok(Op::GetObject),
        Method::Delete if upload => Ok(Op::AbortUpload),
        Method::Delete => Ok(Op::DeleteObject),
        Method::Post if has("uploads") => Ok(Op::CreateUpload),
        Method::Post if upload => Ok(Op::CompleteUpload),
        _ => Err(not_allowed()),
    }
}

/// Split a path-style target's path into bucket and key (decoded). An
/// empty bucket segment followed by more (`//bucket/key`) is refused: read
/// as the empty bucket, it was ListBuckets.
fn target_of(path: &str) -> Result<Target, S3Error> {
    let p = path.strip_prefix('/').unwrap_or(path);
    if p.starts_with('/') {
        return Err(S3Error::new(
            Code::InvalidArgument,
            "an empty segment (`//`) in the path",
        ));
    }
    let (b, k) = p.split_once('/').unwrap_or((p, ""));
    let bad = |e: pktfs_s3::names::NameError| S3Error::new(Code::InvalidArgument, e.to_string());
    let bucket = pktfs_s3::names::percent_decode(b).map_err(bad)?;
    let key = pktfs_s3::names::percent_decode(k).map_err(bad)?;
    Ok(Target {
        dir_marker: key.ends_with('/'),
        bucket,
        key,
    })
}

/// An S3 request being served: the key that signed it and what it names.
pub(super) struct S3Req {
    pub key: AccessKey,
    pub verified: Verified,
    pub target: Target,
    pub query: Vec<(String, String)>,
}

impl S3Req {
    pub fn q(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl<'a> Ctx<'_, 'a> {
    /// Serve one request on the S3 listener.
    fn handle(&mut self, h: &Head) -> Next<'a, Box<S3Body>> {
        let sh = self.head;
        // A browser's preflight is never signed: CORS answers it (it
        // changes nothing, so a read-only server answers it too).
        if h.method == Method::Options {
            return Next::answered(h, self.s3_preflight(h));
        }
        if self.sh.read_only() && !matches!(h.method, Method::Get | Method::Head) {
            return self.refused(
                h,
                S3Error::new(Code::AccessDenied, "this server is read-only"),
            );
        }
        let r = match self.s3_admit(h, sh) {
            Ok(r) => r,
            Err(e) => return self.refused(h, e),
        };
        let op = match route(h.method, &r.target, &r.query) {
            Ok(Op::PutObject) if sh.header("x-amz-copy-source").is_some() => Op::CopyObject,
            Ok(Op::UploadPart) if sh.header("x-amz-copy-source").is_some() => Op::UploadPartCopy,
            Ok(op) => op,
            Err(e) => return self.refused(h, e),
        };
        // A request from a page of another origin gets the CORS headers
        // the bucket's rules give it, refusals included.
        if sh.header("origin").is_some() {
            self.s3_cors_actual(h, &r);
        }
        if let Err(e) = self.s3_allowed(h, op, &r) {
            return self.refused(h, e);
        }
        let keep = match op {
            Op::ListBuckets => self.s3_list_buckets(h, &r),
            Op::CreateBucket => return self.s3_xml_body(h, r, body::XmlOp::CreateBucket),
            Op::HeadBucket => self.s3_head_bucket(h, &r),
            Op::DeleteBucket => self.s3_delete_bucket(h, &r),
            Op::GetLocation => self.s3_location(h, &r),
            Op::GetVersioning => self.s3_versioning(h, &r),
            Op::ListObjects { v2 } => self.s3_list_objects(h, &r, v2),
            Op::ListVersions => self.s3_list_versions(h, &r),
            Op::PutCors => return self.s3_xml_body(h, r, body::XmlOp::PutCors),
            Op::GetCors => self.s3_get_cors(h, &r),
            Op::DeleteCors => self.s3_delete_cors(h, &r),
            Op::ListUploads => self.s3_list_uploads(h, &r),
            Op::DeleteObjects => return self.s3_xml_body(h, r, body::XmlOp::DeleteObjects),
            Op::PutObject => return self.s3_put_object(h, r),
            Op::CopyObject => self.s3_copy_object(h, &r),
            Op::GetObject => self.s3_get_object(h, &r),
            Op::DeleteObject => self.s3_delete_object(h, &r),
            Op::CreateUpload => self.s3_create_upload(h, &r),
            Op::UploadPart => return self.s3_upload_part(h, r),
            Op::UploadPartCopy => self.s3_upload_part_copy(h, &r),
            Op::CompleteUpload => return self.s3_xml_body(h, r, body::XmlOp::Complete),
            Op::AbortUpload => self.s3_abort_upload(h, &r),
            Op::ListParts => self.s3_list_parts(h, &r),
        };
        // A request that takes no body must not have one: read and
        // dropped after its answer when small, as any refusal's.
        Next::answered(h, keep)
    }

    /// What the key may do and what the request names, checked before
    /// anything is looked up: the key's grant on the bucket, the bucket's
    /// and key's names, and what the request asks beyond what is served
    /// (refused before anything is received or stored).
    fn s3_allowed(&self, h: &Head, op: Op, r: &S3Req) -> Result<(), S3Error> {
        if op == Op::CreateBucket {
            if !r.key.may_create(&r.target.bucket) {
                return Err(S3Error::new(
                    Code::AccessDenied,
                    format!(
                        "key {} may not create buckets and has no write grant on {}",
                        r.key.id, r.target.bucket
                    ),
                ));
            }
        } else if let Some(a) = op.access() {
            if !self.s3_may(&r.key, &r.target.bucket, a) {
                // A key that may create buckets learns whether a name is
                // taken from CreateBucket anyway (BucketAlreadyExists), so
                // it is told NoSuchBucket, as S3 tells it; any other key
                // gets the same AccessDenied whether the bucket exists.
                let owner = pktfs_fs::S3_OWNER_XATTR;
                if r.key.create_buckets && self.s3_bucket_attr(&r.target.bucket, owner).is_none() {
                    return Err(S3Error::new(
                        Code::NoSuchBucket,
                        format!("no bucket {}", r.target.bucket),
                    ));
                }
                let what = match a {
                    Access::Read => "read",
                    Access::Write => "write",
                };
                return Err(S3Error::new(
                    Code::AccessDenied,
                    format!(
                        "key {} has no {what} grant on bucket {} and does not own it",
                        r.key.id, r.target.bucket
                    ),
                ));
            }
        }
        if op != Op::ListBuckets {
            if let Err(e) = pktfs_s3::names::valid_bucket(&r.target.bucket) {
                return Err(S3Error::new(Code::InvalidBucketName, e.to_string()));
            }
        }
        if !r.target.key.is_empty() {
            if let Err(e) = pktfs_s3::names::key_path(&r.target.key) {
                let code = if r.target.key.len() > 1024 {
                    Code::KeyTooLongError
                } else {
                    Code::InvalidArgument
                };
                return Err(S3Error::new(code, e.to_string()));
            }
            if let Some(msg) = h.path_error {
                return Err(S3Error::new(Code::InvalidArgument, msg));
            }
        }
        if h.reserved && op.creates() {
            let m = self.sh.cfg.metrics_path.as_deref().unwrap_or_default();
            let why = format!(
                "{}: the HTTP listener's metrics path {m} is reserved: nothing is made at or below it",
                self.path.display()
            );
            let code = match op {
                Op::CreateBucket => Code::InvalidBucketName,
                _ => Code::InvalidArgument,
            };
            return Err(S3Error::new(code, why));
        }
        unserved::check(op, self.head, &r.query, &h.cond)
    }

    /// Who signed the request, checked: the claim parsed from the head,
    /// the key looked up in the image's store, the signature recomputed.
    fn s3_admit(&mut self, h: &Head, sh: &S3Head) -> Result<S3Req, S3Error> {
        let headers: Vec<(&str, &[u8])> = sh
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let req = sigv4::Request {
            method: h.method.as_str(),
            path: sh.path(),
            query: sh.query(),
            headers: &headers,
        };
        let now_s = (crate::util::now_ns() / 1_000_000_000) as i64;
        let auth = |e: sigv4::AuthError| {
            let code = Code::from_str(e.code()).unwrap_or(Code::AccessDenied);
            S3Error::new(code, e.to_string())
        };
        let claim = sigv4::claim(&req, now_s).map_err(auth)?.ok_or_else(|| {
            S3Error::new(
                Code::AccessDenied,
                "anonymous requests are not served: sign them with a key made by `pktfs keys add`",
            )
        })?;
        let key = self
            .st
            .key(self.vol, &claim.access_key_id)?
            .ok_or_else(|| {
                S3Error::new(
                    Code::InvalidAccessKeyId,
                    "the access key id you provided does not exist in this image's key store",
                )
            })?;
        // Headers that change what is stored or copied must be signed: a
        // party on the path could otherwise change them under a valid
        // signature.
        for (n, _) in &sh.headers {
            let meaning = n.starts_with("x-amz-meta-")
                || n.starts_with("x-amz-checksum-")
                || n.starts_with("x-amz-copy-source")
                || matches!(
                    n.as_str(),
                    "x-amz-trailer" | "x-amz-decoded-content-length" | "x-amz-metadata-directive"
                );
            if meaning && !claim.signs(n) {
                return Err(S3Error::new(
                    Code::AccessDenied,
                    format!("the header {n} must be signed"),
                ));
            }
        }
        let sk = self.st.signing_key(&key, claim.date(), claim.region());
        let verified = claim.verify(&req, &sk).map_err(auth)?;
        let query = pktfs_s3::names::parse_query(sh.query())
            .map_err(|e| S3Error::new(Code::InvalidArgument, e.to_string()))?;
        let target = target_of(sh.path())?;
        Ok(S3Req {
            key,
            verified,
            target,
            query,
        })
    }

    /// Answer an S3 error (the Error XML; none for HEAD) and log it.
    pub(super) fn s3_error(&mut self, e: &S3Error, keep: bool) {
        answer_error(self.c, self.st, e, keep);
    }

    /// [`Conn::refuse`] with an S3 error: answered before the body is
    /// read; whether the connection goes on (a small announced body is
    /// then read and dropped, a large one closes it).
    pub(super) fn s3_refuse(&mut self, h: &Head, e: S3Error) -> bool {
        let mut keep = h.keep_alive;
        if h.has_body() {
            let small = h.content_length.is_some_and(|n| n <= SMALL_BODY);
            keep = keep && small && !h.expect_continue;
        }
        self.s3_error(&e, keep);
        if !keep {
            self.linger();
        }
        keep
    }

    /// [`Self::s3_refuse`] where a body might have been received.
    pub(super) fn refused<B>(&mut self, h: &Head, e: S3Error) -> Next<'a, B> {
        Next::answered(h, self.s3_refuse(h, e))
    }

    /// Answer 200 with an XML body (none for HEAD).
    pub(super) fn s3_xml(&mut self, h: &Head, code: u16, extra: &str, xml: &str) -> bool {
        let keep = h.keep_alive;
        let rid = self.st.request_id();
        let extra = format!("x-amz-request-id: {rid}\r\nContent-Type: application/xml\r\n{extra}");
        self.with_body(code, keep, &extra, xml.as_bytes(), h.method != Method::Head) && keep
    }

    /// Answer with no body.
    pub(super) fn s3_empty(&mut self, h: &Head, code: u16, extra: &str) -> bool {
        let rid = self.st.request_id();
        let extra = format!("x-amz-request-id: {rid}\r\n{extra}");
        self.head_only(code, h.keep_alive, &extra) && h.keep_alive
    }

    /// The bucket's directory (NoSuchBucket when there is none).
    pub(super) fn s3_bucket(&self, name: &str) -> Result<u64, S3Error> {
        let root = self.vol.root();
        match self.lookup_kind_as(root, name.as_bytes()) {
            Ok((ino, FileType::Directory)) => Ok(ino),
            Ok(_) | Err(FsError::NotFound) => Err(S3Error::new(
                Code::NoSuchBucket,
                format!("the bucket {name} does not exist"),
            )),
            Err(e) => Err(fs_error(&e, name)),
        }
    }
}

/// Answer an S3 error on `c` (the Error XML; none for HEAD) and log it.
fn answer_error(c: &mut Conn<'_>, st: &S3State, e: &S3Error, keep: bool) {
    let status = e.code.status();
    let (m, path, peer) = (c.req.method, c.path.display(), c.peer);
    let code = e.code.as_str();
    match status {
        500.. => {
            tracing::warn!(%peer, method = m, %path, status, code, "S3 request failed: {e}")
        }
        404 => {
            tracing::debug!(%peer, method = m, %path, status, code, "S3 request refused: {e}")
        }
        _ => tracing::info!(%peer, method = m, %path, status, code, "S3 request refused: {e}"),
    }
    let rid = st.request_id();
    let body = pktfs_s3::xml::error(code, &e.message, &path, &rid);
    let mut extra = format!("x-amz-request-id: {rid}\r\nContent-Type: application/xml\r\n");
    if status == 503 {
        extra.push_str("Retry-After: 1\r\n");
    }
    let send_body = c.req.method != "HEAD";
    c.with_body(status, keep, &extra, body.as_bytes(), send_body);
}
