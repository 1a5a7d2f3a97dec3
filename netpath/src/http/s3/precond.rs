//! S3's preconditions, evaluated against the object's S3 ETag (the MD5
//! kept in `user.s3` while it describes the bytes, [`super::meta::etag_of`])
//! and not the plain listener's CRC tag.
//!
//! # Exact against a concurrent writer
//! The S3 ETag is an extended attribute beside the bytes, and the Volume
//! checks a precondition under the locks of a link ([`pktfs_fs::Bound`])
//! without it. So a conditional change reads the object's state first
//! (its change time, then its digest and `user.s3`: [`Snap`]), evaluates
//! S3's conditions against that, and links with a guard that requires
//! the name to lead to exactly that state still (the same inode, size,
//! CRC32C, mtime and ctime, or still nothing). Every change of the bytes
//! or of an attribute moves ctime, and the change time is read before
//! what it vouches for, so a state the guard accepts is the state the
//! conditions were evaluated against. When the guard refuses (something
//! changed in between), the state is read and the conditions evaluated
//! again, [`RETRIES`] times at most; then the answer is 409
//! ConditionalRequestConflict, as S3 answers a write that a concurrent
//! one interfered with.
//!
//! # AWS's answers
//! - Writes (PutObject, CopyObject's destination, CompleteMultipartUpload):
//!   `If-Match` (412 when the ETag differs; 404 NoSuchKey when there is no
//!   object; 409 when the object went away during the request) and
//!   `If-None-Match: *` (412 when the key exists). `If-None-Match` with
//!   anything but `*`, and the two together, are 501 NotImplemented, as S3
//!   answers them. `If-Unmodified-Since` is evaluated as RFC 9110 says
//!   (412); `If-Modified-Since` is ignored on writes, as RFC 9110 says.
//! - GetObject/HeadObject: the four conditions in RFC 9110's order, which
//!   is AWS's documented combination (If-Match true and
//!   If-Unmodified-Since false: 200; If-None-Match false and
//!   If-Modified-Since true: 304).
//! - CopyObject's and UploadPartCopy's `x-amz-copy-source-if-*`: the same
//!   evaluation against the source, every failure 412 (AWS: If-Match true
//!   and If-Unmodified-Since false copies; If-None-Match false and
//!   If-Modified-Since true is 412).
//! - DeleteObject's `If-Match`: 412 when the ETag differs; a missing key
//!   is 204, as S3 answers.
//!
//! ETags are compared without their quotes (clients send both forms); a
//! weak tag (`W/"..."`) never matches a strong comparison.

use pktfs_fs::{Attr, Bound, ContentDigest, FileType, FsError, Linked, RxPiece, TmpFile};
use pktfs_s3::error::{Code, S3Error};

use super::super::cond::{evaluate, Current, Decision};
use super::super::files::LinkError;
use super::super::head::{Conditions, Head, Method, TagList};
use super::meta::{etag_of, ObjectMeta};
use super::Ctx;
use super::{fs_error, S3Head};

/// Reads of the target after a guard refused, before 409.
pub(super) const RETRIES: usize = 8;

fn err(code: Code, msg: impl Into<String>) -> S3Error {
    S3Error::new(code, msg)
}

/// An entity tag as S3 compares it: without its quotes. A weak tag keeps
/// its `W/` (and so matches no strong comparison).
pub(super) fn bare(tag: &str) -> &str {
    let t = tag.trim();
    match t.strip_prefix("W/") {
        Some(_) => t,
        None => t.trim_matches('"'),
    }
}

/// `list` with every tag bare (`weak`: weak tags lose their `W/` too, for
/// If-None-Match's weak comparison).
fn bare_list(list: &TagList, weak: bool) -> TagList {
    match list {
        TagList::Any => TagList::Any,
        TagList::Tags(ts) => TagList::Tags(
            ts.iter()
                .map(|t| {
                    let t = t.trim();
                    let t = if weak {
                        t.strip_prefix("W/").unwrap_or(t)
                    } else {
                        t
                    };
                    bare(t).to_string()
                })
                .collect(),
        ),
    }
}

