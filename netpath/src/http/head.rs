//! Request heads: what a parsed head says, owned (the head's bytes stay
//! in the packet buffer and are skipped), including Range and the
//! conditional headers. No socket I/O here.

use crate::config::Config;
use crate::path::ReqPath;
pub(crate) use crate::receive::body::Framing;

const MAX_HEADERS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Head,
    Put,
    Post,
    Delete,
    Options,
    Other,
}

impl Method {
    /// The name for logs and metrics (`OTHER` for every unknown method,
    /// so a client cannot grow the metrics without bound).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Put => "PUT",
            Method::Post => "POST",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeSpec {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

/// An `If-Match` / `If-None-Match` field value (RFC 9110 13.1.1-2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TagList {
    /// `*`: any current representation.
    Any,
    /// Entity tags as sent, e.g. `"c-1234abcd-5"` or `W/"x"`.
    Tags(Vec<String>),
}

/// The conditional headers of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Conditions {
    pub if_match: Option<TagList>,
    pub if_none_match: Option<TagList>,
    /// Seconds since the epoch (an unparseable date is ignored, as RFC
    /// 9110 13.1.3 requires).
    pub if_modified_since: Option<i64>,
    pub if_unmodified_since: Option<i64>,
}

impl Conditions {
    pub fn any(&self) -> bool {
        self.if_match.is_some()
            || self.if_none_match.is_some()
            || self.if_modified_since.is_some()
            || self.if_unmodified_since.is_some()
    }
}

/// What a request head says.
#[derive(Clone, Debug)]
pub(crate) struct Head {
    pub method: Method,
    pub http11: bool,
    pub content_length: Option<u64>,
    pub chunked: bool,
    pub expect_continue: bool,
    pub keep_alive: bool,
    /// None: no Authorization header; Some(ok).
    pub auth: Option<bool>,
    pub range: Option<RangeSpec>,
    pub cond: Conditions,
    /// The client accepts `application/json` (listings, error bodies).
    pub accept_json: bool,
    /// The target is the metrics endpoint (`Config::metrics_path`).
    pub metrics: bool,
    /// The target is the metrics path or below it: nothing is created or
    /// stored there ([`reserved`]).
    pub reserved: bool,
    /// A problem found in the head: (status, message).
    pub error: Option<(u16, &'static str)>,
    pub path_error: Option<&'static str>,
}

impl Head {
    pub fn has_body(&self) -> bool {
        self.chunked || self.content_length.is_some_and(|n| n > 0)
    }

    /// A body this request does not store (GET, HEAD, DELETE or OPTIONS
    /// with one) is read and dropped before the request is acted on: a
    /// request takes effect only once it is whole (a DELETE whose body
    /// never ends deletes nothing), and both transports answer the same
    /// bytes alike however they were cut. PUT and POST store theirs; other
    /// methods are refused from the head.
    pub fn read_body_first(&self) -> bool {
        self.error.is_none()
            && self.has_body()
            && matches!(
                self.method,
                Method::Get | Method::Head | Method::Delete | Method::Options
            )
    }

    /// The same request once its body was read and dropped.
    pub fn without_body(self) -> Head {
        Head {
            content_length: None,
            chunked: false,
            ..self
        }
    }
}

impl Head {
    pub fn framing(&self) -> Option<Framing> {
        if self.chunked {
            Some(Framing::Chunked { within: None })
        } else {
            self.content_length.map(Framing::Length)
        }
    }
}

pub(crate) fn parse_range(v: &[u8]) -> Option<RangeSpec> {
    let v = std::str::from_utf8(v).ok()?.trim();
    let (unit, set) = v.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None; // other units, or several ranges: ignored (RFC 9110 14.2)
    }
    let (a, b) = set.trim().split_once('-')?;
    let num = |s: &str| {
        if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse::<u64>().ok()
        } else {
            None
        }
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        return num(b).map(RangeSpec::Suffix);
    }
    let first = num(a)?;
    if b.is_empty() {
        return Some(RangeSpec::FromTo(first, None));
    }
    let last = num(b)?;
    (last >= first).then_some(RangeSpec::FromTo(first, Some(last)))
}

/// Resolve a range against a size: Ok(None) = the whole file,
/// Ok(Some((start, end))) = partial, Err(()) = unsatisfiable.
pub(crate) fn resolve_range(r: Option<RangeSpec>, size: u64) -> Result<Option<(u64, u64)>, ()> {
    match r {
        None => Ok(None),
        Some(RangeSpec::FromTo(a, b)) => {
            if a >= size {
                return Err(());
            }
            Ok(Some((
                a,
                b.map(|b| b.saturating_add(1).min(size)).unwrap_or(size),
            )))
        }
        Some(RangeSpec::Suffix(n)) => {
            if n == 0 || size == 0 {
                return Err(());
            }
            Ok(Some((size.saturating_sub(n), size)))
        }
    }
}

