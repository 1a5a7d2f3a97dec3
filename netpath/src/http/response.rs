//! Response heads and bodies, built into a `Vec<u8>` (no socket I/O):
//! status lines, the common headers, error bodies, and the header values
//! made from a file (Content-Type, Last-Modified).

use std::borrow::Cow;

use pktfs_fs::FsError;

pub(crate) fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

/// HTTP status for a Volume error.
pub(crate) fn status_of(e: &FsError) -> u16 {
    match e {
        FsError::NotFound => 404,
        FsError::Exists | FsError::IsDir | FsError::NotEmpty | FsError::NotDir => 409,
        FsError::NameTooLong | FsError::Invalid(_) => 400,
        FsError::NoSpace(_) => 507,
        FsError::TooBig => 413,
        FsError::ReadOnly | FsError::NotPermitted(_) => 405,
        FsError::Access => 403,
        FsError::PreconditionFailed => 412,
        FsError::Contended(_) => 503,
        _ => 500,
    }
}

/// Start a response head in `out`: status line, Server, Date,
/// Content-Length (None: the body is chunked), Connection, then `extra`
/// (complete header lines) and the blank line. Appended piece by piece (no
/// `fmt` machinery): this is on every answer's path.
pub(crate) fn begin(
    out: &mut Vec<u8>,
    code: u16,
    len: Option<u64>,
    keep: bool,
    date: &str,
    extra: &str,
) {
    let mut num = itoa::Buffer::new();
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(num.format(code).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(code).as_bytes());
    out.extend_from_slice(b"\r\nServer: pktfs\r\nDate: ");
    out.extend_from_slice(date.as_bytes());
    match len {
        Some(len) => {
            out.extend_from_slice(b"\r\nContent-Length: ");
            out.extend_from_slice(num.format(len).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(b"\r\nTransfer-Encoding: chunked\r\n"),
    }
    if !keep {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(extra.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An error body and its Content-Type: `404 Not Found: /a/b: no such
/// file` as text, or `{"error": "...", "status": 404}` for a client that
/// accepts JSON.
pub(crate) fn error_body(code: u16, msg: &str, json: bool) -> (Vec<u8>, &'static str) {
    if json {
        let v = serde_json::json!({
            "status": code,
            "reason": reason(code),
            "error": msg,
        });
        let mut b = v.to_string().into_bytes();
        b.push(b'\n');
        (b, "application/json")
    } else {
        (
            format!("{code} {}: {msg}\n", reason(code)).into_bytes(),
            "text/plain; charset=utf-8",
        )
    }
}

/// Content-Type from the name's extension (`mime_guess`'s table, kept
/// from the shared MIME databases rather than a hand-made list), or
/// `application/octet-stream`. Only the last extension counts, so
/// `x.tar.gz` is gzip and a name without one is octet-stream.
pub(crate) fn content_type(name: &[u8]) -> Cow<'static, str> {
    let ext = name
        .iter()
        .rposition(|&c| c == b'.')
        .filter(|&i| i > 0)
        .and_then(|i| std::str::from_utf8(&name[i + 1..]).ok());
    match ext.and_then(|e| mime_guess::from_ext(e).first_raw()) {
        Some(t) if t.starts_with("text/") => Cow::Owned(format!("{t}; charset=utf-8")),
        Some(t) => Cow::Borrowed(t),
        None => Cow::Borrowed("application/octet-stream"),
    }
}

/// IMF-fixdate (RFC 9110 5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT".
pub(crate) fn http_date(secs: i64) -> String {
    let t = if secs >= 0 {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64)
    } else {
        std::time::UNIX_EPOCH
    };
    httpdate::fmt_http_date(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_bodies() {
        let mut out = Vec::new();
        begin(&mut out, 404, Some(3), false, "D", "X: y\r\n");
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nServer: pktfs\r\nDate: D\r\nContent-Length: 3\r\nConnection: close\r\nX: y\r\n\r\n"
        );
        let (b, t) = error_body(404, "/a: no such file", false);
        assert_eq!(b, b"404 Not Found: /a: no such file\n");
        assert!(t.starts_with("text/plain"));
        let (b, t) = error_body(412, "x", true);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["status"], 412);
        assert_eq!(v["error"], "x");
        assert_eq!(t, "application/json");
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type(b"a.json"), "application/json");
        assert_eq!(content_type(b"index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type(b"x.tar.gz"), "application/gzip");
        assert_eq!(content_type(b"noext"), "application/octet-stream");
        assert_eq!(content_type(b".hidden"), "application/octet-stream");
        assert_eq!(content_type(b"a.\xff"), "application/octet-stream");
    }
}
