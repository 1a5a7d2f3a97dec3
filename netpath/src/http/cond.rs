//! Entity tags and conditional requests (RFC 9110 8.8.3, 13.2.2), free of
//! socket I/O: a transport hands in the parsed conditions and the target's
//! current state and gets the decision back.
//!
//! # The entity tag
//! `"c-<crc32c>-<size>"` (lower-case hex): the CRC32C of the whole content,
//! combined from the records' CRCs ([`pktfs_fs::Volume::content_digest`]; no
//! pass over the data), and the size. It is strong: equal tags mean equal
//! bytes up to a CRC32C collision, which the size narrows further. It
//! depends only on the content, so it survives remounts and is the same
//! for two files with the same bytes, and nothing is cached that could go
//! stale.

use pktfs_fs::{Bound, ContentDigest};

use super::head::{Conditions, Method, TagList};

/// A file's entity tag, with its quotes.
pub(crate) fn etag(d: &ContentDigest) -> String {
    let mut s = String::with_capacity(30);
    push_etag(&mut s, d);
    s
}

/// Append [`etag`]'s tag, `"c-<CRC32C, 8 hex digits>-<size in hex>"`,
/// without the formatting machinery: every upload's answer carries one.
pub(crate) fn push_etag(out: &mut String, d: &ContentDigest) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\"c-");
    for k in (0..8).rev() {
        out.push(HEX[(d.crc32c >> (4 * k)) as usize & 15] as char);
    }
    out.push('-');
    let digits = (64 - d.size.leading_zeros()).div_ceil(4).max(1);
    for k in (0..digits).rev() {
        out.push(HEX[(d.size >> (4 * k)) as usize & 15] as char);
    }
    out.push('"');
}

/// What a conditional request's target is now.
#[derive(Debug, Clone)]
pub(crate) enum Current {
    /// Nothing has that name.
    Absent,
    /// A file (regular: with its tag and modification time in seconds)
    /// or another kind of entry (tag None: matches only `*`).
    Present { etag: Option<String>, mtime_s: i64 },
}

impl Current {
    /// What the Volume saw under its locks ([`pktfs_fs::Precondition`]).
    pub(crate) fn of(b: &Bound) -> Current {
        match b {
            Bound::Absent => Current::Absent,
            Bound::Present {
                digest, mtime_ns, ..
            } => Current::Present {
                etag: digest.as_ref().map(etag),
                mtime_s: mtime_ns.div_euclid(1_000_000_000),
            },
        }
    }
}

/// A change's preconditions as the Volume checks them, under the locks
/// that make the change ([`pktfs_fs::Volume::rx_link_if`],
/// [`pktfs_fs::Volume::remove_if`]): why it refused is kept for the 412.
pub(crate) struct Guard<'h> {
    cond: &'h Conditions,
    method: Method,
    why: std::cell::Cell<&'static str>,
}

impl<'h> Guard<'h> {
    pub(crate) fn new(cond: &'h Conditions, method: Method) -> Guard<'h> {
        Guard {
            cond,
            method,
            why: std::cell::Cell::new("a precondition failed"),
        }
    }

    /// Whether the change may go ahead on `b`.
    pub(crate) fn check(&self, b: &Bound) -> bool {
        match evaluate(self.cond, self.method, &Current::of(b)) {
            Decision::PreconditionFailed(why) => {
                self.why.set(why);
                false
            }
            Decision::Proceed | Decision::NotModified => true,
        }
    }

    /// Why the last check refused.
    pub(crate) fn why(&self) -> &'static str {
        self.why.get()
    }
}

/// What to do with a request after its preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Proceed,
    /// 304 (GET/HEAD whose cached copy is current).
    NotModified,
    /// 412.
    PreconditionFailed(&'static str),
}

/// Strong comparison (If-Match): both tags strong and equal.
fn strong_match(list: &TagList, current: Option<&str>) -> bool {
    match list {
        TagList::Any => true,
        TagList::Tags(ts) => current.is_some_and(|c| ts.iter().any(|t| t == c)),
    }
}

/// Weak comparison (If-None-Match): equal after dropping `W/`.
fn weak_match(list: &TagList, current: Option<&str>) -> bool {
    match list {
        TagList::Any => true,
        TagList::Tags(ts) => current.is_some_and(|c| {
            let c = c.strip_prefix("W/").unwrap_or(c);
            ts.iter().any(|t| t.strip_prefix("W/").unwrap_or(t) == c)
        }),
    }
}

