//! Percent-encoding, once, through the `percent-encoding` crate: AWS's
//! UriEncode (SigV4's canonical request, `encoding-type=url` listings and
//! the clients' paths) and the strict decoding of paths and queries.
//!
//! Strict, because the crate's decoder passes a `%` that two hex digits do
//! not follow through as it is, and a request is refused instead: a path
//! or a query that two readers could read differently is a way past a
//! check that one of them made.

use std::borrow::Cow;

use percent_encoding::{percent_decode, percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// What UriEncode escapes: everything but `A-Z a-z 0-9 - . _ ~`.
const URI: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The same with `/` kept (an object key in a path).
const URI_KEEP_SLASH: &AsciiSet = &URI.remove(b'/');

/// UriEncode of `data` as SigV4 defines it: unreserved bytes kept, `/`
/// kept only when `keep_slash`, every other byte `%XX` (uppercase hex, so
/// a blank is `%20`, never `+`).
pub fn uri_encode(data: &[u8], keep_slash: bool) -> String {
    let set = if keep_slash { URI_KEEP_SLASH } else { URI };
    percent_encode(data, set).to_string()
}

/// Appends `data` UriEncoded (see [`uri_encode`]) to `out`.
pub fn uri_encode_into(out: &mut Vec<u8>, data: &[u8], keep_slash: bool) {
    let set = if keep_slash { URI_KEEP_SLASH } else { URI };
    for piece in percent_encode(data, set) {
        out.extend_from_slice(piece.as_bytes());
    }
}

/// A `%` at this byte offset is not followed by two hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadEscape {
    pub at: usize,
}

/// The offset of the first `%` in `raw` that two hex digits do not follow.
pub fn check_escapes(raw: &[u8]) -> Result<(), BadEscape> {
    let mut i = 0;
    while let Some(k) = raw[i..].iter().position(|&b| b == b'%') {
        let at = i + k;
        let hex = |j: usize| raw.get(j).is_some_and(u8::is_ascii_hexdigit);
        if !(hex(at + 1) && hex(at + 2)) {
            return Err(BadEscape { at });
        }
        i = at + 3;
    }
    Ok(())
}

/// `raw` percent-decoded, `+` as a blank when `plus_is_space` (a query's
/// names and values: forms send a blank as `+`; `%2B` stays a plus);
/// borrowed when there is nothing to decode. A malformed escape is an
/// error, never passed through.
pub fn decode(raw: &[u8], plus_is_space: bool) -> Result<Cow<'_, [u8]>, BadEscape> {
    let plus = plus_is_space && raw.contains(&b'+');
    if !plus && !raw.contains(&b'%') {
        return Ok(Cow::Borrowed(raw));
    }
    check_escapes(raw)?;
    let spaced: Cow<'_, [u8]> = if plus {
        Cow::Owned(
            raw.iter()
                .map(|&b| if b == b'+' { b' ' } else { b })
                .collect(),
        )
    } else {
        Cow::Borrowed(raw)
    };
    Ok(Cow::Owned(percent_decode(&spaced).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_encode_keeps_the_unreserved_only() {
        assert_eq!(
            uri_encode(b"a-b.c_d~e/f g+h%", false),
            "a-b.c_d~e%2Ff%20g%2Bh%25"
        );
        assert_eq!(uri_encode(b"a/b c", true), "a/b%20c");
        assert_eq!(uri_encode("é".as_bytes(), false), "%C3%A9");
        let mut v = b"x=".to_vec();
        uri_encode_into(&mut v, b"1 2", false);
        assert_eq!(v, b"x=1%202");
    }

    #[test]
    fn decode_is_strict_and_borrows_when_it_can() {
        assert!(matches!(
            decode(b"plain", true),
            Ok(Cow::Borrowed(b"plain"))
        ));
        assert_eq!(decode(b"a%20b+c%2B", true).unwrap().as_ref(), b"a b c+");
        assert_eq!(decode(b"a+b", false).unwrap().as_ref(), b"a+b");
        assert_eq!(decode(b"%e9", false).unwrap().as_ref(), [0xe9]);
        for (bad, at) in [(&b"%"[..], 0), (b"ab%2", 2), (b"%zz", 0), (b"%20%g0", 3)] {
            assert_eq!(decode(bad, false), Err(BadEscape { at }), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn encode_then_decode_is_the_same_bytes(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), slash: bool) {
            let e = uri_encode(&b, slash);
            let back = decode(e.as_bytes(), false).unwrap();
            proptest::prop_assert_eq!(back.as_ref(), &b[..]);
        }
    }
}
