//! The object store: a blocking facade over `aws-sdk-s3`.
//!
//! pktfs's threads are plain threads (FUSE workers, event loops, the tier
//! engine), so the store offers blocking calls that any of them may make at
//! once; underneath, one small tokio runtime of the store's own drives the
//! SDK. Credentials, region and endpoint come from `aws-config`'s default
//! chain, as AWS tools take them (AWS_* environment variables, AWS_PROFILE,
//! ~/.aws/config and ~/.aws/credentials; `AWS_ENDPOINT_URL[_S3]` for a store
//! other than AWS), overridden by [`StoreOptions`]. Requests are path-style.
//!
//! Checksums: a PUT or a part carries the CRC32C the caller supplies
//! (combined from record CRCs, never recomputed here) as
//! `x-amz-checksum-crc32c`, and the store refuses bytes that do not match
//! it. The SDK is told to add no checksum of its own
//! (`RequestChecksumCalculation::WhenRequired`), so no second pass over the
//! data is made and no trailer is sent. Garage 2.x stores the CRC32C of a
//! single PUT as a full-object checksum and returns it on HEAD with
//! `x-amz-checksum-mode: ENABLED`; for a multipart upload the parts are each
//! verified, and the object's checksum (if any) is whatever the store
//! composes, which [`ObjectInfo::crc32c_full_object`] reports only when the
//! store says it is of the full object.
//!
//! Payload signing: SigV4 can sign the body too (a SHA-256 of every byte,
//! by the client and again by the store: on each side more CPU than all
//! else the client does). The body is
//! signed only where it crosses a network unprotected: over HTTPS the
//! channel is authenticated and over loopback there is no wire, so there
//! it goes as `UNSIGNED-PAYLOAD`, its integrity checked by the CRC32C the
//! headers (which are signed) carry. Plain HTTP to another host: signed.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumMode, ChecksumType, CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;

use crate::target::TierTarget;

/// Overrides of what the environment and config files say.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Path-style requests (`http://host/bucket/key`): Garage and MinIO
    /// need them.
    pub path_style: bool,
    /// Attempts per request (the SDK's standard retry, with backoff).
    pub max_attempts: u32,
    /// Explicit credentials (tests, benchmarks), instead of the chain.
    pub credentials: Option<(String, String)>,
    pub timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            endpoint: None,
            region: None,
            path_style: true,
            max_attempts: 3,
            credentials: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// What went wrong, in words a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{key}: not found in bucket {bucket}")]
    NotFound { bucket: String, key: String },
    #[error(
        "{key}: the store at {endpoint} has no bucket {bucket}; create it (e.g. `garage bucket \
         create {bucket}`, `aws s3 mb s3://{bucket}`) or name an existing one in --tier"
    )]
    NoBucket {
        bucket: String,
        key: String,
        endpoint: String,
    },
    #[error("{key}: the store refused the bytes: they do not match their CRC32C ({detail})")]
    ChecksumMismatch { key: String, detail: String },
    #[error(
        "{key}: access denied by {endpoint} ({detail}); set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY (or a profile in ~/.aws/credentials) to a key allowed to read \
         and write bucket {bucket}, and AWS_REGION to the store's region"
    )]
    AccessDenied {
        bucket: String,
        key: String,
        endpoint: String,
        detail: String,
    },
    #[error("{key}: cannot reach the store at {endpoint} ({detail}); check AWS_ENDPOINT_URL or --tier-endpoint")]
    Unreachable {
        key: String,
        endpoint: String,
        detail: String,
    },
    #[error("{key}: {detail}")]
    Other { key: String, detail: String },
    /// The store answered with more bytes than the caller can expect: a
    /// hostile or broken store cannot make us buffer without bound.
    #[error("{key}: the store answered more than the {max} bytes expected ({got}); refused")]
    TooLarge { key: String, max: u64, got: u64 },
    #[error("the object store client: {0}")]
    Setup(String),
}

/// An object as listed or HEADed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    /// The CRC32C the store keeps, if it returned one.
    pub crc32c: Option<u32>,
    /// The store's checksum type ("FULL_OBJECT", "COMPOSITE"), if given.
    pub checksum_type: Option<String>,
}