/// `c` with bare tags, for comparison with a bare ETag.
fn bare_conditions(c: &Conditions) -> Conditions {
    Conditions {
        if_match: c.if_match.as_ref().map(|l| bare_list(l, false)),
        if_none_match: c.if_none_match.as_ref().map(|l| bare_list(l, true)),
        ..c.clone()
    }
}

/// GET/HEAD's conditions as the shared handler compares them (with the
/// quoted S3 ETag): None when they are already quoted, else with every
/// tag quoted.
pub(super) fn quoted_for_get(c: &Conditions) -> Option<Conditions> {
    let needs = |l: &Option<TagList>| match l {
        Some(TagList::Tags(ts)) => ts.iter().any(|t| {
            let t = t.trim();
            !(t.starts_with('"') || t.starts_with("W/"))
        }),
        _ => false,
    };
    if !needs(&c.if_match) && !needs(&c.if_none_match) {
        return None;
    }
    let quote = |l: &Option<TagList>| {
        l.as_ref().map(|l| match l {
            TagList::Any => TagList::Any,
            TagList::Tags(ts) => TagList::Tags(
                ts.iter()
                    .map(|t| {
                        let t = t.trim();
                        if t.starts_with('"') || t.starts_with("W/") {
                            t.to_string()
                        } else {
                            format!("\"{t}\"")
                        }
                    })
                    .collect(),
            ),
        })
    };
    Some(Conditions {
        if_match: quote(&c.if_match),
        if_none_match: quote(&c.if_none_match),
        ..c.clone()
    })
}

/// What a name led to when it was read for a conditional request.
#[derive(Debug, Clone)]
pub(super) enum Snap {
    Absent,
    /// A regular file: its content digest (inode, size, mtime, CRC32C),
    /// its change time, read before the rest, and its S3 ETag (quoted)
    /// and metadata as they were then.
    File {
        digest: ContentDigest,
        ctime_ns: i64,
        etag: String,
        meta: Option<Box<ObjectMeta>>,
    },
    /// Another kind of entry (a directory: a prefix of other keys), by
    /// its change time.
    Other {
        ctime_ns: i64,
    },
}

impl Snap {
    /// The state of the entry `a` (read first: its ctime vouches for
    /// what is read after it).
    pub fn of(vol: &pktfs_fs::Volume, a: &Attr) -> Result<Snap, FsError> {
        if a.kind != FileType::Regular {
            return Ok(Snap::Other {
                ctime_ns: a.ctime_ns,
            });
        }
        let digest = vol.content_digest(a.ino)?;
        let (etag, meta) = etag_of(vol, &digest);
        Ok(Snap::File {
            digest,
            ctime_ns: a.ctime_ns,
            etag,
            meta: meta.map(Box::new),
        })
    }

    /// Does the Volume, under the locks of a change, see exactly this?
    pub fn is(&self, b: &Bound) -> bool {
        match (self, b) {
            (Snap::Absent, Bound::Absent) => true,
            (
                Snap::File {
                    digest, ctime_ns, ..
                },
                Bound::Present {
                    digest: Some(d),
                    mtime_ns,
                    ctime_ns: c,
                },
            ) => d == digest && *mtime_ns == digest.mtime_ns && c == ctime_ns,
            (
                Snap::Other { ctime_ns },
                Bound::Present {
                    digest: None,
                    ctime_ns: c,
                    ..
                },
            ) => c == ctime_ns,
            _ => false,
        }
    }

    /// As the shared evaluation takes it: the bare S3 ETag.
    fn current(&self) -> Current {
        match self {
            Snap::Absent => Current::Absent,
            Snap::File { digest, etag, .. } => Current::Present {
                etag: Some(bare(etag).to_string()),
                mtime_s: digest.mtime_ns.div_euclid(1_000_000_000),
            },
            Snap::Other { .. } => Current::Present {
                etag: None,
                mtime_s: 0,
            },
        }
    }
}

/// A write's S3 preconditions (PutObject, CopyObject's destination,
/// CompleteMultipartUpload).
#[derive(Debug, Clone)]
pub(super) struct WriteCond {
    /// If-Match, bare.
    if_match: Option<TagList>,
    /// If-None-Match: *.
    absent: bool,
    if_unmodified_since: Option<i64>,
}