fn tokens(v: &[u8]) -> impl Iterator<Item = &[u8]> {
    v.split(|&c| c == b',').map(|t| t.trim_ascii())
}

/// An `If-Match`/`If-None-Match` value: `*` or a list of entity tags.
/// Several fields of the same name add to the list.
fn parse_tags(v: &[u8], into: &mut Option<TagList>) {
    let Ok(v) = std::str::from_utf8(v) else {
        return;
    };
    if v.trim() == "*" {
        *into = Some(TagList::Any);
        return;
    }
    let tags: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    match into {
        Some(TagList::Any) => {}
        Some(TagList::Tags(have)) => have.extend(tags),
        None => *into = Some(TagList::Tags(tags)),
    }
}

/// An HTTP date (IMF-fixdate, or the obsolete RFC 850 and asctime forms)
/// in seconds since the epoch.
fn parse_date(v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?.trim();
    let t = httpdate::parse_http_date(s).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_secs()).ok()
}

/// Does an `Accept` value admit `application/json` (with a non-zero
/// quality)? `*/*` alone does not count: a browser or curl sends that and
/// gets the plain-text forms.
fn accepts_json(v: &[u8]) -> bool {
    tokens(v).any(|t| {
        let mut parts = t.split(|&c| c == b';').map(|p| p.trim_ascii());
        let ty = parts.next().unwrap_or_default();
        let q_zero = parts.any(|p| {
            p.len() >= 2
                && p[..2].eq_ignore_ascii_case(b"q=")
                && std::str::from_utf8(&p[2..])
                    .ok()
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
        });
        ty.eq_ignore_ascii_case(b"application/json") && !q_zero
    })
}

/// Parse the request head at the start of `w`: `Ok(None)` while it is
/// incomplete and shorter than the limit, `Ok(Some((length, head)))` once
/// complete, `Err((status, why))` when it is refused. Judged on its first
/// `max_header_bytes` only: a head is refused for its size as soon as that
/// many bytes arrived without its end, whatever follows, so the answer does
/// not depend on how TCP cut the bytes (before, a head past the limit whose
/// line ended further on was 400 when its bytes came in one receive and 431
/// when they came in several; `net_fuzz` found it). Both transports call it.
/// `fields` sees a complete head as httparse read it (the protocol's own
/// look: S3 keeps what SigV4 signs).
pub(super) fn parse_head(
    w: &[u8],
    path: &mut ReqPath,
    cfg: &Config,
    fields: &mut impl FnMut(&httparse::Request<'_, '_>),
) -> Result<Option<(usize, Head)>, (u16, &'static str)> {
    let max = cfg.max_header_bytes;
    let w = &w[..w.len().min(max)];
    // Slots httparse fills as it goes, not zeroed first: zeroing all 64
    // (2 KiB of stack, 32 cache lines) is work on every request's way to
    // its answer, where at one connection each microsecond costs more
    // than itself in server CPU (docs/DESIGN.md, "The event loops").
    // Only the slots it filled are read back.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(w, &mut headers) {
        Ok(httparse::Status::Complete(n)) => {
            fields(&req);
            Ok(Some((n, read_head(&req, path, cfg))))
        }
        Ok(httparse::Status::Partial) if w.len() >= max => Err((431, "request head too large")),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err((431, "too many header fields")),
        Err(_) => Err((400, "malformed request")),
    }
}