impl ObjectInfo {
    /// The stored CRC32C when it is of the whole object's bytes.
    pub fn crc32c_full_object(&self) -> Option<u32> {
        match self.checksum_type.as_deref() {
            None | Some("FULL_OBJECT") => self.crc32c,
            _ => None,
        }
    }
}

/// `x-amz-checksum-crc32c`'s form: base64 of the big-endian CRC.
pub fn crc32c_base64(crc: u32) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes())
}

fn crc32c_from_base64(s: &str) -> Option<u32> {
    use base64::Engine;
    // A composite checksum has a "-N" suffix: not a CRC of the bytes.
    let b = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    Some(u32::from_be_bytes(b.try_into().ok()?))
}

#[derive(Debug)]
struct Inner {
    client: Client,
    bucket: String,
    endpoint: String,
    /// Sign request bodies (see the module comment).
    sign_payload: bool,
    rt: tokio::runtime::Runtime,
}

/// Whether request bodies to `endpoint` must be signed: not over HTTPS
/// (AWS itself, when no endpoint is given) nor to a loopback address.
fn payload_needs_signing(endpoint: Option<&str>) -> bool {
    let Some(e) = endpoint else { return false };
    let Some((scheme, rest)) = e.split_once("://") else {
        return true;
    };
    if scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    !loopback
}

/// A bucket of an S3-compatible store. Cheap to clone; every method
/// blocks and may be called from many threads at once.
#[derive(Clone, Debug)]
pub struct ObjectStore {
    inner: Arc<Inner>,
}

