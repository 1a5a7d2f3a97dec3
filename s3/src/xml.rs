//! S3's XML bodies: the answers written and the request bodies read.
//!
//! Answers begin with `<?xml version="1.0" encoding="UTF-8"?>` and, except
//! `<Error>`, put their root in S3's namespace
//! (`http://s3.amazonaws.com/doc/2006-03-01/`). Text is escaped so any key
//! reads back as it was (see [`escape_into`]); listings URL-encode keys
//! instead when a client asks with `encoding-type=url`. Times are ISO 8601
//! with milliseconds ([`iso8601`]).
//!
//! Request bodies are read with quick-xml, bounded in size, depth and list
//! length (see [`MAX_BODY_BYTES`]); anything malformed is an [`XmlError`],
//! which S3 answers as MalformedXML.

mod answers;
mod list;
mod multipart;
pub(crate) mod parse;
mod requests;
mod time;
pub(crate) mod writer;

pub use answers::{copy_object, copy_part, delete_result, error, location};
pub use list::{
    list_buckets, list_object_versions, list_objects_v1, list_objects_v2, Bucket, BucketsPage,
    ListV1, ListV2, Object, Owner,
};
pub use multipart::{
    complete_multipart, initiate_multipart, list_multipart_uploads, list_parts, Part, Upload,
};
pub use parse::{XmlError, MAX_BODY_BYTES, MAX_DEPTH};
pub use requests::{
    parse_complete, parse_create_bucket, parse_delete, CompletePart, DeleteRequest, MAX_DELETE_KEYS,
};
pub use time::iso8601;
pub use writer::{escape_into, DECLARATION, S3_NS};

#[cfg(test)]
mod tests;