/// Read what matters from a parsed head.
fn read_head(req: &httparse::Request<'_, '_>, path: &mut ReqPath, cfg: &Config) -> Head {
    let mut h = Head {
        method: match req.method.unwrap_or("") {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "PUT" => Method::Put,
            "POST" => Method::Post,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        },
        http11: req.version == Some(1),
        content_length: None,
        chunked: false,
        expect_continue: false,
        keep_alive: true,
        auth: None,
        range: None,
        cond: Conditions::default(),
        accept_json: false,
        metrics: false,
        reserved: false,
        error: None,
        path_error: None,
    };
    let mut close = false;
    let mut ka = false;
    let mut host = false;
    let mut te = false;
    let fail = |h: &mut Head, code: u16, msg: &'static str| {
        if h.error.is_none() {
            h.error = Some((code, msg));
        }
    };
    for hd in req.headers.iter() {
        let n = hd.name;
        let v = hd.value;
        if n.eq_ignore_ascii_case("content-length") {
            let t = v.trim_ascii();
            let parsed = if !t.is_empty() && t.len() <= 19 && t.iter().all(|c| c.is_ascii_digit()) {
                std::str::from_utf8(t)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            } else {
                None
            };
            match (parsed, h.content_length) {
                (None, _) => fail(&mut h, 400, "bad Content-Length"),
                (Some(x), Some(y)) if x != y => {
                    fail(&mut h, 400, "conflicting Content-Length headers")
                }
                (Some(x), _) => h.content_length = Some(x),
            }
        } else if n.eq_ignore_ascii_case("transfer-encoding") {
            if te {
                fail(&mut h, 400, "repeated Transfer-Encoding");
            }
            te = true;
            if v.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                h.chunked = true;
            } else {
                fail(&mut h, 501, "only the chunked transfer coding is supported");
            }
        } else if n.eq_ignore_ascii_case("connection") {
            for t in tokens(v) {
                close |= t.eq_ignore_ascii_case(b"close");
                ka |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if n.eq_ignore_ascii_case("expect") {
            if v.trim_ascii().eq_ignore_ascii_case(b"100-continue") {
                h.expect_continue = true;
            } else {
                fail(&mut h, 417, "unknown expectation");
            }
        } else if n.eq_ignore_ascii_case("authorization") {
            let v = v.trim_ascii();
            let ok = v.len() > 7
                && v[..7].eq_ignore_ascii_case(b"bearer ")
                && cfg
                    .token
                    .as_ref()
                    .is_some_and(|t| t.matches(v[7..].trim_ascii()));
            h.auth = Some(ok);
        } else if n.eq_ignore_ascii_case("range") {
            h.range = parse_range(v);
        } else if n.eq_ignore_ascii_case("host") {
            host = true;
        } else if n.eq_ignore_ascii_case("if-match") {
            parse_tags(v, &mut h.cond.if_match);
        } else if n.eq_ignore_ascii_case("if-none-match") {
            parse_tags(v, &mut h.cond.if_none_match);
        } else if n.eq_ignore_ascii_case("if-modified-since") {
            h.cond.if_modified_since = parse_date(v);
        } else if n.eq_ignore_ascii_case("if-unmodified-since") {
            h.cond.if_unmodified_since = parse_date(v);
        } else if n.eq_ignore_ascii_case("accept") {
            h.accept_json |= accepts_json(v);
        }
    }
    if te && h.content_length.is_some() {
        fail(&mut h, 400, "both Content-Length and Transfer-Encoding");
    }
    if h.http11 && !host {
        fail(&mut h, 400, "HTTP/1.1 request without Host");
    }
    h.keep_alive = if h.http11 { !close } else { ka && !close };
    let target = req.path.unwrap_or("");
    match path.parse(target) {
        // The reserved name is compared with the decoded path, as the
        // file system would see it: `/%6Detrics` and `/metrics/` name the
        // metrics too, so neither can store a file there (compared as
        // sent, they did).
        Ok(()) => (h.reserved, h.metrics) = reserved(cfg.metrics_path.as_deref(), path.segments()),
        Err(e) => h.path_error = Some(e),
    }
    h
}

