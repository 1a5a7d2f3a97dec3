//! HTTP/1.1 answers as the client reads them: the head parsed (status,
//! length, ETag, whether the server closes), and a blocking keep-alive
//! connection for the multipart phases.

use std::io::{Read, Write};
use std::net::TcpStream;

/// The most header fields an answer may have; the most bytes its head may
/// take (a longer head is an error, not a growing buffer).
const MAX_HEADERS: usize = 48;
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The parts of an answer's head the client checks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head, through the empty line.
    pub head_bytes: usize,
    pub content_length: u64,
    pub etag: Option<String>,
    /// `Connection: close`: the server closes after this answer.
    pub close: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// Not HTTP, or a head over [`MAX_HEAD_BYTES`] or [`MAX_HEADERS`].
    Malformed(String),
    /// A chunked answer (these servers answer with lengths).
    Chunked,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::Malformed(s) => write!(f, "malformed answer: {s}"),
            HeadError::Chunked => write!(f, "a chunked answer (the client reads lengths only)"),
        }
    }
}

/// Parse an answer's head from `buf`: `Ok(None)` while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut fields);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(HeadError::Malformed(format!(
                "no end of the head in {MAX_HEAD_BYTES} bytes"
            )))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Malformed(e.to_string())),
    };
    let mut h = Head {
        status: r.code.unwrap_or(0),
        head_bytes: n,
        close: r.version == Some(0),
        ..Head::default()
    };
    for f in r.headers.iter() {
        let v = String::from_utf8_lossy(f.value);
        if f.name.eq_ignore_ascii_case("content-length") {
            h.content_length = v
                .trim()
                .parse()
                .map_err(|_| HeadError::Malformed(format!("Content-Length {v:?}")))?;
        } else if f.name.eq_ignore_ascii_case("etag") {
            h.etag = Some(v.trim().to_string());
        } else if f.name.eq_ignore_ascii_case("connection") {
            h.close = v.trim().eq_ignore_ascii_case("close");
        } else if f.name.eq_ignore_ascii_case("transfer-encoding")
            && !v.trim().eq_ignore_ascii_case("identity")
        {
            return Err(HeadError::Chunked);
        }
    }
    Ok(Some(h))
}

/// A blocking keep-alive connection.
#[derive(Debug)]
pub struct Conn {
    s: TcpStream,
    addr: String,
    buf: Vec<u8>,
}

/// An answer read whole (its body in `Conn`'s buffer or checked against
/// an expected one).
#[derive(Debug)]
pub struct Answer {
    pub head: Head,
    pub body: Vec<u8>,
}

impl Conn {
    pub fn connect(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(Conn {
            s,
            addr: addr.to_string(),
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Send `head` and `body`; read the answer. A body larger than
    /// `max_body` is refused (the caller says what it expects). A
    /// connection the server closes is opened again for the next request.
    pub fn request(&mut self, head: &[u8], body: &[u8], max_body: usize) -> Result<Answer, String> {
        self.s
            .write_all(head)
            .and_then(|_| self.s.write_all(body))
            .map_err(|e| format!("send to {}: {e}", self.addr))?;
        let h = loop {
            if let Some(h) = parse_head(&self.buf).map_err(|e| e.to_string())? {
                break h;
            }
            self.fill()?;
        };
        let len = usize::try_from(h.content_length).unwrap_or(usize::MAX);
        if len > max_body {
            return Err(format!(
                "an answer of {len} bytes, over the {max_body} expected"
            ));
        }
        let mut body = Vec::with_capacity(len);
        body.extend_from_slice(&self.buf[h.head_bytes..self.buf.len().min(h.head_bytes + len)]);
        self.buf.drain(..h.head_bytes + body.len());
        while body.len() < len {
            let want = (len - body.len()).min(1 << 20);
            let at = body.len();
            body.resize(at + want, 0);
            let n = self
                .s
                .read(&mut body[at..])
                .map_err(|e| format!("read from {}: {e}", self.addr))?;
            body.truncate(at + n);
            if n == 0 {
                return Err(format!("{} closed in the middle of an answer", self.addr));
            }
        }
        if h.close {
            *self = Conn::connect(&self.addr).map_err(|e| format!("reconnect: {e}"))?;
        }
        Ok(Answer { head: h, body })
    }

    fn fill(&mut self) -> Result<(), String> {
        let at = self.buf.len();
        self.buf.resize(at + 16 * 1024, 0);
        let n = self
            .s
            .read(&mut self.buf[at..])
            .map_err(|e| format!("read from {}: {e}", self.addr))?;
        self.buf.truncate(at + n);
        if n == 0 {
            return Err(format!("{} closed before answering", self.addr));
        }
        Ok(())
    }
}

/// The text between `<tag>` and `</tag>` in an XML answer, first match.
pub fn xml_field<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let from = xml.find(&open)? + open.len();
    let to = from + xml[from..].find(&close)?;
    Some(&xml[from..to])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_parsed_or_waited_for() {
        let a = b"HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nContent-Length: 0\r\n\r\n";
        let h = parse_head(a).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.etag.as_deref(), Some("\"abc\""));
        assert_eq!(h.head_bytes, a.len());
        assert!(!h.close);
        assert_eq!(parse_head(&a[..20]).unwrap(), None);
        let c = parse_head(b"HTTP/1.1 503 x\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc")
            .unwrap()
            .unwrap();
        assert_eq!((c.status, c.content_length, c.close), (503, 3, true));
    }

    #[test]
    fn bad_heads_are_errors_not_panics() {
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HeadError::Chunked)
        );
        let long = [
            b"HTTP/1.1 200 OK\r\nX: ".as_slice(),
            &[b'a'; MAX_HEAD_BYTES],
        ]
        .concat();
        assert!(parse_head(&long).is_err());
        for n in 0..200u8 {
            let junk: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect();
            let _ = parse_head(&junk);
        }
    }

    #[test]
    fn xml_fields_are_found() {
        let x = "<?xml?><InitiateMultipartUploadResult><Bucket>b</Bucket>\
                 <UploadId>abc-1</UploadId></InitiateMultipartUploadResult>";
        assert_eq!(xml_field(x, "UploadId"), Some("abc-1"));
        assert_eq!(xml_field(x, "Key"), None);
        assert_eq!(xml_field("<a>", "a"), None);
    }
}