/// Evaluate the preconditions in the order of RFC 9110 13.2.2.
pub(crate) fn evaluate(c: &Conditions, method: Method, cur: &Current) -> Decision {
    let safe = matches!(method, Method::Get | Method::Head);
    let (exists, tag, mtime) = match cur {
        Current::Absent => (false, None, None),
        Current::Present { etag, mtime_s } => (true, etag.as_deref(), Some(*mtime_s)),
    };
    if let Some(m) = &c.if_match {
        if !exists || !strong_match(m, tag) {
            return Decision::PreconditionFailed("If-Match: the current version does not match");
        }
    } else if let (Some(since), Some(mtime)) = (c.if_unmodified_since, mtime) {
        if mtime > since {
            return Decision::PreconditionFailed(
                "If-Unmodified-Since: the file was modified after that time",
            );
        }
    }
    if let Some(n) = &c.if_none_match {
        if exists && weak_match(n, tag) {
            return if safe {
                Decision::NotModified
            } else if matches!(n, TagList::Any) {
                Decision::PreconditionFailed("If-None-Match: *: the name exists")
            } else {
                Decision::PreconditionFailed("If-None-Match: the current version matches")
            };
        }
    } else if let (true, Some(since), Some(mtime)) = (safe, c.if_modified_since, mtime) {
        if mtime <= since {
            return Decision::NotModified;
        }
    }
    Decision::Proceed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tag: &str, mtime_s: i64) -> Current {
        Current::Present {
            etag: Some(tag.into()),
            mtime_s,
        }
    }

    fn tags(t: &[&str]) -> Option<TagList> {
        Some(TagList::Tags(t.iter().map(|s| s.to_string()).collect()))
    }

    #[test]
    fn rfc9110_order() {
        use Decision::*;
        let f = file("\"c-1-2\"", 100);
        let any = Conditions {
            if_none_match: Some(TagList::Any),
            ..Default::default()
        };
        assert!(matches!(
            evaluate(&any, Method::Put, &f),
            PreconditionFailed(_)
        ));
        assert_eq!(evaluate(&any, Method::Put, &Current::Absent), Proceed);
        assert_eq!(evaluate(&any, Method::Get, &f), NotModified);

        let im = Conditions {
            if_match: tags(&["\"x\"", "\"c-1-2\""]),
            ..Default::default()
        };
        assert_eq!(evaluate(&im, Method::Put, &f), Proceed);
        assert!(matches!(
            evaluate(&im, Method::Put, &Current::Absent),
            PreconditionFailed(_)
        ));
        let weak = Conditions {
            if_match: tags(&["W/\"c-1-2\""]),
            ..Default::default()
        };
        assert!(matches!(
            evaluate(&weak, Method::Delete, &f),
            PreconditionFailed(_)
        ));
        let star = Conditions {
            if_match: Some(TagList::Any),
            ..Default::default()
        };
        assert_eq!(evaluate(&star, Method::Delete, &f), Proceed);

        let inm = Conditions {
            if_none_match: tags(&["W/\"c-1-2\""]),
            if_modified_since: Some(0), // ignored next to If-None-Match
            ..Default::default()
        };
        assert_eq!(evaluate(&inm, Method::Head, &f), NotModified);
        let inm_other = Conditions {
            if_none_match: tags(&["\"c-9-9\""]),
            if_modified_since: Some(1000),
            ..Default::default()
        };
        assert_eq!(evaluate(&inm_other, Method::Get, &f), Proceed);

        let ims = |s| Conditions {
            if_modified_since: Some(s),
            ..Default::default()
        };
        assert_eq!(evaluate(&ims(100), Method::Get, &f), NotModified);
        assert_eq!(evaluate(&ims(99), Method::Get, &f), Proceed);
        assert_eq!(evaluate(&ims(100), Method::Put, &f), Proceed);

        let ius = |s| Conditions {
            if_unmodified_since: Some(s),
            ..Default::default()
        };
        assert!(matches!(
            evaluate(&ius(99), Method::Put, &f),
            PreconditionFailed(_)
        ));
        assert_eq!(evaluate(&ius(100), Method::Put, &f), Proceed);
    }

    #[test]
    fn etag_format() {
        let d = ContentDigest {
            ino: 5,
            size: 255,
            mtime_ns: 0,
            crc32c: 0xab,
        };
        assert_eq!(etag(&d), "\"c-000000ab-ff\"");
    }

    #[test]
    fn etag_is_the_documented_format() {
        for (crc, size) in [
            (0u32, 0u64),
            (1, 1),
            (0xffff_ffff, u64::MAX),
            (0x1234_5678, 0x10),
            (0xdead_beef, 1 << 40),
            (7, 0xf),
        ] {
            let d = ContentDigest {
                ino: 1,
                size,
                mtime_ns: 0,
                crc32c: crc,
            };
            assert_eq!(etag(&d), format!("\"c-{crc:08x}-{size:x}\""));
        }
    }
}
