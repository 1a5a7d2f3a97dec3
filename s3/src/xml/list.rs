//! Listings: buckets (ListBuckets) and objects (ListObjectsV2 and V1).

use super::writer::Doc;

/// A bucket as ListBuckets shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's name.
    pub name: String,
    /// When it was made.
    pub created_unix_ns: i64,
}

/// ListBuckets' answer. `owner_id` is written as both the owner's ID and
/// display name.
pub fn list_buckets(owner_id: &str, buckets: &[Bucket]) -> String {
    let mut d = Doc::new("ListAllMyBucketsResult", true);
    d.open("Owner")
        .text("ID", owner_id)
        .text("DisplayName", owner_id)
        .close("Owner");
    d.open("Buckets");
    for b in buckets {
        d.open("Bucket")
            .text("Name", &b.name)
            .time("CreationDate", b.created_unix_ns)
            .close("Bucket");
    }
    d.close("Buckets");
    d.finish()
}

/// An object as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The key.
    pub key: String,
    /// Last modification.
    pub last_modified_unix_ns: i64,
    /// The ETag, quoted.
    pub etag: String,
    /// Size in bytes.
    pub size: u64,
    /// The storage class, `"STANDARD"`.
    pub storage_class: &'static str,
}

/// What ListObjectsV2 answers with. With `encoding_url`
/// (`encoding-type=url`), Delimiter, Prefix, StartAfter, the keys and the
/// common prefixes are URL-encoded, as S3 does.
#[derive(Debug, Clone, Copy)]
pub struct ListV2<'a> {
    /// The bucket.
    pub bucket: &'a str,
    /// The `prefix` asked for ("" if none).
    pub prefix: &'a str,
    /// The `delimiter` asked for; `None` or empty writes no element.
    pub delimiter: Option<&'a str>,
    /// The `max-keys` in effect.
    pub max_keys: u32,
    /// Whether more entries follow.
    pub is_truncated: bool,
    /// The `continuation-token` asked with.
    pub continuation_token: Option<&'a str>,
    /// The token for the next page, when truncated.
    pub next_continuation_token: Option<&'a str>,
    /// The `start-after` asked for.
    pub start_after: Option<&'a str>,
    /// Whether `encoding-type=url` was asked for.
    pub encoding_url: bool,
    /// The objects of this page.
    pub contents: &'a [Object],
    /// The common prefixes of this page (each ending with the delimiter).
    pub common_prefixes: &'a [String],
}

fn contents(d: &mut Doc, objects: &[Object], url: bool) {
    for o in objects {
        d.open("Contents")
            .key("Key", &o.key, url)
            .time("LastModified", o.last_modified_unix_ns)
            .text("ETag", &o.etag)
            .num("Size", o.size)
            .text("StorageClass", o.storage_class)
            .close("Contents");
    }
}

fn common_prefixes(d: &mut Doc, prefixes: &[String], url: bool) {
    for p in prefixes {
        d.open("CommonPrefixes")
            .key("Prefix", p, url)
            .close("CommonPrefixes");
    }
}

fn delimiter(d: &mut Doc, delimiter: Option<&str>, url: bool) {
    if let Some(dl) = delimiter.filter(|dl| !dl.is_empty()) {
        d.key("Delimiter", dl, url);
    }
}

/// ListObjectsV2's answer. KeyCount is the number of objects plus common
/// prefixes, as S3 counts it.
pub fn list_objects_v2(l: &ListV2<'_>) -> String {
    let url = l.encoding_url;
    let mut d = Doc::new("ListBucketResult", true);
    d.text("Name", l.bucket)
        .key("Prefix", l.prefix, url)
        .num("KeyCount", l.contents.len() + l.common_prefixes.len())
        .num("MaxKeys", l.max_keys);
    delimiter(&mut d, l.delimiter, url);
    d.bool("IsTruncated", l.is_truncated)
        .text_opt("ContinuationToken", l.continuation_token)
        .text_opt("NextContinuationToken", l.next_continuation_token);
    if let Some(sa) = l.start_after {
        d.key("StartAfter", sa, url);
    }
    if url {
        d.text("EncodingType", "url");
    }
    contents(&mut d, l.contents, url);
    common_prefixes(&mut d, l.common_prefixes, url);
    d.finish()
}

/// What ListObjects (version 1) answers with; rclone uses it for
/// providers it does not know. With `encoding_url`, Delimiter, Marker,
/// NextMarker, Prefix, the keys and the common prefixes are URL-encoded.
#[derive(Debug, Clone, Copy)]
pub struct ListV1<'a> {
    /// The bucket.
    pub bucket: &'a str,
    /// The `prefix` asked for ("" if none).
    pub prefix: &'a str,
    /// The `delimiter` asked for; `None` or empty writes no element.
    pub delimiter: Option<&'a str>,
    /// The `marker` asked for ("" if none).
    pub marker: &'a str,
    /// Where the next page starts, when truncated. S3 writes it only with
    /// a delimiter; without one, clients continue from the last key.
    pub next_marker: Option<&'a str>,
    /// The `max-keys` in effect.
    pub max_keys: u32,
    /// Whether more entries follow.
    pub is_truncated: bool,
    /// Whether `encoding-type=url` was asked for.
    pub encoding_url: bool,
    /// The objects of this page.
    pub contents: &'a [Object],
    /// The common prefixes of this page.
    pub common_prefixes: &'a [String],
}

/// ListObjects' (version 1) answer.
pub fn list_objects_v1(l: &ListV1<'_>) -> String {
    let url = l.encoding_url;
    let mut d = Doc::new("ListBucketResult", true);
    d.text("Name", l.bucket)
        .key("Prefix", l.prefix, url)
        .key("Marker", l.marker, url);
    if let Some(nm) = l.next_marker {
        d.key("NextMarker", nm, url);
    }
    d.num("MaxKeys", l.max_keys);
    delimiter(&mut d, l.delimiter, url);
    d.bool("IsTruncated", l.is_truncated);
    if url {
        d.text("EncodingType", "url");
    }
    contents(&mut d, l.contents, url);
    common_prefixes(&mut d, l.common_prefixes, url);
    d.finish()
}
