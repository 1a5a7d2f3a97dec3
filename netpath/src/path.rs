//! Request targets to paths inside the served tree.
//!
//! A target is split on `/` and each segment percent-decoded. Anything that
//! could leave the tree or confuse the name space is refused (400): `.` and
//! `..` segments (also percent-encoded), encoded slashes (`%2F`), empty
//! segments (`//`, anywhere but a trailing `/`), NUL and other control
//! bytes, malformed escapes, names over 255 bytes, paths over 4096 bytes.
//! An empty segment names nothing, and read as absent it made two targets
//! one (`//bucket/key` was S3's ListBuckets); a trailing `/` is ignored (a
//! directory's listing, an S3 directory marker). The query (`?...`) and
//! fragment are dropped. Symlinks are never followed by the servers (a
//! symlink in the middle of a path is "not found").

/// Longest name (one segment), as the Volume allows.
pub const NAME_MAX: usize = 255;
/// Longest decoded path.
pub const PATH_MAX: usize = 4096;

/// A decoded path: the bytes of all segments back to back, and each
/// segment's range. Reused between requests (no allocation per request).
#[derive(Debug, Default, Clone)]
pub struct ReqPath {
    bytes: Vec<u8>,
    segs: Vec<(usize, usize)>,
}

impl ReqPath {
    pub fn new() -> ReqPath {
        ReqPath::default()
    }

    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        self.segs.iter().map(|&(a, b)| &self.bytes[a..b])
    }

    pub fn len(&self) -> usize {
        self.segs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// The last segment (the file's own name), if any.
    pub fn name(&self) -> Option<&[u8]> {
        self.segs.last().map(|&(a, b)| &self.bytes[a..b])
    }

    /// "/a/b" for messages (lossy UTF-8).
    pub fn display(&self) -> String {
        let mut s = String::new();
        for seg in self.segments() {
            s.push('/');
            s.push_str(&String::from_utf8_lossy(seg));
        }
        if s.is_empty() {
            s.push('/');
        }
        s
    }

    /// Parse a request target. On error the reason is for a 400 body.
    pub fn parse(&mut self, target: &str) -> Result<(), &'static str> {
        self.bytes.clear();
        self.segs.clear();
        let mut t = target.as_bytes();
        // absolute-form: scheme://authority/path
        for scheme in [&b"http://"[..], &b"https://"[..]] {
            if t.len() >= scheme.len() && t[..scheme.len()].eq_ignore_ascii_case(scheme) {
                let rest = &t[scheme.len()..];
                t = match rest.iter().position(|&c| c == b'/' || c == b'?') {
                    Some(i) if rest[i] == b'/' => &rest[i..],
                    _ => b"/",
                };
                break;
            }
        }
        if t.first() != Some(&b'/') {
            return Err("the request target must be an absolute path");
        }
        if let Some(i) = t.iter().position(|&c| c == b'?' || c == b'#') {
            t = &t[..i];
        }
        if t.len() > 3 * PATH_MAX {
            return Err("path too long");
        }
        // The first piece is what precedes the leading `/`; the last may
        // be empty (a trailing `/`).
        let mut pieces = t.split(|&c| c == b'/').enumerate().peekable();
        while let Some((k, raw)) = pieces.next() {
            if raw.is_empty() {
                if k == 0 || pieces.peek().is_none() {
                    continue;
                }
                return Err("an empty segment (`//`) in the path");
            }
            let start = self.bytes.len();
            // Decoded strictly (pktfs-s3's percent module, over the
            // percent-encoding crate): a malformed escape is refused, never
            // taken as the bytes it was sent as.
            let decoded = pktfs_s3::percent::decode(raw, false)
                .map_err(|_| "malformed percent-escape in the path")?;
            for &b in decoded.iter() {
                if b == b'/' {
                    return Err("encoded slash in the path");
                }
                if b == 0 {
                    return Err("NUL in the path");
                }
                if b < 0x20 || b == 0x7f {
                    return Err("control character in the path");
                }
            }
            self.bytes.extend_from_slice(&decoded);
            let seg = &self.bytes[start..];
            if seg == b"." || seg == b".." {
                return Err("dot segments are not allowed in the path");
            }
            if seg.len() > NAME_MAX {
                return Err("a name in the path is longer than 255 bytes");
            }
            self.segs.push((start, self.bytes.len()));
        }
        if self.bytes.len() + self.segs.len() > PATH_MAX {
            return Err("path too long");
        }
        Ok(())
    }
}

/// Percent-encode a name for a URL path segment (listings, Location).
pub fn encode_segment(name: &[u8], out: &mut String) {
    for &b in name {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(t: &str) -> Result<Vec<Vec<u8>>, &'static str> {
        let mut p = ReqPath::new();
        p.parse(t)?;
        Ok(p.segments().map(|s| s.to_vec()).collect())
    }

    #[test]
    fn accepts_ordinary_paths() {
        assert_eq!(segs("/").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(
            segs("/a/b.txt").unwrap(),
            vec![b"a".to_vec(), b"b.txt".to_vec()]
        );
        assert_eq!(segs("/a/b/").unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(segs("/a%20b?x=1#f").unwrap(), vec![b"a b".to_vec()]);
        assert_eq!(segs("http://h:1/x").unwrap(), vec![b"x".to_vec()]);
        assert_eq!(segs("http://h:1").unwrap(), Vec::<Vec<u8>>::new());
        assert_eq!(segs("/%C3%A9").unwrap(), vec!["é".as_bytes().to_vec()]);
        assert_eq!(segs("/...").unwrap(), vec![b"...".to_vec()]);
    }

    #[test]
    fn refuses_escapes() {
        for t in [
            "/..",
            "/a/../b",
            "/%2e%2e/x",
            "/%2E.",
            "/.",
            "/a%2Fb",
            "/a%2fb",
            "/a%00",
            "/a%0a",
            "/%",
            "/%g1",
            "//",
            "//a",
            "//a///b/",
            "/a//b",
            "/a//",
            "http://h:1//x",
            "x",
            "*",
            "",
        ] {
            assert!(segs(t).is_err(), "{t:?} accepted");
        }
        let long = format!("/{}", "a".repeat(256));
        assert!(segs(&long).is_err());
        let ok = format!("/{}", "a".repeat(255));
        assert!(segs(&ok).is_ok());
        let deep = "/abcdefgh".repeat(600);
        assert!(segs(&deep).is_err());
    }
}
