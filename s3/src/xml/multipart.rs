//! The multipart answers: Create, Complete, ListParts,
//! ListMultipartUploads.

use super::writer::Doc;
use crate::checksum::Algorithm;

/// CreateMultipartUpload's answer.
pub fn initiate_multipart(bucket: &str, key: &str, upload_id: &str) -> String {
    let mut d = Doc::new("InitiateMultipartUploadResult", true);
    d.text("Bucket", bucket)
        .text("Key", key)
        .text("UploadId", upload_id);
    d.finish()
}

/// CompleteMultipartUpload's answer: the object's URL, bucket, key, ETag
/// (quoted, `-N`), object checksums (base64, `-N` for composite ones) and
/// checksum type (`COMPOSITE` or `FULL_OBJECT`) if any.
pub fn complete_multipart(
    location: &str,
    bucket: &str,
    key: &str,
    etag: &str,
    checksums: &[(Algorithm, String)],
    checksum_type: Option<&str>,
) -> String {
    let mut d = Doc::new("CompleteMultipartUploadResult", true);
    d.text("Location", location)
        .text("Bucket", bucket)
        .text("Key", key)
        .text("ETag", etag)
        .checksums(checksums)
        .text_opt("ChecksumType", checksum_type);
    d.finish()
}

/// A part as ListParts shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// Its number, 1 to 10,000.
    pub number: u32,
    /// Its ETag, quoted.
    pub etag: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was uploaded.
    pub last_modified_unix_ns: i64,
    /// Its checksums, base64.
    pub checksums: Vec<(Algorithm, String)>,
}

/// ListParts' answer. `marker` is the `part-number-marker` asked with (0
/// for none); `next_marker` where the next page starts.
#[allow(clippy::too_many_arguments)] // the fields of the answer, as the lead's API has them
pub fn list_parts(
    bucket: &str,
    key: &str,
    upload_id: &str,
    marker: u32,
    next_marker: Option<u32>,
    max_parts: u32,
    truncated: bool,
    parts: &[Part],
) -> String {
    let mut d = Doc::new("ListPartsResult", true);
    d.text("Bucket", bucket)
        .text("Key", key)
        .text("UploadId", upload_id)
        .text("StorageClass", "STANDARD")
        .num("PartNumberMarker", marker);
    if let Some(n) = next_marker {
        d.num("NextPartNumberMarker", n);
    }
    d.num("MaxParts", max_parts).bool("IsTruncated", truncated);
    for p in parts {
        d.open("Part")
            .num("PartNumber", p.number)
            .time("LastModified", p.last_modified_unix_ns)
            .text("ETag", &p.etag)
            .num("Size", p.size)
            .checksums(&p.checksums)
            .close("Part");
    }
    d.finish()
}

/// An upload in progress as ListMultipartUploads shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The key it will make.
    pub key: String,
    /// Its upload ID.
    pub upload_id: String,
    /// When it was created.
    pub initiated_unix_ns: i64,
}

/// ListMultipartUploads' answer.
#[allow(clippy::too_many_arguments)] // the fields of the answer, as the lead's API has them
pub fn list_multipart_uploads(
    bucket: &str,
    prefix: &str,
    key_marker: &str,
    upload_id_marker: &str,
    next_key_marker: Option<&str>,
    next_upload_id_marker: Option<&str>,
    max_uploads: u32,
    truncated: bool,
    uploads: &[Upload],
    delimiter: Option<&str>,
    common_prefixes: &[String],
) -> String {
    let mut d = Doc::new("ListMultipartUploadsResult", true);
    d.text("Bucket", bucket)
        .text("KeyMarker", key_marker)
        .text("UploadIdMarker", upload_id_marker)
        .text_opt("NextKeyMarker", next_key_marker)
        .text_opt("NextUploadIdMarker", next_upload_id_marker);
    if let Some(dl) = delimiter.filter(|dl| !dl.is_empty()) {
        d.text("Delimiter", dl);
    }
    d.text("Prefix", prefix)
        .num("MaxUploads", max_uploads)
        .bool("IsTruncated", truncated);
    for u in uploads {
        d.open("Upload")
            .text("Key", &u.key)
            .text("UploadId", &u.upload_id)
            .text("StorageClass", "STANDARD")
            .time("Initiated", u.initiated_unix_ns)
            .close("Upload");
    }
    for p in common_prefixes {
        d.open("CommonPrefixes")
            .text("Prefix", p)
            .close("CommonPrefixes");
    }
    d.finish()
}
