//! SigV4's encodings: UriEncode (through [`crate::percent`]) and lowercase
//! hex.

use std::borrow::Cow;

use super::AuthError;

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// UriEncode of `data` as SigV4 defines it (see [`crate::percent`]).
pub fn uri_encode(data: &[u8], keep_slash: bool) -> String {
    crate::percent::uri_encode(data, keep_slash)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn bad_escape(what: &str, raw: &[u8]) -> AuthError {
    AuthError::InvalidUri(format!(
        "the {what} {:?} holds a `%` not followed by two hex digits",
        String::from_utf8_lossy(raw)
    ))
}

/// Decodes `raw` and appends it UriEncoded: what a path segment
/// (`plus_is_space` false, `/` encoded) or a query name or value
/// (`plus_is_space` true: forms send a blank as `+`) becomes in the
/// canonical request. `what` names the part for the error.
pub(crate) fn reencode(
    raw: &[u8],
    plus_is_space: bool,
    out: &mut Vec<u8>,
    what: &str,
) -> Result<(), AuthError> {
    let decoded = crate::percent::decode(raw, plus_is_space).map_err(|_| bad_escape(what, raw))?;
    crate::percent::uri_encode_into(out, &decoded, false);
    Ok(())
}

/// Percent-decodes a query value (`+` is a blank); borrows when there is
/// nothing to decode.
pub(crate) fn query_decode<'a>(raw: &'a [u8], what: &str) -> Result<Cow<'a, [u8]>, AuthError> {
    crate::percent::decode(raw, true).map_err(|_| bad_escape(what, raw))
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
