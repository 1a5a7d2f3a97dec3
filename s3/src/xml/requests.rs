//! The request bodies S3 clients send: CompleteMultipartUpload,
//! DeleteObjects (`POST ?delete`) and CreateBucket's configuration.

use super::parse::{walk, Step, XmlError};
use crate::checksum::{Algorithm, MAX_PARTS};

/// Most keys one DeleteObjects request may name (S3's limit).
pub const MAX_DELETE_KEYS: usize = 1_000;

/// A part as CompleteMultipartUpload lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletePart {
    /// The part number, 1 to 10,000.
    pub number: u32,
    /// The ETag as the client sent it, trimmed (quoted or not; compare with
    /// [`crate::checksum::etag_md5`]).
    pub etag: String,
    /// The part checksums the client sent, base64 as sent (trimmed; check
    /// them with [`crate::checksum::Value::parse`]).
    pub checksums: Vec<(Algorithm, String)>,
}

type PartSoFar = (Option<u32>, Option<String>, Vec<(Algorithm, String)>);

/// Reads a CompleteMultipartUpload body: its `<Part>`s in the order sent
/// (the endpoint checks they ascend: InvalidPartOrder). At least one part
/// and at most 10,000; each needs a `<PartNumber>` in 1..=10000 and an
/// `<ETag>`.
pub fn parse_complete(body: &[u8]) -> Result<Vec<CompletePart>, XmlError> {
    let mut parts = Vec::new();
    // The <Part> being read: its number, ETag and checksums so far.
    let mut cur: Option<PartSoFar> = None;
    walk(body, "CompleteMultipartUpload", |step| {
        match step {
            Step::Open {
                depth: 1,
                name: "Part",
            } => {
                if parts.len() >= MAX_PARTS {
                    return Err(XmlError::TooMany {
                        what: "Part",
                        max: MAX_PARTS,
                    });
                }
                cur = Some((None, None, Vec::new()));
            }
            Step::Close {
                depth: 2,
                name,
                text,
            } => {
                let Some((number, etag, checksums)) = cur.as_mut() else {
                    return Ok(());
                };
                if name == "PartNumber" {
                    let t = text.trim();
                    let n = t
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_PARTS as u32).contains(n))
                        .ok_or_else(|| {
                            XmlError::Invalid(format!(
                                "<PartNumber>{t}</PartNumber>: a part number is 1 to {MAX_PARTS}"
                            ))
                        })?;
                    *number = Some(n);
                } else if name == "ETag" {
                    *etag = Some(text.trim().to_owned());
                } else if let Some(alg) = Algorithm::from_xml_name(name) {
                    if checksums.iter().any(|(a, _)| *a == alg) {
                        return Err(XmlError::Invalid(format!(
                            "a <Part> has two <{name}> elements"
                        )));
                    }
                    checksums.push((alg, text.trim().to_owned()));
                }
            }
            Step::Close {
                depth: 1,
                name: "Part",
                ..
            } => {
                let (number, etag, checksums) = cur.take().unwrap_or_default();
                let number = number
                    .ok_or_else(|| XmlError::Invalid("a <Part> has no <PartNumber>".into()))?;
                let etag =
                    etag.ok_or_else(|| XmlError::Invalid(format!("part {number} has no <ETag>")))?;
                parts.push(CompletePart {
                    number,
                    etag,
                    checksums,
                });
            }
            _ => {}
        }
        Ok(())
    })?;
    if parts.is_empty() {
        return Err(XmlError::Invalid(
            "CompleteMultipartUpload lists no <Part>; at least one is needed".into(),
        ));
    }
    Ok(parts)
}

/// A DeleteObjects request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteRequest {
    /// The keys, as sent (not trimmed: spaces are part of keys).
    pub keys: Vec<String>,
    /// `<Quiet>true</Quiet>`: answer only the errors.
    pub quiet: bool,
}

/// Reads a DeleteObjects body: 1 to 1,000 `<Object>`s, each with a
/// `<Key>` (`<VersionId>` and `<ETag>` are ignored), and an optional
/// `<Quiet>` of `true` or `false`.
pub fn parse_delete(body: &[u8]) -> Result<DeleteRequest, XmlError> {
    let mut keys = Vec::new();
    let mut quiet = false;
    let mut cur: Option<Option<String>> = None;
    walk(body, "Delete", |step| {
        match step {
            Step::Open {
                depth: 1,
                name: "Object",
            } => {
                if keys.len() >= MAX_DELETE_KEYS {
                    return Err(XmlError::TooMany {
                        what: "Object",
                        max: MAX_DELETE_KEYS,
                    });
                }
                cur = Some(None);
            }
            Step::Close {
                depth: 2,
                name: "Key",
                text,
            } => {
                if let Some(k) = cur.as_mut() {
                    *k = Some(text.to_owned());
                }
            }
            Step::Close {
                depth: 1,
                name: "Object",
                ..
            } => {
                let key = cur
                    .take()
                    .flatten()
                    .ok_or_else(|| XmlError::Invalid("an <Object> has no <Key>".into()))?;
                keys.push(key);
            }
            Step::Close {
                depth: 1,
                name: "Quiet",
                text,
            } => {
                quiet = match text.trim() {
                    t if t.eq_ignore_ascii_case("true") => true,
                    t if t.eq_ignore_ascii_case("false") => false,
                    t => {
                        return Err(XmlError::Invalid(format!(
                            "<Quiet>{t}</Quiet>: Quiet is true or false"
                        )))
                    }
                };
            }
            _ => {}
        }
        Ok(())
    })?;
    if keys.is_empty() {
        return Err(XmlError::Invalid(
            "Delete lists no <Object>; at least one is needed".into(),
        ));
    }
    Ok(DeleteRequest { keys, quiet })
}

/// Reads CreateBucket's optional body: the `<LocationConstraint>` of a
/// `<CreateBucketConfiguration>`. An empty body (or only whitespace), or
/// an empty constraint, is `Ok(None)`.
pub fn parse_create_bucket(body: &[u8]) -> Result<Option<String>, XmlError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut location = None;
    walk(body, "CreateBucketConfiguration", |step| {
        if let Step::Close {
            depth: 1,
            name: "LocationConstraint",
            text,
        } = step
        {
            let t = text.trim();
            location = (!t.is_empty()).then(|| t.to_owned());
        }
        Ok(())
    })?;
    Ok(location)
}
