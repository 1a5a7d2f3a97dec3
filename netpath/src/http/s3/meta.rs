//! What S3 keeps of an object beyond its bytes: one extended attribute,
//! `user.s3`, a small JSON document (readable with `getfattr -n user.s3`
//! on the mount). It names the size and CRC32C of the content it
//! describes, so a file changed since (through the mount) is seen to
//! have outgrown it: its ETag is then the plain listener's, from the
//! records' CRCs, and the stored checksum is not claimed.

use pktfs_fs::{ContentDigest, Volume, XattrFlags};
use pktfs_s3::checksum::{Algorithm, Value};
use serde::{Deserialize, Serialize};

use super::super::cond::etag as crc_etag;
use super::S3Head;

/// The attribute's name.
pub(crate) const XATTR: &[u8] = b"user.s3";

/// User metadata (`x-amz-meta-*`) and the stored headers together may
/// take this much, as S3 allows.
pub(crate) const MAX_META_BYTES: usize = 2048;

/// Response headers S3 stores with an object and sends back.
const STORED_HEADERS: [&str; 5] = [
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct ObjectMeta {
    /// The ETag, quoted.
    pub etag: String,
    /// The content it describes.
    pub size: u64,
    pub crc32c: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// (name, value): `x-amz-meta-NAME` fields (name lowercased) and the
    /// stored headers (`cache-control`, ...), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The checksum the client gave or asked for: (header name, value as
    /// S3 writes it, e.g. base64 or base64-N for a multipart composite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<(String, String)>,
    /// COMPOSITE or FULL_OBJECT (multipart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
    /// Parts of a multipart upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<u32>,
    /// Their sizes, for GetObject and HeadObject with `partNumber` (None:
    /// not a multipart object, or more distinct sizes than are kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_sizes: Option<pktfs_s3::part_sizes::PartSizes>,
}

impl ObjectMeta {
    /// Content-Type, `x-amz-meta-*` and the stored headers of a request.
    /// Refused (a message for InvalidArgument) past [`MAX_META_BYTES`].
    pub fn from_request(sh: &S3Head) -> Result<ObjectMeta, String> {
        let mut m = ObjectMeta::default();
        let mut bytes = 0;
        for (n, v) in &sh.headers {
            let v = pktfs_s3::meta_value::from_header(v);
            let v = v.trim().to_string();
            if n == "content-type" {
                m.content_type = Some(v);
            } else if let Some(k) = n.strip_prefix("x-amz-meta-") {
                bytes += k.len() + v.len();
                m.user.push((k.to_string(), v));
            } else if STORED_HEADERS.contains(&n.as_str()) {
                // aws-chunked is the body's framing, not the object's.
                let v = match n.as_str() {
                    "content-encoding" => v
                        .split(',')
                        .map(str::trim)
                        .filter(|c| !c.eq_ignore_ascii_case("aws-chunked") && !c.is_empty())
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => v,
                };
                if v.is_empty() {
                    continue;
                }
                bytes += n.len() + v.len();
                m.headers.push((n.clone(), v));
            }
        }
        if bytes > MAX_META_BYTES {
            return Err(format!(
                "the metadata headers take {bytes} bytes, over the {MAX_META_BYTES} S3 allows"
            ));
        }
        Ok(m)
    }

    /// The stored checksum is a CRC32C (a multipart object's COMPOSITE
    /// one, which S3 answers as stored).
    pub fn has_crc32c(&self) -> bool {
        self.checksum
            .as_ref()
            .is_some_and(|(n, _)| n == Algorithm::Crc32c.header_name())
    }

    pub fn set_checksum(&mut self, v: &Value) {
        self.checksum = Some((v.algorithm().header_name().to_string(), v.to_base64()));
    }

    /// Whether it still describes the file whose digest is `d`.
    pub fn fresh(&self, d: &ContentDigest) -> bool {
        self.size == d.size && self.crc32c == d.crc32c
    }

    /// Store it on `ino` (one commit).
    pub fn store(&self, vol: &Volume, ino: u64) -> Result<(), pktfs_fs::FsError> {
        let v = serde_json::to_vec(self).expect("plain data serializes");
        vol.setxattr(ino, XATTR, &v, XattrFlags::default())
    }

    /// What `ino` has, if anything readable.
    pub fn load(vol: &Volume, ino: u64) -> Option<ObjectMeta> {
        let v = vol.getxattr(ino, XATTR).ok()?;
        serde_json::from_slice(&v).ok()
    }

    /// The header lines a GET/HEAD sends for it (user metadata, stored
    /// headers; the checksum only when asked for).
    pub fn push_headers(&self, out: &mut String, checksum_mode: bool) {
        for (k, v) in &self.user {
            out.push_str("x-amz-meta-");
            out.push_str(k);
            out.push_str(": ");
            out.push_str(&pktfs_s3::meta_value::to_header(v));
            out.push_str("\r\n");
        }
        for (k, v) in &self.headers {
            out.push_str(k);
            out.push_str(": ");
            out.push_str(&pktfs_s3::meta_value::to_header(v));
            out.push_str("\r\n");
        }
        if let (true, Some((n, v))) = (checksum_mode, &self.checksum) {
            out.push_str(&format!("{n}: {v}\r\n"));
            let ty = self.checksum_type.as_deref().unwrap_or("FULL_OBJECT");
            out.push_str(&format!("x-amz-checksum-type: {ty}\r\n"));
        }
    }
}

/// The ETag and metadata of the file whose digest is `d`: the stored
/// ones while they describe it, else the records' (`cond::etag`).
pub(crate) fn etag_of(vol: &Volume, d: &ContentDigest) -> (String, Option<ObjectMeta>) {
    match ObjectMeta::load(vol, d.ino) {
        Some(m) if m.fresh(d) => (m.etag.clone(), Some(m)),
        _ => (crc_etag(d), None),
    }
}
