//! `s3://BUCKET/PREFIX`: where an image tiers to.

use std::fmt;
use std::str::FromStr;

/// A bucket and a key prefix (no leading or trailing slash; may be empty).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TierTarget {
    pub bucket: String,
    pub prefix: String,
}

/// Why a tier URL was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("{0:?}: a tier is given as s3://BUCKET/PREFIX")]
    Scheme(String),
    #[error("bucket name {0:?}: S3 bucket names are 3 to 63 characters of lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit")]
    Bucket(String),
    #[error("prefix {0:?}: empty path parts (//), \".\" and \"..\" are not allowed")]
    Prefix(String),
}

impl TierTarget {
    /// The full key of `rel` under the prefix.
    pub fn key(&self, rel: &str) -> String {
        if self.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.prefix)
        }
    }

    /// `key` relative to the prefix, if it is under it.
    pub fn rel<'a>(&self, key: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            Some(key)
        } else {
            key.strip_prefix(self.prefix.as_str())?.strip_prefix('/')
        }
    }
}

fn valid_bucket(b: &str) -> bool {
    let ok_chars = b
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-');
    let ends = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&b.len())
        && ok_chars
        && ends(b.bytes().next())
        && ends(b.bytes().last())
        && !b.contains("..")
}

impl FromStr for TierTarget {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<TierTarget, TargetError> {
        let rest = s
            .strip_prefix("s3://")
            .ok_or_else(|| TargetError::Scheme(s.to_string()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if !valid_bucket(bucket) {
            return Err(TargetError::Bucket(bucket.to_string()));
        }
        let prefix = prefix.trim_end_matches('/');
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(TargetError::Prefix(prefix.to_string()));
        }
        Ok(TierTarget {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }
}

impl fmt::Display for TierTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        for (s, b, p) in [
            ("s3://bucket", "bucket", ""),
            ("s3://bucket/", "bucket", ""),
            ("s3://my.bucket-1/a/b/", "my.bucket-1", "a/b"),
            ("s3://abc/pm1", "abc", "pm1"),
        ] {
            let t: TierTarget = s.parse().unwrap();
            assert_eq!((t.bucket.as_str(), t.prefix.as_str()), (b, p), "{s}");
            assert_eq!(t.to_string().parse::<TierTarget>().unwrap(), t);
        }
        let t: TierTarget = "s3://abc/p/q".parse().unwrap();
        assert_eq!(t.key("seg/01"), "p/q/seg/01");
        assert_eq!(t.rel("p/q/seg/01"), Some("seg/01"));
        assert_eq!(t.rel("p/qx/seg/01"), None);
        let t: TierTarget = "s3://abc".parse().unwrap();
        assert_eq!(t.key("seg/01"), "seg/01");
    }

    #[test]
    fn refuses_bad_input_without_panicking() {
        for s in [
            "",
            "s3:/x",
            "http://bucket/p",
            "s3://",
            "s3://ab",
            "s3://UPPER",
            "s3://-abc",
            "s3://abc-",
            "s3://a..b",
            "s3://abc//x",
            "s3://abc/./x",
            "s3://abc/../x",
            "s3://ab_c",
            "s3://é-bucket",
        ] {
            assert!(s.parse::<TierTarget>().is_err(), "{s:?} accepted");
        }
        let long = format!("s3://{}", "a".repeat(64));
        assert!(long.parse::<TierTarget>().is_err());
    }
}