impl ObjectStore {
    /// A client for `target`'s bucket (no request is made yet).
    pub fn connect(target: &TierTarget, opts: &StoreOptions) -> Result<ObjectStore, StoreError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pktfs-s3")
            // The store's traffic is background work next to the clients
            // a server serves (see priority::background_priority).
            .on_thread_start(crate::priority::background_priority)
            .enable_all()
            .build()
            .map_err(|e| StoreError::Setup(format!("cannot start its runtime: {e}")))?;
        let conf = rt.block_on(async {
            let mut l = aws_config::defaults(aws_config::BehaviorVersion::latest());
            if let Some(r) = &opts.region {
                l = l.region(aws_config::Region::new(r.clone()));
            }
            if let Some(e) = &opts.endpoint {
                l = l.endpoint_url(e.clone());
            }
            if let Some((id, secret)) = &opts.credentials {
                l = l.credentials_provider(aws_sdk_s3::config::Credentials::new(
                    id.clone(),
                    secret.clone(),
                    None,
                    None,
                    "pktfs",
                ));
            }
            l.load().await
        });
        let sign_payload = payload_needs_signing(conf.endpoint_url());
        let endpoint = conf
            .endpoint_url()
            .map(str::to_string)
            .unwrap_or_else(|| "AWS S3".to_string());
        let mut b = aws_sdk_s3::config::Builder::from(&conf)
            .force_path_style(opts.path_style)
            .request_checksum_calculation(
                aws_sdk_s3::config::RequestChecksumCalculation::WhenRequired,
            )
            .response_checksum_validation(
                aws_sdk_s3::config::ResponseChecksumValidation::WhenRequired,
            )
            .retry_config(
                aws_sdk_s3::config::retry::RetryConfig::standard()
                    .with_max_attempts(opts.max_attempts.max(1)),
            )
            .timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(opts.timeout)
                    .connect_timeout(Duration::from_secs(10))
                    .build(),
            );
        if conf.region().is_none() {
            b = b.region(aws_config::Region::new("us-east-1"));
        }
        Ok(ObjectStore {
            inner: Arc::new(Inner {
                client: Client::from_conf(b.build()),
                bucket: target.bucket.clone(),
                endpoint,
                sign_payload,
                rt,
            }),
        })
    }

    pub fn bucket(&self) -> &str {
        &self.inner.bucket
    }
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    fn map<E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static>(
        &self,
        key: &str,
        e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> StoreError {
        let key = key.to_string();
        let endpoint = self.inner.endpoint.clone();
        let bucket = self.inner.bucket.clone();
        match &e {
            SdkError::DispatchFailure(_) => unanswered(&e, bucket, key, endpoint, true),
            SdkError::TimeoutError(_) => StoreError::Unreachable {
                key,
                endpoint,
                detail: "timed out".into(),
            },
            SdkError::ServiceError(se) => {
                let status = se.raw().status().as_u16();
                let code = se.err().code().unwrap_or("").to_string();
                let msg = se.err().message().unwrap_or("").to_string();
                let detail = format!("HTTP {status} {code} {msg}").trim().to_string();
                match (status, code.as_str()) {
                    (_, "NoSuchBucket") => StoreError::NoBucket {
                        bucket,
                        key,
                        endpoint,
                    },
                    (404, _) | (_, "NoSuchKey" | "NotFound") => {
                        StoreError::NotFound { bucket, key }
                    }
                    (_, "InvalidDigest" | "BadDigest" | "XAmzContentChecksumMismatch") => {
                        StoreError::ChecksumMismatch { key, detail }
                    }
                    (403, _)
                    | (_, "AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch") => {
                        StoreError::AccessDenied {
                            bucket,
                            key,
                            endpoint,
                            detail,
                        }
                    }
                    (400, _) if msg.to_ascii_lowercase().contains("checksum") => {
                        StoreError::ChecksumMismatch { key, detail }
                    }
                    _ => StoreError::Other { key, detail },
                }
            }
            _ => unanswered(&e, bucket, key, endpoint, false),
        }
    }

    /// PUT `body` at `key`; the store checks it against `crc32c`.
    pub fn put(&self, key: &str, body: Vec<u8>, crc32c: u32) -> Result<(), StoreError> {
        let op = self
            .inner
            .client
            .put_object()
            .bucket(&self.inner.bucket)
            .key(key)
            .checksum_crc32_c(crc32c_base64(crc32c))
            .body(ByteStream::from(body))
            .customize();
        let op = if self.inner.sign_payload {
            op
        } else {
            op.disable_payload_signing()
        };
        let r = self.inner.rt.block_on(op.send());
        r.map(|_| ()).map_err(|e| self.map(key, e))
    }

    /// Bytes `[off, off+len)` of `key`.
    pub fn get_range(&self, key: &str, off: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let mut out = Vec::new();
        self.get_range_into(key, off, len, &mut out)?;
        Ok(out)
    }

    /// Bytes `[off, off+len)` of `key` into `out` (cleared first), chunk by
    /// chunk as they arrive: a caller that reuses `out` reuses its memory.
    ///
    /// Why: the read-through cache fetches 8 MiB windows; a fresh buffer
    /// for each is a fresh mapping from the allocator, and faulting in and
    /// zeroing its pages took about a tenth of the machine during a cold
    /// sequential read.
    pub fn get_range_into(
        &self,
        key: &str,
        off: u64,
        len: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        out.clear();
        if len == 0 {
            return Ok(());
        }
        // The caller's length may come from a hostile store's listing or
        // footer: memory is reserved up front only up to a window, and
        // grows as bytes actually arrive (never past `len`).
        out.reserve(len.min(GET_RESERVE_MAX) as usize);
        let c = &self.inner.client;
        let range = format!("bytes={off}-{}", off + len - 1);
        self.inner.rt.block_on(async {
            let resp = c
                .get_object()
                .bucket(&self.inner.bucket)
                .key(key)
                .range(range)
                .send()
                .await
                .map_err(|e| self.map(key, e))?;
            let declared = resp.content_length().map(|n| n.max(0) as u64);
            read_bounded(resp.body, key, declared, len, out).await?;
            if out.len() as u64 != len {
                return Err(StoreError::Other {
                    key: key.to_string(),
                    detail: format!("asked for {len} bytes at {off}, got {}", out.len()),
                });
            }
            Ok(())
        })
    }

    /// The whole object, at most [`MAX_WHOLE_GET`] bytes (a snapshot).
    pub fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        self.get_at_most(key, MAX_WHOLE_GET)
    }

    /// The whole object, refused ([`StoreError::TooLarge`]) when the store
    /// answers more than `max` bytes: its declared length is checked before
    /// anything is buffered, and what arrives is counted as it arrives.
    pub fn get_at_most(&self, key: &str, max: u64) -> Result<Vec<u8>, StoreError> {
        let c = &self.inner.client;
        self.inner.rt.block_on(async {
            let resp = c
                .get_object()
                .bucket(&self.inner.bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| self.map(key, e))?;
            let declared = resp.content_length().map(|n| n.max(0) as u64);
            let mut out = Vec::new();
            read_bounded(resp.body, key, declared, max, &mut out).await?;
            Ok(out)
        })
    }

    /// Size and stored checksum of `key`; `None` when it does not exist.
    pub fn head(&self, key: &str) -> Result<Option<ObjectInfo>, StoreError> {
        let c = &self.inner.client;
        let r = self.inner.rt.block_on(
            c.head_object()
                .bucket(&self.inner.bucket)
                .key(key)
                .checksum_mode(ChecksumMode::Enabled)
                .send(),
        );
        match r {
            Ok(h) => Ok(Some(ObjectInfo {
                key: key.to_string(),
                size: h.content_length().unwrap_or(0).max(0) as u64,
                crc32c: h.checksum_crc32_c().and_then(crc32c_from_base64),
                checksum_type: h.checksum_type().map(|t| match t {
                    ChecksumType::FullObject => "FULL_OBJECT".to_string(),
                    ChecksumType::Composite => "COMPOSITE".to_string(),
                    other => other.as_str().to_string(),
                }),
            })),
            Err(e) => match self.map(key, e) {
                StoreError::NotFound { .. } => Ok(None),
                e => Err(e),
            },
        }
    }

    /// Every object whose key starts with `prefix`, with sizes.
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let c = &self.inner.client;
        self.inner.rt.block_on(async {
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let resp = c
                    .list_objects_v2()
                    .bucket(&self.inner.bucket)
                    .prefix(prefix)
                    .set_continuation_token(token.take())
                    .send()
                    .await
                    .map_err(|e| self.map(prefix, e))?;
                for o in resp.contents() {
                    out.push(ObjectInfo {
                        key: o.key().unwrap_or("").to_string(),
                        size: o.size().unwrap_or(0).max(0) as u64,
                        crc32c: None,
                        checksum_type: None,
                    });
                }
                match resp.next_continuation_token() {
                    Some(t) if resp.is_truncated().unwrap_or(false) => token = Some(t.to_string()),
                    _ => break,
                }
            }
            Ok(out)
        })
    }

    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        let c = &self.inner.client;
        let r = self
            .inner
            .rt
            .block_on(c.delete_object().bucket(&self.inner.bucket).key(key).send());
        r.map(|_| ()).map_err(|e| self.map(key, e))
    }

    /// Delete many keys, 1,000 per request.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), StoreError> {
        use aws_sdk_s3::types::{Delete, ObjectIdentifier};
        let c = &self.inner.client;
        for chunk in keys.chunks(1000) {
            let objs: Vec<ObjectIdentifier> = chunk
                .iter()
                .filter_map(|k| ObjectIdentifier::builder().key(k).build().ok())
                .collect();
            let del = Delete::builder()
                .set_objects(Some(objs))
                .quiet(true)
                .build()
                .map_err(|e| StoreError::Other {
                    key: chunk[0].clone(),
                    detail: e.to_string(),
                })?;
            let r = self.inner.rt.block_on(
                c.delete_objects()
                    .bucket(&self.inner.bucket)
                    .delete(del)
                    .send(),
            );
            let resp = r.map_err(|e| self.map(&chunk[0], e))?;
            if let Some(e) = resp.errors().first() {
                return Err(StoreError::Other {
                    key: e.key().unwrap_or("").to_string(),
                    detail: format!(
                        "delete failed: {} {}",
                        e.code().unwrap_or(""),
                        e.message().unwrap_or("")
                    ),
                });
            }
        }
        Ok(())
    }

    /// Start a multipart upload of `key`.
    pub fn begin_multipart(&self, key: &str) -> Result<MultipartUpload, StoreError> {
        let c = &self.inner.client;
        let r = self.inner.rt.block_on(
            c.create_multipart_upload()
                .bucket(&self.inner.bucket)
                .key(key)
                .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Crc32C)
                .send(),
        );
        let resp = r.map_err(|e| self.map(key, e))?;
        let id = resp.upload_id().ok_or_else(|| StoreError::Other {
            key: key.to_string(),
            detail: "the store gave no upload id".into(),
        })?;
        Ok(MultipartUpload {
            store: self.clone(),
            key: key.to_string(),
            id: id.to_string(),
            parts: Vec::new(),
            finished: false,
        })
    }
}

