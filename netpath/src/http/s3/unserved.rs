//! Request headers and query parameters S3 defines that would change
//! what an operation does, and that pktfs does not do: such a request is
//! answered 501 NotImplemented before anything is received or stored,
//! never served as if the header were not there. docs/S3.md ("Headers
//! and sub-resources") lists every decision, including the headers that
//! are harmless to ignore and why.
//!
//! Sub-resources (`?acl`, `?tagging`, ...) are refused by the router
//! (`UNSERVED` in `super`); this is the per-operation rest.

use pktfs_s3::error::{Code, S3Error};

use super::super::head::Conditions;
use super::{Op, S3Head};

/// How a header's value is judged.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Present at all: not implemented.
    Any,
    /// Present with a value: not implemented (empty asks for nothing).
    NonEmpty,
    /// Values that ask for what pktfs does anyway (compared without
    /// case); any other is not implemented.
    Except(&'static [&'static str]),
}

/// The operations that store an object's bytes and metadata.
fn stores_object(op: Op) -> bool {
    matches!(op, Op::PutObject | Op::CopyObject | Op::CreateUpload)
}

/// Server-side encryption with a customer's key applies to every
/// operation that reads or writes an object's bytes.
fn moves_bytes(op: Op) -> bool {
    matches!(
        op,
        Op::PutObject
            | Op::CopyObject
            | Op::CreateUpload
            | Op::UploadPart
            | Op::UploadPartCopy
            | Op::CompleteUpload
            | Op::GetObject
    )
}

const NOT_PRIVATE: Rule = Rule::Except(&["private", "bucket-owner-full-control"]);

/// The rule for the request header `name` (lowercase) on `op`, with what
/// it would ask for; None: served or harmless (docs/S3.md). One `match`
/// per `x-amz-` field of the request: no table is walked.
fn rule(op: Op, name: &str) -> Option<(Rule, &'static str)> {
    let obj = stores_object(op);
    let bucket = op == Op::CreateBucket;
    let r = match name {
        "x-amz-acl" if obj || bucket => (
            NOT_PRIVATE,
            "a canned ACL other than private (no ACLs here: the key's grants and the file's mode decide)",
        ),
        "x-amz-grant-full-control"
        | "x-amz-grant-read"
        | "x-amz-grant-read-acp"
        | "x-amz-grant-write-acp"
            if obj || bucket =>
        {
            (Rule::Any, "ACL grants")
        }
        "x-amz-grant-write" if bucket => (Rule::Any, "ACL grants"),
        "x-amz-bucket-object-lock-enabled" if bucket => (Rule::Except(&["false"]), "object lock"),
        "x-amz-storage-class" if obj => (
            Rule::Except(&["STANDARD"]),
            "a storage class other than STANDARD",
        ),
        "x-amz-server-side-encryption" if obj => (
            Rule::Any,
            "server-side encryption (objects are not encrypted at rest)",
        ),
        "x-amz-server-side-encryption-aws-kms-key-id" | "x-amz-server-side-encryption-context"
            if obj =>
        {
            (Rule::Any, "server-side encryption with KMS")
        }
        "x-amz-server-side-encryption-bucket-key-enabled" if obj => {
            (Rule::Any, "server-side encryption with an S3 bucket key")
        }
        "x-amz-tagging" if obj => (Rule::NonEmpty, "object tags"),
        "x-amz-object-lock-mode"
        | "x-amz-object-lock-retain-until-date"
        | "x-amz-object-lock-legal-hold"
            if obj =>
        {
            (Rule::Any, "object lock")
        }
        "x-amz-website-redirect-location" if obj => (Rule::Any, "a website redirect"),
        "x-amz-server-side-encryption-customer-algorithm"
        | "x-amz-server-side-encryption-customer-key"
        | "x-amz-server-side-encryption-customer-key-md5"
            if moves_bytes(op) =>
        {
            (Rule::Any, "encryption with the customer's key")
        }
        "x-amz-copy-source-server-side-encryption-customer-algorithm"
        | "x-amz-copy-source-server-side-encryption-customer-key"
        | "x-amz-copy-source-server-side-encryption-customer-key-md5"
            if matches!(op, Op::CopyObject | Op::UploadPartCopy) =>
        {
            (Rule::Any, "a source encrypted with the customer's key")
        }
        "x-amz-write-offset-bytes" if op == Op::PutObject => {
            (Rule::Any, "an append at an offset")
        }
        "x-amz-copy-source-range" if op == Op::CopyObject => (
            Rule::Any,
            "a range of the source (CopyObject copies whole objects; UploadPartCopy takes a range)",
        ),
        "x-amz-mfa" if matches!(op, Op::DeleteObject | Op::DeleteObjects) => {
            (Rule::Any, "MFA delete")
        }
        "x-amz-if-match-last-modified-time" if op == Op::DeleteObject => (
            Rule::Any,
            "a delete conditional on the modification time",
        ),
        "x-amz-if-match-size" if op == Op::DeleteObject => {
            (Rule::Any, "a delete conditional on the size")
        }
        _ => return None,
    };
    Some(r)
}

