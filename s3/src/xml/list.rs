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

/// Who a listing names as owner: an access key's id and its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    /// The access key id.
    pub id: &'a str,
    /// The key's name (`pktfs keys add NAME`).
    pub display_name: &'a str,
}

fn owner(d: &mut Doc, o: Owner<'_>) {
    d.open("Owner")
        .text("ID", o.id)
        .text("DisplayName", o.display_name)
        .close("Owner");
}

/// One page of ListBuckets: the buckets, the `prefix` asked for (echoed),
/// and the continuation token when more buckets follow.
#[derive(Debug, Clone, Copy)]
pub struct BucketsPage<'a> {
    /// The buckets of this page, in name order.
    pub buckets: &'a [Bucket],
    /// The `prefix` asked for.
    pub prefix: Option<&'a str>,
    /// Where the next page starts, when the page is not the last.
    pub continuation_token: Option<&'a str>,
}

/// ListBuckets' answer.
pub fn list_buckets(o: Owner<'_>, page: &BucketsPage<'_>) -> String {
    let mut d = Doc::new("ListAllMyBucketsResult", true);
    owner(&mut d, o);
    d.open("Buckets");
    for b in page.buckets {
        d.open("Bucket")
            .text("Name", &b.name)
            .time("CreationDate", b.created_unix_ns)
            .close("Bucket");
    }
    d.close("Buckets");
    d.text_opt("ContinuationToken", page.continuation_token)
        .text_opt("Prefix", page.prefix);
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
    /// The owner shown in each object's entry (`fetch-owner=true`).
    pub owner: Option<Owner<'a>>,
}

fn contents(d: &mut Doc, objects: &[Object], url: bool, o: Option<Owner<'_>>) {
    for obj in objects {
        d.open("Contents")
            .key("Key", &obj.key, url)
            .time("LastModified", obj.last_modified_unix_ns)
            .text("ETag", &obj.etag)
            .num("Size", obj.size);
        if let Some(o) = o {
            owner(d, o);
        }
        d.text("StorageClass", obj.storage_class).close("Contents");
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
    contents(&mut d, l.contents, url, l.owner);
    common_prefixes(&mut d, l.common_prefixes, url);
    d.finish()
}

/// What ListObjects (version 1) answers with; rclone uses it for
/// providers it does not know. With `encoding_url`, Delimiter, Marker,
/// NextMarker, the keys and the common prefixes are URL-encoded (the
/// Prefix asked for is not, as on S3).
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
    /// The owner shown in each object's entry (version 1 always shows one).
    pub owner: Owner<'a>,
}

/// ListObjects' (version 1) answer.
pub fn list_objects_v1(l: &ListV1<'_>) -> String {
    let url = l.encoding_url;
    let mut d = Doc::new("ListBucketResult", true);
    // Version 1 encodes Marker, not Prefix (SDKs decode only what S3
    // encodes: an encoded Prefix came back to them altered).
    d.text("Name", l.bucket)
        .text("Prefix", l.prefix)
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
    contents(&mut d, l.contents, url, Some(l.owner));
    common_prefixes(&mut d, l.common_prefixes, url);
    d.finish()
}

/// ListObjectVersions' answer, from what a version 1 listing of the same
/// page has (`marker` is the `key-marker`, `next_marker` where the next
/// page starts, whenever it is truncated). pktfs keeps no versions, so
/// each object is its one version: VersionId `null`, IsLatest; no delete
/// markers. With `encoding_url`, the keys, markers, Prefix and Delimiter
/// are URL-encoded.
pub fn list_object_versions(l: &ListV1<'_>) -> String {
    let url = l.encoding_url;
    let mut d = Doc::new("ListVersionsResult", true);
    d.text("Name", l.bucket)
        .key("Prefix", l.prefix, url)
        .key("KeyMarker", l.marker, url)
        .text("VersionIdMarker", "");
    if let Some(nm) = l.next_marker {
        d.key("NextKeyMarker", nm, url)
            .text("NextVersionIdMarker", "null");
    }
    d.num("MaxKeys", l.max_keys);
    delimiter(&mut d, l.delimiter, url);
    d.bool("IsTruncated", l.is_truncated);
    if url {
        d.text("EncodingType", "url");
    }
    for obj in l.contents {
        d.open("Version")
            .key("Key", &obj.key, url)
            .text("VersionId", "null")
            .bool("IsLatest", true)
            .time("LastModified", obj.last_modified_unix_ns)
            .text("ETag", &obj.etag)
            .num("Size", obj.size);
        owner(&mut d, l.owner);
        d.text("StorageClass", obj.storage_class).close("Version");
    }
    common_prefixes(&mut d, l.common_prefixes, url);
    d.finish()
}
