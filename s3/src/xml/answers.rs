//! The small answers: errors, bucket location, CopyObject, DeleteObjects.

use super::writer::Doc;
use crate::checksum::Algorithm;
use crate::error::{Code, S3Error};

/// An error answer's body. `<Error>` is the one S3 body without the
/// namespace.
pub fn error(code: &str, message: &str, resource: &str, request_id: &str) -> String {
    let mut d = Doc::new("Error", false);
    d.text("Code", code)
        .text("Message", message)
        .text("Resource", resource)
        .text("RequestId", request_id);
    d.finish()
}

impl S3Error {
    /// The error's XML body ([`error`]), for `resource` (the request's
    /// path) and the request's ID.
    pub fn to_xml(&self, resource: &str, request_id: &str) -> String {
        error(self.code.as_str(), &self.message, resource, request_id)
    }
}

/// GetBucketLocation: `<LocationConstraint>` with the region, empty for
/// us-east-1 (S3's answer for that region, which clients expect).
pub fn location(region: &str) -> String {
    let mut out = String::from(super::writer::DECLARATION);
    out.push_str("<LocationConstraint xmlns=\"");
    out.push_str(super::S3_NS);
    out.push('"');
    if region.is_empty() || region == "us-east-1" {
        out.push_str("/>");
    } else {
        out.push('>');
        super::writer::escape_into(&mut out, region);
        out.push_str("</LocationConstraint>");
    }
    out
}

/// CopyObject's answer: the new object's ETag (quoted), time and
/// checksums.
pub fn copy_object(
    etag: &str,
    last_modified_unix_ns: i64,
    checksums: &[(Algorithm, String)],
) -> String {
    copy_result("CopyObjectResult", etag, last_modified_unix_ns, checksums)
}

/// UploadPartCopy's answer: the same fields as CopyObject's under
/// `<CopyPartResult>`.
pub fn copy_part(
    etag: &str,
    last_modified_unix_ns: i64,
    checksums: &[(Algorithm, String)],
) -> String {
    copy_result("CopyPartResult", etag, last_modified_unix_ns, checksums)
}

fn copy_result(
    root: &'static str,
    etag: &str,
    last_modified_unix_ns: i64,
    checksums: &[(Algorithm, String)],
) -> String {
    let mut d = Doc::new(root, true);
    d.text("ETag", etag)
        .time("LastModified", last_modified_unix_ns)
        .checksums(checksums);
    d.finish()
}

/// DeleteObjects' answer: a `<Deleted>` per key deleted (none in quiet
/// mode, as S3 does) and an `<Error>` per key refused, with its code and
/// message.
pub fn delete_result(deleted: &[String], errors: &[(String, Code, String)], quiet: bool) -> String {
    let mut d = Doc::new("DeleteResult", true);
    if !quiet {
        for key in deleted {
            d.open("Deleted").text("Key", key).close("Deleted");
        }
    }
    for (key, code, message) in errors {
        d.open("Error")
            .text("Key", key)
            .text("Code", code.as_str())
            .text("Message", message)
            .close("Error");
    }
    d.finish()
}
