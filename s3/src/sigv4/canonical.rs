//! The canonical request, S3's flavour: what the signature is over.
//!
//! ```text
//! METHOD \n
//! canonical URI \n          each path segment decoded, then UriEncoded
//! canonical query \n        names and values decoded, UriEncoded, sorted
//! name:value \n ...         the signed headers, lowercased, values trimmed
//! \n
//! signed;headers \n         as the request lists them
//! hashed payload            x-amz-content-sha256, or UNSIGNED-PAYLOAD
//! ```

use std::cell::RefCell;

use super::encode::reencode;
use super::{AuthError, Request};

/// A query parameter in the scratch: name is `start..mid`, value
/// `mid..end`, both already UriEncoded.
#[derive(Debug, Clone, Copy)]
struct Param {
    start: usize,
    mid: usize,
    end: usize,
}

/// Buffers reused from one request to the next on a thread.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The canonical request being built.
    pub(crate) out: Vec<u8>,
    query: Vec<u8>,
    params: Vec<Param>,
}

/// What a scratch keeps between requests; a request that grew it beyond
/// (a huge query or header) gives the rest back.
const SCRATCH_KEEP_BYTES: usize = 16 * 1024;
const SCRATCH_KEEP_PARAMS: usize = 64;

impl Scratch {
    fn trim(&mut self) {
        self.out.clear();
        self.query.clear();
        self.params.clear();
        self.out.shrink_to(SCRATCH_KEEP_BYTES);
        self.query.shrink_to(SCRATCH_KEEP_BYTES);
        self.params.shrink_to(SCRATCH_KEEP_PARAMS);
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch (a fresh one if it is in use).
pub(crate) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => {
            let r = f(&mut s);
            s.trim();
            r
        }
        Err(_) => f(&mut Scratch::default()),
    })
}

/// Blanks a header value is trimmed of and whose runs collapse to one
/// space (botocore collapses every whitespace run the same way).
fn blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn push_header_value(out: &mut Vec<u8>, v: &[u8]) {
    let mut in_blank = false;
    for &b in v.trim_ascii() {
        if blank(b) {
            in_blank = true;
            continue;
        }
        if in_blank {
            out.push(b' ');
            in_blank = false;
        }
        out.push(b);
    }
}

fn push_uri(out: &mut Vec<u8>, path: &str) -> Result<(), AuthError> {
    if path.is_empty() {
        out.push(b'/');
        return Ok(());
    }
    // Segment by segment, so that an encoded slash (%2F) inside a segment
    // stays encoded while the separators stay slashes.
    for (i, seg) in path.as_bytes().split(|&b| b == b'/').enumerate() {
        if i > 0 {
            out.push(b'/');
        }
        reencode(seg, false, out, "path")?;
    }
    Ok(())
}

fn push_query(s: &mut Scratch, query: &str, skip_signature: bool) -> Result<(), AuthError> {
    for piece in query.as_bytes().split(|&b| b == b'&') {
        if piece.is_empty() {
            continue;
        }
        let (name, value) = match piece.iter().position(|&b| b == b'=') {
            Some(eq) => (&piece[..eq], &piece[eq + 1..]),
            None => (piece, &b""[..]),
        };
        let start = s.query.len();
        reencode(name, true, &mut s.query, "query parameter name")?;
        let mid = s.query.len();
        if skip_signature && &s.query[start..mid] == b"X-Amz-Signature" {
            s.query.truncate(start);
            continue;
        }
        reencode(value, true, &mut s.query, "query parameter value")?;
        s.params.push(Param {
            start,
            mid,
            end: s.query.len(),
        });
    }
    let q = &s.query;
    s.params.sort_unstable_by(|a, b| {
        q[a.start..a.mid]
            .cmp(&q[b.start..b.mid])
            .then_with(|| q[a.mid..a.end].cmp(&q[b.mid..b.end]))
    });
    for (i, p) in s.params.iter().enumerate() {
        if i > 0 {
            s.out.push(b'&');
        }
        s.out.extend_from_slice(&q[p.start..p.mid]);
        s.out.push(b'=');
        s.out.extend_from_slice(&q[p.mid..p.end]);
    }
    Ok(())
}

fn push_headers(
    out: &mut Vec<u8>,
    headers: &[(&str, &[u8])],
    signed_headers: &str,
) -> Result<(), AuthError> {
    for name in signed_headers.split(';') {
        out.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        out.push(b':');
        let mut found = false;
        for (n, v) in headers {
            if n.eq_ignore_ascii_case(name) {
                if found {
                    out.push(b',');
                }
                push_header_value(out, v);
                found = true;
            }
        }
        if !found {
            return Err(AuthError::SignatureMismatch(format!(
                "the signed header {name:?} is not in the request"
            )));
        }
        out.push(b'\n');
    }
    Ok(())
}