impl WriteCond {
    /// The write preconditions of `h`, None when it has none. Refused as
    /// S3 refuses them: If-None-Match other than `*`, and If-Match with
    /// If-None-Match, are NotImplemented.
    pub fn of(h: &Head) -> Result<Option<WriteCond>, S3Error> {
        let c = &h.cond;
        let absent =
            match &c.if_none_match {
                None => false,
                Some(TagList::Any) => true,
                Some(TagList::Tags(_)) => return Err(err(
                    Code::NotImplemented,
                    "If-None-Match on a write takes only `*` (S3 compares no other value there)",
                )),
            };
        if absent && c.if_match.is_some() {
            return Err(err(
                Code::NotImplemented,
                "If-Match and If-None-Match together on a write",
            ));
        }
        if c.if_match.is_none() && !absent && c.if_unmodified_since.is_none() {
            return Ok(None);
        }
        Ok(Some(WriteCond {
            if_match: c.if_match.as_ref().map(|l| bare_list(l, false)),
            absent,
            if_unmodified_since: c.if_unmodified_since,
        }))
    }

    /// Evaluate against `s`. `again`: the request saw the name in another
    /// state before (a first look, or a guard that refused), so an object
    /// gone since is a conflict (409), not a missing key (404).
    pub fn check(&self, s: &Snap, again: bool) -> Result<(), S3Error> {
        if self.if_match.is_some() && matches!(s, Snap::Absent) {
            return Err(if again {
                err(
                    Code::ConditionalRequestConflict,
                    "If-Match: the object was removed while this request was served",
                )
            } else {
                err(Code::NoSuchKey, "If-Match: there is no object of that key")
            });
        }
        let c = Conditions {
            if_match: self.if_match.clone(),
            if_none_match: self.absent.then_some(TagList::Any),
            if_modified_since: None,
            if_unmodified_since: self.if_unmodified_since,
        };
        match evaluate(&c, Method::Put, &s.current()) {
            Decision::Proceed => Ok(()),
            Decision::NotModified | Decision::PreconditionFailed(_) => {
                let why = if self.absent {
                    "If-None-Match: *: an object of that key exists"
                } else if self.if_match.is_some() {
                    "If-Match: the object's ETag is not one of those given"
                } else {
                    "If-Unmodified-Since: the object was modified after that time"
                };
                Err(err(Code::PreconditionFailed, why))
            }
        }
    }
}

/// The `x-amz-copy-source-if-*` fields of a copy (dates that do not parse
/// are ignored, as RFC 9110 says of If-Modified-Since).
pub(super) fn copy_source_conditions(sh: &S3Head) -> Conditions {
    let tags = |name: &str| {
        sh.header(name).map(|v| {
            if v == "*" {
                TagList::Any
            } else {
                TagList::Tags(
                    v.split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect(),
                )
            }
        })
    };
    let date = |name: &str| {
        let t = httpdate::parse_http_date(sh.header(name)?).ok()?;
        let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
        i64::try_from(d.as_secs()).ok()
    };
    Conditions {
        if_match: tags("x-amz-copy-source-if-match"),
        if_none_match: tags("x-amz-copy-source-if-none-match"),
        if_modified_since: date("x-amz-copy-source-if-modified-since"),
        if_unmodified_since: date("x-amz-copy-source-if-unmodified-since"),
    }
}

/// A copy's source conditions against the source `s`: S3 answers every
/// failure 412 (no 304 for a copy).
pub(super) fn check_copy_source(c: &Conditions, s: &Snap) -> Result<(), S3Error> {
    if !c.any() {
        return Ok(());
    }
    // Evaluated as a read of the source (If-Modified-Since counts), the
    // read's "not modified" being the copy's failure.
    match evaluate(&bare_conditions(c), Method::Get, &s.current()) {
        Decision::Proceed => Ok(()),
        Decision::NotModified | Decision::PreconditionFailed(_) => Err(err(
            Code::PreconditionFailed,
            "an x-amz-copy-source-if-* condition does not hold for the source",
        )),
    }
}

