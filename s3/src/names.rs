//! Bucket names, object keys as pktfs paths, and the percent-encoding of
//! URLs and query strings.
//!
//! Buckets are top-level directories of the volume and keys are paths
//! under them, so a key must also be a path: [`key_path`] refuses what a
//! file system cannot name (empty segments, `.`, `..`, NUL, segments over
//! 255 bytes), besides S3's own limit of 1,024 bytes.
//!
//! `+` in a query string is a space: [`parse_query`] decodes it so, as
//! MinIO (Go's `url.ParseQuery`) and Ceph RGW (`url_decode` of a query)
//! do. Real clients do not depend on the difference: the SDKs, the AWS CLI
//! and rclone encode with AWS's UriEncode ([`uri_encode`]), which sends a
//! space as `%20` and a plus as `%2B`, and SigV4 signs that encoding. In a
//! path, `+` stays a plus ([`percent_decode`]).

mod error;

pub use error::NameError;

/// Longest key S3 accepts, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;

/// Longest path segment (one file name), in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Most `name=value` pairs [`parse_query`] reads. S3's requests carry a
/// dozen at most (a presigned URL's eight `X-Amz-*`, a listing's options,
/// the `response-*` overrides).
pub const MAX_QUERY_PAIRS: usize = 128;

/// Prefixes S3 reserves (bucket naming rules).
const RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];

/// Suffixes S3 reserves for access point aliases, Multi-Region Access
/// Points, directory buckets and table buckets.
const RESERVED_SUFFIXES: [&str; 5] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"];

/// Checks S3's rules for a general purpose bucket name: 3 to 63
/// characters of `a-z`, `0-9`, `.` and `-`, beginning and ending with a
/// letter or digit, no `..`, not formatted as an IPv4 address, none of
/// the reserved prefixes (`xn--`, `sthree-`, `amzn-s3-demo-`) or
/// suffixes (`-s3alias`, `--ol-s3`, `.mrap`, `--x-s3`, `--table-s3`).
pub fn valid_bucket(name: &str) -> Result<(), NameError> {
    let bad = |why: String| {
        Err(NameError::Bucket {
            name: name.chars().take(80).collect(),
            why,
        })
    };
    if !(3..=63).contains(&name.len()) {
        return bad(format!(
            "it is {} bytes long; a bucket name is 3 to 63 characters",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '.' || *c == '-'))
    {
        return bad(format!(
            "it contains {c:?}; only lowercase letters, digits, '.' and '-' are allowed"
        ));
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = name.as_bytes();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return bad("it must begin and end with a letter or digit".into());
    }
    if name.contains("..") {
        return bad("it contains two adjacent periods".into());
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() == 4
        && labels
            .iter()
            .all(|l| (1..=3).contains(&l.len()) && l.bytes().all(|b| b.is_ascii_digit()))
    {
        return bad("it is formatted as an IP address".into());
    }
    if let Some(p) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return bad(format!("the prefix {p:?} is reserved"));
    }
    if let Some(s) = RESERVED_SUFFIXES.iter().find(|s| name.ends_with(*s)) {
        return bad(format!("the suffix {s:?} is reserved"));
    }
    Ok(())
}

/// An object key as pktfs path segments under the bucket's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath<'a> {
    /// The path's segments, in order (never empty).
    pub segments: Vec<&'a str>,
    /// The key ended with `/`: it names a directory (S3 tools make such
    /// "folder" objects).
    pub dir_marker: bool,
}

/// Maps a key to path segments. Refused, with a reason for
/// InvalidArgument or KeyTooLongError: an empty key, a key over 1,024
/// bytes, NUL, a segment that is empty (`a//b`, a leading `/`), `.` or
/// `..`, or over 255 bytes. A trailing `/` marks a directory.
pub fn key_path(key: &str) -> Result<KeyPath<'_>, NameError> {
    if key.is_empty() {
        return Err(NameError::KeyEmpty);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(NameError::KeyTooLong {
            len_bytes: key.len(),
        });
    }
    if key.contains('\0') {
        return Err(NameError::KeyNul);
    }
    let (path, dir_marker) = match key.strip_suffix('/') {
        Some(p) => (p, true),
        None => (key, false),
    };
    let mut segments = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" => return Err(NameError::KeyEmptySegment { key: key.into() }),
            "." | ".." => {
                return Err(NameError::KeyDotSegment {
                    key: key.into(),
                    segment: seg.into(),
                })
            }
            s if s.len() > MAX_SEGMENT_BYTES => {
                return Err(NameError::KeySegmentTooLong { len_bytes: s.len() })
            }
            s => segments.push(s),
        }
    }
    Ok(KeyPath {
        segments,
        dir_marker,
    })
}

/// Percent-decodes `s`, `+` as a space if `plus_is_space`.
fn decode(s: &str, plus_is_space: bool) -> Result<String, NameError> {
    let b = s.as_bytes();
    let out = crate::percent::decode(b, plus_is_space).map_err(|e| {
        let end = (e.at + 3).min(b.len());
        NameError::BadEscape {
            at: e.at,
            escape: String::from_utf8_lossy(&b[e.at..end]).into_owned(),
        }
    })?;
    String::from_utf8(out.into_owned()).map_err(|_| NameError::NotUtf8)
}

/// Percent-decodes a URL path or one of its parts: `%XX` is the byte XX
/// (a `%` not followed by two hex digits is an error), the result must be
/// UTF-8. `+` is left a plus.
pub fn percent_decode(s: &str) -> Result<String, NameError> {
    decode(s, false)
}

/// Appends `s` encoded as AWS's UriEncode does (SigV4, and S3's
/// `encoding-type=url`): `A-Z a-z 0-9 - . _ ~` as they are, `/` as it is
/// unless `encode_slash`, every other byte of the UTF-8 as `%XX` with
/// upper-case hex (so a space is `%20`, never `+`).
pub fn uri_encode(s: &str, encode_slash: bool, out: &mut String) {
    out.push_str(&crate::percent::uri_encode(s.as_bytes(), !encode_slash));
}

/// A raw query string (what follows `?`, without it) as decoded
/// `(name, value)` pairs in order. `a` alone and `a=` both give an empty
/// value; empty pieces (`a=1&&b=2`) are skipped; `+` is a space (see the
/// module's note); a malformed escape, a result that is not UTF-8 or more
/// than [`MAX_QUERY_PAIRS`] pairs is an error.
pub fn parse_query(raw: &str) -> Result<Vec<(String, String)>, NameError> {
    let mut pairs = Vec::new();
    for piece in raw.split('&').filter(|p| !p.is_empty()) {
        if pairs.len() == MAX_QUERY_PAIRS {
            return Err(NameError::TooManyQueryPairs {
                max: MAX_QUERY_PAIRS,
            });
        }
        let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
        pairs.push((decode(name, true)?, decode(value, true)?));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests;