fn not_implemented(what: String) -> S3Error {
    S3Error::new(
        Code::NotImplemented,
        format!("{what} is not implemented by pktfs; nothing was done"),
    )
}

/// Refuse `op` (NotImplemented) if its headers, query or conditions ask
/// for what is not done here.
pub(super) fn check(
    op: Op,
    sh: &S3Head,
    query: &[(String, String)],
    cond: &Conditions,
) -> Result<(), S3Error> {
    // Every field counts (a repeated header too).
    for (name, v) in &sh.headers {
        if !name.starts_with("x-amz-") {
            continue;
        }
        let Some((rule, what)) = rule(op, name) else {
            continue;
        };
        let v = String::from_utf8_lossy(v);
        let v = v.trim();
        let refused = match rule {
            Rule::Any => true,
            Rule::NonEmpty => !v.is_empty(),
            Rule::Except(ok) => !ok.iter().any(|o| o.eq_ignore_ascii_case(v)),
        };
        if refused {
            return Err(not_implemented(format!("{name}: {v} ({what})")));
        }
    }
    let object_level = matches!(
        op,
        Op::PutObject
            | Op::CopyObject
            | Op::GetObject
            | Op::DeleteObject
            | Op::CreateUpload
            | Op::UploadPart
            | Op::UploadPartCopy
            | Op::CompleteUpload
            | Op::AbortUpload
            | Op::ListParts
    );
    for (n, v) in query {
        // The one version of an object in a bucket without versioning
        // is "null", as S3 names it; any other is a version not kept.
        if n == "versionId" && object_level && v != "null" {
            return Err(not_implemented(format!("versionId={v} (object versions)")));
        }
    }
    // Conditional headers where S3 defines none for a change: the change
    // would be made whatever its condition said.
    let changes = !matches!(
        op,
        Op::ListBuckets
            | Op::HeadBucket
            | Op::GetLocation
            | Op::GetVersioning
            | Op::ListObjects { .. }
            | Op::ListVersions
            | Op::GetCors
            | Op::ListUploads
            | Op::GetObject
            | Op::ListParts
    );
    if changes {
        let writes = matches!(op, Op::PutObject | Op::CopyObject | Op::CompleteUpload);
        let unserved: &[(&str, bool)] = match op {
            // If-Match, If-None-Match (`*`), If-Unmodified-Since: served.
            _ if writes => &[],
            Op::DeleteObject => &[
                ("If-None-Match", cond.if_none_match.is_some()),
                ("If-Unmodified-Since", cond.if_unmodified_since.is_some()),
            ],
            _ => &[
                ("If-Match", cond.if_match.is_some()),
                ("If-None-Match", cond.if_none_match.is_some()),
                ("If-Unmodified-Since", cond.if_unmodified_since.is_some()),
            ],
        };
        if let Some((n, _)) = unserved.iter().find(|(_, present)| *present) {
            return Err(not_implemented(format!(
                "{n} on this request (S3 defines no such condition for it)"
            )));
        }
    }
    Ok(())
}

/// Elements of a DeleteObjects body that would make a key's deletion
/// conditional or name a version: `<VersionId>` (but `null`, the one
/// version every object has, which ListObjectVersions names), `<ETag>`,
/// `<LastModifiedTime>`, `<Size>`. A key's text cannot hold a `<` (it is
/// escaped), so the byte search finds elements only.
pub(super) fn delete_objects_body(xml: &[u8]) -> Result<(), S3Error> {
    const NULL_VERSION: &[u8] = b"<VersionId>null</VersionId>";
    let mut rest = Vec::with_capacity(xml.len());
    let mut i = 0;
    while i < xml.len() {
        if xml[i..].starts_with(NULL_VERSION) {
            i += NULL_VERSION.len();
        } else {
            rest.push(xml[i]);
            i += 1;
        }
    }
    for el in ["VersionId", "ETag", "LastModifiedTime", "Size"] {
        if has_element(&rest, el) {
            return Err(not_implemented(format!(
                "<{el}> in a DeleteObjects <Object> (object versions and conditional deletes of a batch)"
            )));
        }
    }
    Ok(())
}