/// DeleteObject's `If-Match` against `s`: a missing key is no failure
/// (S3 answers 204), another ETag is.
pub(super) fn check_delete(c: &Conditions, s: &Snap) -> Result<(), S3Error> {
    let Some(m) = &c.if_match else {
        return Ok(());
    };
    if matches!(s, Snap::Absent) {
        return Ok(());
    }
    let c = Conditions {
        if_match: Some(bare_list(m, false)),
        ..Default::default()
    };
    match evaluate(&c, Method::Delete, &s.current()) {
        Decision::Proceed => Ok(()),
        _ => Err(err(
            Code::PreconditionFailed,
            "If-Match: the object's ETag is not one of those given",
        )),
    }
}

impl<'a> Ctx<'_, 'a> {
    /// What the request's path leads to now ([`Snap`]).
    pub(super) fn s3_target_snap(&self) -> Result<Snap, S3Error> {
        for _ in 0..RETRIES {
            match self.resolve(self.path.len()) {
                Ok(a) => match Snap::of(self.vol, &a) {
                    Ok(s) => return Ok(s),
                    // Removed between the two reads: look again.
                    Err(FsError::NotFound) => continue,
                    Err(e) => return Err(fs_error(&e, &self.path.display().to_string())),
                },
                Err(FsError::NotFound | FsError::NotDir) => return Ok(Snap::Absent),
                Err(FsError::Access) => {
                    return Err(err(Code::AccessDenied, self.walk_denied(self.path.len())))
                }
                Err(e) => return Err(fs_error(&e, &self.path.display().to_string())),
            }
        }
        Err(err(Code::SlowDown, "the object keeps changing; try again"))
    }

    /// Name `tmp` at the request's path, replacing what is there: at
    /// once without `cond`; with it, under S3's preconditions evaluated
    /// against the object's S3 ETag and a guard that the object is still
    /// what they were evaluated against (module docs). `looked`: the
    /// request evaluated them before (ahead of its body), so an object
    /// gone since is a conflict. The body's last pieces (`tail`) go with
    /// the link, or are committed first when the link may be tried more
    /// than once.
    pub(super) fn s3_link(
        &mut self,
        tmp: &mut TmpFile<'a>,
        tail: Vec<RxPiece<'a>>,
        cond: Option<&WriteCond>,
        looked: bool,
    ) -> Result<Linked<'a>, S3Error> {
        let status = |code: u16, msg: String| S3Error::new(super::code_of_status(code), msg);
        let Some(c) = cond else {
            return match self.link_named(tmp, tail, true, None) {
                Ok((l, _)) => Ok(l),
                Err(LinkError::Status(code, msg)) => Err(status(code, msg)),
                Err(LinkError::Exists | LinkError::Precondition) => Err(err(
                    Code::InternalError,
                    "an unconditional link was refused",
                )),
            };
        };
        // A refused link spends its tail: it goes in first.
        if !tail.is_empty() {
            tmp.commit(tail)
                .map_err(|e| fs_error(&e, "storing the body's last pieces"))?;
        }
        for k in 0..RETRIES {
            let snap = self.s3_target_snap()?;
            c.check(&snap, looked || k > 0)?;
            let guard = |b: &Bound| snap.is(b);
            match self.link_named(tmp, Vec::new(), true, Some(&guard)) {
                Ok((l, _)) => return Ok(l),
                // Changed since it was read: read and evaluate again.
                Err(LinkError::Precondition) => continue,
                Err(LinkError::Status(code, msg)) => return Err(status(code, msg)),
                Err(LinkError::Exists) => {
                    return Err(err(Code::InternalError, "a replacing link was refused"))
                }
            }
        }
        Err(err(
            Code::ConditionalRequestConflict,
            "the object kept changing while the request's preconditions were checked; retry it",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(etag: &str, mtime_s: i64) -> Snap {
        Snap::File {
            digest: ContentDigest {
                ino: 9,
                size: 3,
                mtime_ns: mtime_s * 1_000_000_000,
                crc32c: 1,
            },
            ctime_ns: 5,
            etag: etag.into(),
            meta: None,
        }
    }

    fn tags(t: &[&str]) -> Option<TagList> {
        Some(TagList::Tags(t.iter().map(|s| s.to_string()).collect()))
    }

    #[test]
    fn write_conditions_as_s3_answers_them() {
        let f = file("\"abc\"", 100);
        let im = WriteCond {
            if_match: Some(bare_list(&TagList::Tags(vec!["abc".into()]), false)),
            absent: false,
            if_unmodified_since: None,
        };
        assert!(im.check(&f, false).is_ok());
        assert_eq!(
            im.check(&Snap::Absent, false).unwrap_err().code,
            Code::NoSuchKey
        );
        assert_eq!(
            im.check(&Snap::Absent, true).unwrap_err().code,
            Code::ConditionalRequestConflict
        );
        assert_eq!(
            im.check(&file("\"abd\"", 100), false).unwrap_err().code,
            Code::PreconditionFailed
        );
        let quoted = WriteCond {
            if_match: Some(bare_list(&TagList::Tags(vec!["\"abc\"".into()]), false)),
            ..im.clone()
        };
        assert!(quoted.check(&f, false).is_ok());
        let weak = WriteCond {
            if_match: Some(bare_list(&TagList::Tags(vec!["W/\"abc\"".into()]), false)),
            ..im.clone()
        };
        assert!(weak.check(&f, false).is_err());
        let none = WriteCond {
            if_match: None,
            absent: true,
            if_unmodified_since: None,
        };
        assert!(none.check(&Snap::Absent, false).is_ok());
        assert_eq!(
            none.check(&f, false).unwrap_err().code,
            Code::PreconditionFailed
        );
    }

    #[test]
    fn copy_source_combinations_as_aws_documents_them() {
        let f = file("\"abc\"", 100);
        let c = |m, n, ims, ius| Conditions {
            if_match: m,
            if_none_match: n,
            if_modified_since: ims,
            if_unmodified_since: ius,
        };
        // If-Match true, If-Unmodified-Since false: copied.
        assert!(check_copy_source(&c(tags(&["abc"]), None, None, Some(50)), &f).is_ok());
        // If-None-Match false, If-Modified-Since true: 412.
        assert!(check_copy_source(&c(None, tags(&["\"abc\""]), Some(50), None), &f).is_err());
        // Each alone.
        assert!(check_copy_source(&c(tags(&["x"]), None, None, None), &f).is_err());
        assert!(check_copy_source(&c(None, tags(&["x"]), None, None), &f).is_ok());
        assert!(check_copy_source(&c(None, None, Some(100), None), &f).is_err());
        assert!(check_copy_source(&c(None, None, Some(99), None), &f).is_ok());
        assert!(check_copy_source(&c(None, None, None, Some(99)), &f).is_err());
        assert!(check_copy_source(&c(None, None, None, Some(100)), &f).is_ok());
        assert!(check_copy_source(&c(Some(TagList::Any), None, None, None), &f).is_ok());
        assert!(check_copy_source(&c(None, Some(TagList::Any), None, None), &f).is_err());
    }

    #[test]
    fn the_guard_wants_exactly_the_state_read() {
        let f = file("\"abc\"", 100);
        let Snap::File { digest, .. } = &f else {
            unreachable!()
        };
        let same = Bound::Present {
            digest: Some(*digest),
            mtime_ns: digest.mtime_ns,
            ctime_ns: 5,
        };
        assert!(f.is(&same));
        let touched = Bound::Present {
            digest: Some(*digest),
            mtime_ns: digest.mtime_ns,
            ctime_ns: 6,
        };
        assert!(!f.is(&touched), "an attribute changed: ctime moved");
        assert!(!f.is(&Bound::Absent));
        assert!(Snap::Absent.is(&Bound::Absent));
        assert!(!Snap::Absent.is(&same));
    }

    #[test]
    fn get_tags_are_quoted_for_the_shared_handler() {
        let c = Conditions {
            if_match: tags(&["abc", "\"d\""]),
            ..Default::default()
        };
        let q = quoted_for_get(&c).unwrap();
        assert_eq!(q.if_match, tags(&["\"abc\"", "\"d\""]));
        let already = Conditions {
            if_none_match: tags(&["\"abc\""]),
            ..Default::default()
        };
        assert!(quoted_for_get(&already).is_none());
    }
}
