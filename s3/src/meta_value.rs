//! Metadata values (`x-amz-meta-*` and the stored headers) between a
//! header's bytes and the text kept, by S3's rule: what arrives is kept
//! as the text it is (UTF-8, or else each byte the ISO-8859-1 character
//! it names, as RFC 9110 lets a field carry), and a value that is not
//! ASCII is answered as RFC 2047's encoded word of its UTF-8
//! (`=?UTF-8?B?...?=`), which a header carries whole and a client can
//! decode. Nothing is dropped or refused for its characters.

use std::borrow::Cow;

use base64::Engine;

/// A header value as the text to keep.
pub fn from_header(v: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(v) {
        Ok(t) => Cow::Borrowed(t),
        Err(_) => Cow::Owned(v.iter().map(|&b| b as char).collect()),
    }
}

/// A kept value as a header answers it.
pub fn to_header(v: &str) -> Cow<'_, str> {
    if v.is_ascii() {
        return Cow::Borrowed(v);
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(v.as_bytes());
    Cow::Owned(format!("=?UTF-8?B?{b64}?="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_ascii_values_are_kept_and_answered_as_encoded_words() {
        assert_eq!(from_header(b"plain"), "plain");
        assert_eq!(
            from_header("Hello World\u{e9}".as_bytes()),
            "Hello World\u{e9}"
        );
        // ISO-8859-1 bytes are characters, not dropped.
        assert_eq!(from_header(b"Hello World\xe9"), "Hello World\u{e9}");
        assert_eq!(to_header("ascii"), "ascii");
        assert_eq!(
            to_header("Hello World\u{e9}"),
            "=?UTF-8?B?SGVsbG8gV29ybGTDqQ==?="
        );
        // An encoded word sent is ASCII: kept and answered as sent.
        assert_eq!(to_header("=?UTF-8?B?w6k=?="), "=?UTF-8?B?w6k=?=");
    }
}