/// Elements of CreateBucket's configuration beyond its location: a
/// directory bucket (`<Location>`, `<Bucket>`) or bucket tags (`<Tags>`).
pub(super) fn create_bucket_body(xml: &[u8]) -> Result<(), S3Error> {
    for el in ["Location", "Bucket", "Tags"] {
        if has_element(xml, el) {
            return Err(not_implemented(format!(
                "<{el}> in CreateBucketConfiguration"
            )));
        }
    }
    Ok(())
}

/// `xml` opens an element of that local name (with or without a prefix).
fn has_element(xml: &[u8], name: &str) -> bool {
    let n = name.as_bytes();
    let mut i = 0;
    while let Some(k) = xml[i..].iter().position(|&b| b == b'<') {
        let at = i + k + 1;
        // The tag's name: up to whitespace, `>` or `/`.
        let end = xml[at..]
            .iter()
            .position(|&b| b.is_ascii_whitespace() || b == b'>' || b == b'/')
            .map_or(xml.len(), |e| at + e);
        let tag = &xml[at..end];
        let local = tag.rsplit(|&b| b == b':').next().unwrap_or(tag);
        if local == n {
            return true;
        }
        i = at;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(h: &[(&str, &str)]) -> S3Head {
        S3Head {
            target: "/b/k".into(),
            headers: h
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    #[test]
    fn rules() {
        let c = Conditions::default();
        let ok = |op, h: &[(&str, &str)]| check(op, &head(h), &[], &c).is_ok();
        assert!(ok(Op::PutObject, &[("x-amz-acl", "private")]));
        assert!(!ok(Op::PutObject, &[("x-amz-acl", "public-read")]));
        assert!(ok(Op::PutObject, &[("x-amz-storage-class", "STANDARD")]));
        assert!(!ok(Op::CreateUpload, &[("x-amz-storage-class", "GLACIER")]));
        assert!(ok(Op::PutObject, &[("x-amz-tagging", "")]));
        assert!(!ok(Op::CopyObject, &[("x-amz-tagging", "a=b")]));
        assert!(!ok(
            Op::GetObject,
            &[("x-amz-server-side-encryption-customer-algorithm", "AES256")]
        ));
        assert!(ok(Op::GetObject, &[("x-amz-storage-class", "GLACIER")]));
        assert!(!ok(
            Op::CreateBucket,
            &[("x-amz-bucket-object-lock-enabled", "true")]
        ));
        let q = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert!(check(Op::GetObject, &head(&[]), &q("versionId", "null"), &c).is_ok());
        assert!(check(Op::DeleteObject, &head(&[]), &q("versionId", "x"), &c).is_err());
        assert!(check(
            Op::GetObject,
            &head(&[]),
            &q("response-content-type", "a/b"),
            &c
        )
        .is_ok());
        let im = Conditions {
            if_match: Some(super::super::super::head::TagList::Any),
            ..Default::default()
        };
        assert!(check(Op::DeleteObject, &head(&[]), &[], &im).is_ok());
        assert!(check(Op::UploadPart, &head(&[]), &[], &im).is_err());
        assert!(check(Op::ListObjects { v2: true }, &head(&[]), &[], &im).is_ok());
    }

    #[test]
    fn elements() {
        assert!(has_element(
            b"<Delete><Object><Key>a</Key><ETag>x</ETag></Object></Delete>",
            "ETag"
        ));
        assert!(!has_element(
            b"<Delete><Object><Key>&lt;ETag&gt;</Key></Object></Delete>",
            "ETag"
        ));
        assert!(has_element(b"<a:VersionId>1</a:VersionId>", "VersionId"));
        let null = b"<Delete><Object><Key>k</Key><VersionId>null</VersionId></Object></Delete>";
        assert!(
            delete_objects_body(null).is_ok(),
            "the one version every object has"
        );
        let one = b"<Delete><Object><Key>k</Key><VersionId>3</VersionId></Object></Delete>";
        assert!(
            delete_objects_body(one).is_err(),
            "a version pktfs does not keep"
        );
        assert!(!has_element(b"<Sizes/>", "Size"));
        assert!(has_element(b"<Size/>", "Size"));
    }
}