/// Whether a path (its segments, decoded) is the metrics path `m` or below
/// it, and which: (reserved, the metrics path itself). Nothing is created
/// or stored there through any listener: a directory of that name could
/// never be listed over HTTP, whose GET of the path answers the metrics.
pub(crate) fn reserved<'p>(
    m: Option<&str>,
    mut path: impl Iterator<Item = &'p [u8]>,
) -> (bool, bool) {
    let Some(m) = m else {
        return (false, false);
    };
    // Bytes split on a byte: this runs on every request, and a `str`
    // split on a char searches by pattern.
    let mut segs = m
        .as_bytes()
        .split(|&c| c == b'/')
        .filter(|s| !s.is_empty())
        .peekable();
    if segs.peek().is_none() {
        return (false, false);
    }
    let under = segs.all(|s| path.next() == Some(s));
    (under, under && path.next().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(
            parse_range(b"bytes=0-9"),
            Some(RangeSpec::FromTo(0, Some(9)))
        );
        assert_eq!(parse_range(b"bytes=5-"), Some(RangeSpec::FromTo(5, None)));
        assert_eq!(parse_range(b"bytes=-5"), Some(RangeSpec::Suffix(5)));
        assert_eq!(
            parse_range(b"Bytes = 1-2"),
            Some(RangeSpec::FromTo(1, Some(2)))
        );
        assert_eq!(parse_range(b"bytes=9-1"), None);
        assert_eq!(parse_range(b"bytes=0-1,4-5"), None);
        assert_eq!(parse_range(b"items=0-1"), None);
        assert_eq!(parse_range(b"bytes=a-b"), None);
        assert_eq!(
            resolve_range(Some(RangeSpec::FromTo(0, Some(9))), 5),
            Ok(Some((0, 5)))
        );
        assert_eq!(resolve_range(Some(RangeSpec::FromTo(5, None)), 5), Err(()));
        assert_eq!(
            resolve_range(Some(RangeSpec::Suffix(3)), 10),
            Ok(Some((7, 10)))
        );
        assert_eq!(
            resolve_range(Some(RangeSpec::Suffix(30)), 10),
            Ok(Some((0, 10)))
        );
        assert_eq!(resolve_range(Some(RangeSpec::Suffix(0)), 10), Err(()));
        assert_eq!(resolve_range(None, 0), Ok(None));
    }

    /// A head of `n` fields: `X-Filler-k` ones, then the given ones.
    fn head_with(n: usize, last: &[&str]) -> Vec<u8> {
        let mut h = String::from("PUT /a/b HTTP/1.1\r\n");
        for k in 0..n - last.len() {
            h.push_str(&format!("X-Filler-{k}: {k}\r\n"));
        }
        for f in last {
            h.push_str(f);
            h.push_str("\r\n");
        }
        h.push_str("\r\n");
        h.into_bytes()
    }

    /// The header slots are not zeroed before parsing: every field up to
    /// the limit is read, one past it is refused, and a short head after
    /// a long one sees only its own fields.
    #[test]
    fn header_field_limit_and_slot_reuse() {
        let cfg = Config::default();
        let mut path = ReqPath::new();
        let full = head_with(
            MAX_HEADERS,
            &["Host: h", "If-None-Match: *", "Content-Length: 7"],
        );
        let (n, h) = parse_head(&full, &mut path, &cfg, &mut |_| {})
            .unwrap()
            .unwrap();
        assert_eq!(n, full.len());
        assert_eq!(h.content_length, Some(7), "the last slot is read");
        assert_eq!(h.cond.if_none_match, Some(TagList::Any));
        assert!(h.error.is_none(), "{:?}", h.error);
        let over = head_with(MAX_HEADERS + 1, &["Host: h", "Content-Length: 7"]);
        assert_eq!(
            parse_head(&over, &mut path, &cfg, &mut |_| {}).err(),
            Some((431, "too many header fields"))
        );
        let short = head_with(2, &["Host: h", "Content-Length: 3"]);
        let (_, h) = parse_head(&short, &mut path, &cfg, &mut |_| {})
            .unwrap()
            .unwrap();
        assert_eq!(h.content_length, Some(3));
        assert_eq!(
            h.cond.if_none_match, None,
            "nothing left over from the long head"
        );
        let partial = &full[..full.len() - 2];
        assert!(parse_head(partial, &mut path, &cfg, &mut |_| {})
            .unwrap()
            .is_none());
    }

    /// The metrics path is recognised after decoding, however it is
    /// spelled; an undecodable, dot-segment or empty-segment spelling is a
    /// path error (400), never a file name; what is below it is reserved.
    #[test]
    fn metrics_path_after_decoding() {
        let cfg = Config::default();
        let mut path = ReqPath::new();
        let mut head = |t: &str| {
            let r = format!("PUT {t} HTTP/1.1\r\nHost: h\r\n\r\n");
            parse_head(r.as_bytes(), &mut path, &cfg, &mut |_| {})
                .unwrap()
                .unwrap()
                .1
        };
        for t in [
            "/metrics",
            "/%6Detrics",
            "/%6d%65trics",
            "/metrics/",
            "/metrics?x=1",
            "http://h/metrics",
        ] {
            let h = head(t);
            assert!(h.metrics && h.reserved && h.path_error.is_none(), "{t}");
        }
        for t in [
            "/%2Fmetrics",
            "/./metrics",
            "/x/../metrics",
            "/%2e/metrics",
            "//metrics",
        ] {
            let h = head(t);
            assert!(!h.metrics && h.path_error.is_some(), "{t}");
        }
        for t in ["/metrics2", "/Metrics", "/a/metrics"] {
            let h = head(t);
            assert!(!h.metrics && !h.reserved, "{t}");
        }
        for t in ["/metrics/a", "/%6Detrics/a/b/"] {
            let h = head(t);
            assert!(!h.metrics && h.reserved, "{t}: below the metrics path");
        }
    }

    #[test]
    fn conditional_fields() {
        let mut t = None;
        parse_tags(b"\"a\", W/\"b\"", &mut t);
        parse_tags(b"\"c\"", &mut t);
        assert_eq!(
            t,
            Some(TagList::Tags(vec![
                "\"a\"".into(),
                "W/\"b\"".into(),
                "\"c\"".into()
            ]))
        );
        let mut t = None;
        parse_tags(b" * ", &mut t);
        assert_eq!(t, Some(TagList::Any));
        assert_eq!(
            parse_date(b"Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(parse_date(b"yesterday"), None);
        assert!(accepts_json(b"application/json"));
        assert!(accepts_json(b"text/html, application/json;q=0.9"));
        assert!(!accepts_json(b"*/*"));
        assert!(!accepts_json(b"application/json;q=0"));
    }
}