/// A multipart upload in progress: [`Self::part`]s, then
/// [`Self::complete`]; dropped unfinished, it is aborted.
#[derive(Debug)]
pub struct MultipartUpload {
    store: ObjectStore,
    key: String,
    id: String,
    parts: Vec<CompletedPart>,
    finished: bool,
}

impl MultipartUpload {
    /// Upload part `number` (1-based; every part but the last at least
    /// 5 MiB), checked by the store against `crc32c`.
    pub fn part(&mut self, number: i32, body: Vec<u8>, crc32c: u32) -> Result<(), StoreError> {
        let s = &self.store.inner;
        let sum = crc32c_base64(crc32c);
        let op = s
            .client
            .upload_part()
            .bucket(&s.bucket)
            .key(&self.key)
            .upload_id(&self.id)
            .part_number(number)
            .checksum_crc32_c(sum.clone())
            .body(ByteStream::from(body))
            .customize();
        let op = if s.sign_payload {
            op
        } else {
            op.disable_payload_signing()
        };
        let r = s.rt.block_on(op.send());
        let resp = r.map_err(|e| self.store.map(&self.key, e))?;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(resp.e_tag().map(str::to_string))
                .checksum_crc32_c(sum)
                .build(),
        );
        Ok(())
    }

    /// Make the object of the uploaded parts.
    pub fn complete(mut self) -> Result<(), StoreError> {
        let s = self.store.inner.clone();
        let parts = std::mem::take(&mut self.parts);
        let r = s.rt.block_on(
            s.client
                .complete_multipart_upload()
                .bucket(&s.bucket)
                .key(&self.key)
                .upload_id(&self.id)
                .multipart_upload(
                    CompletedMultipartUpload::builder()
                        .set_parts(Some(parts))
                        .build(),
                )
                .send(),
        );
        self.finished = true;
        r.map(|_| ()).map_err(|e| self.store.map(&self.key, e))
    }

    /// Give up: the store drops the parts.
    pub fn abort(mut self) {
        self.abort_inner();
    }

    fn abort_inner(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let s = &self.store.inner;
        let r = s.rt.block_on(
            s.client
                .abort_multipart_upload()
                .bucket(&s.bucket)
                .key(&self.key)
                .upload_id(&self.id)
                .send(),
        );
        if let Err(e) = r {
            tracing::warn!(
                "aborting the upload of {}: {}",
                self.key,
                self.store.map(&self.key, e)
            );
        }
    }
}