/// Builds the canonical request into `s.out` (cleared first).
pub(crate) fn build(
    s: &mut Scratch,
    req: &Request<'_>,
    signed_headers: &str,
    hashed_payload: &[u8],
    presigned: bool,
) -> Result<(), AuthError> {
    s.out.clear();
    s.query.clear();
    s.params.clear();
    s.out.extend_from_slice(req.method.as_bytes());
    s.out.push(b'\n');
    push_uri(&mut s.out, req.path)?;
    s.out.push(b'\n');
    push_query(s, req.query, presigned)?;
    s.out.push(b'\n');
    push_headers(&mut s.out, req.headers, signed_headers)?;
    s.out.push(b'\n');
    s.out.extend_from_slice(signed_headers.as_bytes());
    s.out.push(b'\n');
    s.out.extend_from_slice(hashed_payload);
    Ok(())
}

/// The canonical request of `req` signing `signed_headers` (as the
/// request lists them, `;`-separated) over `hashed_payload`; `presigned`
/// leaves X-Amz-Signature out of the query. For diagnostics and tests:
/// a client's canonical request compared with this one shows where they
/// differ.
pub fn canonical_request(
    req: &Request<'_>,
    signed_headers: &str,
    hashed_payload: &str,
    presigned: bool,
) -> Result<Vec<u8>, AuthError> {
    let mut s = Scratch::default();
    build(
        &mut s,
        req,
        signed_headers,
        hashed_payload.as_bytes(),
        presigned,
    )?;
    Ok(s.out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(path: &str, query: &str, headers: &[(&str, &[u8])], signed: &str) -> String {
        let req = Request {
            method: "GET",
            path,
            query,
            headers,
        };
        String::from_utf8(canonical_request(&req, signed, "UNSIGNED-PAYLOAD", true).unwrap())
            .unwrap()
    }

    #[test]
    fn path_is_decoded_then_encoded_once_per_segment() {
        let h: &[(&str, &[u8])] = &[("Host", b"h")];
        let c = canon("/b/a%20b+c$d/%2Fx/~%7E", "", h, "host");
        assert!(c.starts_with("GET\n/b/a%20b%2Bc%24d/%2Fx/~~\n"), "{c}");
        assert!(canon("", "", h, "host").starts_with("GET\n/\n"));
        let c = canon("/k/%C3%A9\u{e9}", "", h, "host");
        assert!(c.starts_with("GET\n/k/%C3%A9%C3%A9\n"), "{c}");
    }

    #[test]
    fn query_is_sorted_by_encoded_name_then_value() {
        let h: &[(&str, &[u8])] = &[("host", b"h")];
        let c = canon(
            "/",
            "z=1&a=2&a=1&{=&b&y=a+b%2Fc&&X-Amz-Signature=ff",
            h,
            "host",
        );
        // `%` sorts before letters: the encoded `{` comes first.
        assert!(c.contains("\n%7B=&a=1&a=2&b=&y=a%20b%2Fc&z=1\n"), "{c}");
    }

    #[test]
    fn headers_trimmed_collapsed_joined_lowercased() {
        let h: &[(&str, &[u8])] = &[
            ("Host", b"h"),
            ("X-Amz-Meta-A", b"  one   two \t three  "),
            ("x-amz-meta-a", b"four"),
        ];
        let c = canon("/", "", h, "host;x-amz-meta-a");
        assert!(
            c.ends_with(
                "\nhost:h\nx-amz-meta-a:one two three,four\n\nhost;x-amz-meta-a\nUNSIGNED-PAYLOAD"
            ),
            "{c}"
        );
    }

    #[test]
    fn missing_signed_header_and_bad_escapes_are_errors() {
        let h: &[(&str, &[u8])] = &[("host", b"h")];
        let req = Request {
            method: "GET",
            path: "/",
            query: "",
            headers: h,
        };
        let e = canonical_request(&req, "host;range", "x", false).unwrap_err();
        assert_eq!(e.code(), "SignatureDoesNotMatch");
        for (path, query) in [
            ("/a%", ""),
            ("/a%4", ""),
            ("/a%zz", ""),
            ("/", "a=%"),
            ("/", "%g0=1"),
        ] {
            let req = Request { path, query, ..req };
            let e = canonical_request(&req, "host", "x", false).unwrap_err();
            assert_eq!(e.code(), "InvalidURI", "{path} {query}");
        }
    }
}
