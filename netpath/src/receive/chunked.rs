//! The chunked coding's framing lines (a chunk-size line, the trailer
//! section), parsed from bytes; no socket I/O. Both transports call these,
//! so a line is judged the same way whether it arrived in one receive or
//! in many: never on more than `max` bytes (`Config::max_header_bytes`).

/// A chunk-size line at the start of `w` (extensions ignored):
/// `Ok(Some((line length, chunk size)))`, `Ok(None)` while incomplete,
/// `Err(why)` when it is refused.
pub(crate) fn chunk_size_line(w: &[u8], max: usize) -> Result<Option<(usize, u64)>, &'static str> {
    let w = &w[..w.len().min(max)];
    if w.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
        return Err("bad chunk size");
    }
    match httparse::parse_chunk_size(w) {
        Ok(httparse::Status::Complete((n, size))) => Ok(Some((n, size))),
        Ok(httparse::Status::Partial) if w.len() >= max => Err("chunk line too long"),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err("bad chunk size"),
    }
}

/// The trailer section at the start of `w` (after the last chunk's size
/// line; its fields are ignored): `Ok(Some(length))` with its closing empty
/// line, `Ok(None)` while incomplete, `Err(why)` when it is refused.
pub(crate) fn trailer_section(w: &[u8], max: usize) -> Result<Option<usize>, &'static str> {
    let w = &w[..w.len().min(max)];
    if w.starts_with(b"\r\n") {
        return Ok(Some(2));
    }
    if w.is_empty() || w == b"\r" {
        return Ok(None);
    }
    let mut hs = [httparse::EMPTY_HEADER; 32];
    match httparse::parse_headers(w, &mut hs) {
        Ok(httparse::Status::Complete((n, _))) => Ok(Some(n)),
        Ok(httparse::Status::Partial) if w.len() >= max => Err("trailer section too large"),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err("malformed trailer section"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_judged_on_their_first_max_bytes() {
        assert_eq!(chunk_size_line(b"1a;x=y\r\nrest", 64), Ok(Some((8, 26))));
        assert_eq!(chunk_size_line(b"1a", 64), Ok(None));
        assert_eq!(chunk_size_line(b"x\r\n", 64), Err("bad chunk size"));
        // A line past the limit is too long whatever ends it later.
        let mut long = b"1;x=".to_vec();
        long.resize(100, b'y');
        assert_eq!(chunk_size_line(&long, 64), Err("chunk line too long"));
        long.extend_from_slice(b"\r\n");
        assert_eq!(chunk_size_line(&long, 64), Err("chunk line too long"));
        assert_eq!(chunk_size_line(&long[..63], 64), Ok(None));

        assert_eq!(trailer_section(b"\r\nnext", 64), Ok(Some(2)));
        assert_eq!(trailer_section(b"\r", 64), Ok(None));
        assert_eq!(trailer_section(b"X: y\r\n\r\n", 64), Ok(Some(8)));
        assert_eq!(trailer_section(b"X: y\r\n", 64), Ok(None));
        assert_eq!(
            trailer_section(b"\0\r\n\r\n", 64),
            Err("malformed trailer section")
        );
        let mut big = b"X: ".to_vec();
        big.resize(100, b'y');
        assert_eq!(trailer_section(&big, 64), Err("trailer section too large"));
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(trailer_section(&big, 64), Err("trailer section too large"));
    }
}