impl Drop for MultipartUpload {
    fn drop(&mut self) {
        self.abort_inner();
    }
}

/// An error the store never answered (a dispatch failure, a response that
/// did not parse, ...), said as its causes in words (the SDK's Debug form
/// is a page of nested structs). One for want of credentials (the SDK
/// found none and asked the instance metadata service) is access denied,
/// with what to set; any other dispatch failure is a store out of reach.
/// The most a ranged GET reserves before its bytes arrive (the
/// read-through cache's window, so its buffers are still reused whole).
const GET_RESERVE_MAX: u64 = 8 << 20;

/// The most a whole-object GET ([`ObjectStore::get`]) takes: snapshots,
/// whose size no caller knows beforehand, stay far below it.
pub const MAX_WHOLE_GET: u64 = 1 << 30;

/// Read `body` into `out` (appended), refusing more than `max` bytes: a
/// declared length over it before anything is read, the bytes as they
/// arrive (a store may declare none, or lie).
async fn read_bounded(
    mut body: ByteStream,
    key: &str,
    declared: Option<u64>,
    max: u64,
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let too_large = |got: u64| StoreError::TooLarge {
        key: key.to_string(),
        max,
        got,
    };
    if let Some(n) = declared.filter(|&n| n > max) {
        return Err(too_large(n));
    }
    let start = out.len();
    while let Some(chunk) = body.try_next().await.map_err(|e| StoreError::Other {
        key: key.to_string(),
        detail: format!("reading the body: {e}"),
    })? {
        let got = (out.len() - start + chunk.len()) as u64;
        if got > max {
            return Err(too_large(got));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(())
}

fn unanswered(
    e: &(dyn std::error::Error + 'static),
    bucket: String,
    key: String,
    endpoint: String,
    dispatch: bool,
) -> StoreError {
    let detail = causes(e);
    if detail.contains("credentials") || detail.contains("load token") {
        StoreError::AccessDenied {
            bucket,
            key,
            endpoint,
            detail,
        }
    } else if dispatch {
        StoreError::Unreachable {
            key,
            endpoint,
            detail,
        }
    } else {
        StoreError::Other { key, detail }
    }
}

/// An error and its sources, each as it displays itself, joined by ": "
/// ("dispatch failure: other: an error occurred while loading credentials:
/// ..."): what a person reads, without the Debug form of every layer that
/// `DisplayErrorContext` appends.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        // Some layers repeat their source's text; say it once.
        if parts.last() != Some(&s) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_signed_only_over_an_unprotected_network() {
        use super::payload_needs_signing as sign;
        for e in [
            "https://s3.example.com",
            "http://127.0.0.1:3900",
            "http://localhost:3900/",
            "http://[::1]:3900",
            "HTTPS://x",
        ] {
            assert!(!sign(Some(e)), "{e}");
        }
        assert!(!sign(None), "AWS itself: HTTPS");
        for e in [
            "http://10.0.0.7:3900",
            "http://garage.lan",
            "http://[fd00::1]:80",
            "garage:3900",
        ] {
            assert!(sign(Some(e)), "{e}");
        }
    }

    #[test]
    fn causes_reads_as_a_sentence() {
        #[derive(Debug)]
        struct E(&'static str, Option<Box<E>>);
        impl std::fmt::Display for E {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for E {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|e| e as _)
            }
        }
        let e = E(
            "dispatch failure",
            Some(Box::new(E(
                "io error",
                Some(Box::new(E(
                    "io error",
                    Some(Box::new(E("Connection refused", None))),
                ))),
            ))),
        );
        assert_eq!(
            super::causes(&e),
            "dispatch failure: io error: Connection refused"
        );
    }

    fn read(body: Vec<u8>, declared: Option<u64>, max: u64) -> Result<Vec<u8>, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut out = Vec::new();
        rt.block_on(read_bounded(
            ByteStream::from(body),
            "k",
            declared,
            max,
            &mut out,
        ))?;
        Ok(out)
    }

    #[test]
    fn hostile_bodies_are_bounded() {
        assert_eq!(read(vec![1; 10], Some(10), 10).unwrap(), vec![1; 10]);
        // A declared length past the bound is refused before any byte.
        assert!(matches!(
            read(vec![1; 10], Some(u64::MAX), 10),
            Err(StoreError::TooLarge {
                got: u64::MAX,
                max: 10,
                ..
            })
        ));
        // A store that declares a small length (or none) and sends more.
        assert!(matches!(
            read(vec![1; 11], Some(5), 10),
            Err(StoreError::TooLarge { got: 11, .. })
        ));
        assert!(matches!(
            read(vec![1; 11], None, 10),
            Err(StoreError::TooLarge { .. })
        ));
        let e = read(vec![0; 100], None, 64).unwrap_err().to_string();
        assert!(e.contains("more than the 64 bytes expected"), "{e}");
    }

    #[test]
    fn crc_header_form() {
        assert_eq!(super::crc32c_base64(0xc994_65aa), "yZRlqg==");
        assert_eq!(super::crc32c_from_base64("yZRlqg=="), Some(0xc994_65aa));
        assert_eq!(super::crc32c_from_base64("yZRlqg==-3"), None);
    }
}
