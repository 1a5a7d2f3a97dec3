//! Percent-encoding as SigV4 defines it (UriEncode) and lowercase hex.

use std::borrow::Cow;

use super::AuthError;

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";
const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// The bytes UriEncode keeps as they are: A-Z a-z 0-9 - _ . ~
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')
}

/// Appends `b` UriEncoded: kept if unreserved (or `/` when `keep_slash`),
/// else `%XX` in uppercase hex.
#[inline]
pub(crate) fn push_encoded(out: &mut Vec<u8>, b: u8, keep_slash: bool) {
    if unreserved(b) || (keep_slash && b == b'/') {
        out.push(b);
    } else {
        out.extend_from_slice(&[
            b'%',
            HEX_UPPER[usize::from(b >> 4)],
            HEX_UPPER[usize::from(b & 15)],
        ]);
    }
}

/// UriEncode of `data` as SigV4 defines it: unreserved bytes kept, `/`
/// kept only when `keep_slash`, every other byte `%XX` (uppercase hex).
pub fn uri_encode(data: &[u8], keep_slash: bool) -> String {
    let mut out = Vec::with_capacity(data.len());
    for &b in data {
        push_encoded(&mut out, b, keep_slash);
    }
    // Only ASCII was pushed.
    String::from_utf8(out).unwrap_or_default()
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The byte a `%XX` escape at `raw[i]` (the `%`) stands for.
fn escape_at(raw: &[u8], i: usize) -> Option<u8> {
    let hi = hex_value(*raw.get(i + 1)?)?;
    let lo = hex_value(*raw.get(i + 2)?)?;
    Some(hi << 4 | lo)
}

fn bad_escape(what: &str, raw: &[u8]) -> AuthError {
    AuthError::InvalidUri(format!(
        "the {what} {:?} holds a `%` not followed by two hex digits",
        String::from_utf8_lossy(raw)
    ))
}

/// Decodes `raw` and appends it UriEncoded, in one pass: what a path
/// segment (`plus_is_space` false, `/` encoded) or a query name or value
/// (`plus_is_space` true: forms send a blank as `+`) becomes in the
/// canonical request. `what` names the part for the error.
pub(crate) fn reencode(
    raw: &[u8],
    plus_is_space: bool,
    out: &mut Vec<u8>,
    what: &str,
) -> Result<(), AuthError> {
    let mut i = 0;
    while i < raw.len() {
        let b = match raw[i] {
            b'%' => {
                let Some(b) = escape_at(raw, i) else {
                    return Err(bad_escape(what, raw));
                };
                i += 2;
                b
            }
            b'+' if plus_is_space => b' ',
            b => b,
        };
        push_encoded(out, b, false);
        i += 1;
    }
    Ok(())
}

/// Percent-decodes a query value (`+` is a blank); borrows when there is
/// nothing to decode.
pub(crate) fn query_decode<'a>(raw: &'a [u8], what: &str) -> Result<Cow<'a, [u8]>, AuthError> {
    if !raw.iter().any(|&b| b == b'%' || b == b'+') {
        return Ok(Cow::Borrowed(raw));
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'%' => {
                let Some(b) = escape_at(raw, i) else {
                    return Err(bad_escape(what, raw));
                };
                out.push(b);
                i += 2;
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    Ok(Cow::Owned(out))
}

/// Appends the lowercase hex of `bytes`.
pub(crate) fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.extend_from_slice(&[
            HEX_LOWER[usize::from(b >> 4)],
            HEX_LOWER[usize::from(b & 15)],
        ]);
    }
}

/// The lowercase hex of 32 bytes, on the stack.
pub(crate) fn hex32(bytes: &[u8; 32]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, &b) in bytes.iter().enumerate() {
        out[2 * i] = HEX_LOWER[usize::from(b >> 4)];
        out[2 * i + 1] = HEX_LOWER[usize::from(b & 15)];
    }
    out
}

/// Lowercase hex of `bytes`.
pub fn hex_lower(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    String::from_utf8(out).unwrap_or_default()
}

/// Exactly 64 hex digits (either case) as 32 bytes; `None` otherwise.
pub fn parse_hex32(hex: &[u8]) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        out[i] = hex_value(pair[0])? << 4 | hex_value(pair[1])?;
    }
    Some(out)
}
