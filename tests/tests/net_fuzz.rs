//! HTTP framing against a reference model and hostile bytes, on both
//! transports, over real sockets.
//!
//! `pipelines_in_any_segmentation`: keep-alive pipelines of PUT (with
//! Content-Length or chunked, chunk extensions and trailers), GET, HEAD and
//! DELETE, written in pieces cut anywhere (a multishot receive or a
//! blocking read may see any split), sometimes cut short before the client
//! half-closes. Every complete request is answered as a model of the names
//! says, in order; the request that was cut has no effect (an upload that
//! does not complete is never visible); the server closes once the client
//! has; the image's invariants hold.
//!
//! `hostile_bytes_cost_nothing`: the same requests mutated (bytes flipped,
//! cut, or spliced with hostile tokens: conflicting lengths, overflowing
//! chunk sizes, `..` and `%00` in paths, oversized heads, bad ranges and
//! conditions), or plain random bytes. Every answer is a well-formed
//! HTTP/1.1 response and none is a 500; the server closes once the client
//! has; a file stored before is still byte for byte what it was, with the
//! same ETag; the image's invariants hold.

mod net_common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use net_common::{data, http, server, Server};
use netpath::IoMode;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

const MIB: u64 = 1 << 20;
/// The names the requests use, at the root.
const NAMES: [&str; 3] = ["a", "b", "c"];
/// How long the server may take to close after the client half-closed.
/// Far above what it needs (it reads EOF at once); its timeouts are set
/// above this, so only an EOF can end the connection in time.
const CLOSE_WITHIN: Duration = Duration::from_secs(8);

/// A precondition a request carries.
#[derive(Clone, Copy, Debug)]
enum Cond {
    None,
    /// `If-None-Match: *`: create only.
    CreateOnly,
    /// `If-Match:` the name's current ETag (one no file has when there is
    /// no file).
    IfMatchCurrent,
    /// `If-Match:` an ETag no file of these tests has.
    IfMatchStale,
    /// `If-Match: *`.
    IfMatchAny,
    /// `If-None-Match:` the current ETag (a GET answered 304 while the
    /// file is unchanged).
    IfNoneMatchCurrent,
}

/// A `Range: bytes=` request.
#[derive(Clone, Copy, Debug)]
enum Range {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

/// An ETag no file here has (no body is 2 GiB long).
const STALE: &str = "\"c-0badc0de-7fffffff\"";

/// The ETag of a file: its content's CRC32C and its length (computed by
/// the server from the records' CRCs, never from a second pass).
fn etag(b: &[u8]) -> String {
    format!("\"c-{:08x}-{:x}\"", crc32c::crc32c(b), b.len())
}

#[derive(Clone, Debug)]
enum Req {
    Put {
        name: usize,
        /// Body length and the seed of its bytes.
        len: usize,
        seed: u64,
        /// Chunked framing: cut points (fractions of the body) and whether
        /// the chunks carry extensions and the end a trailer.
        chunked: Option<(Vec<f64>, bool)>,
        cond: Cond,
    },
    /// `junk`: the length of a body it carries (read and dropped before
    /// the request is acted on).
    Get {
        name: usize,
        junk: usize,
        range: Option<Range>,
        cond: Cond,
    },
    Head {
        name: usize,
    },
    Delete {
        name: usize,
        junk: usize,
    },
    /// `GET /` with `Accept: application/json`: the listing.
    List,
}

impl Req {
    /// The name it is about (the listing: none, 0 stands in).
    fn name(&self) -> usize {
        match self {
            Req::Put { name, .. }
            | Req::Get { name, .. }
            | Req::Head { name }
            | Req::Delete { name, .. } => *name,
            Req::List => 0,
        }
    }

    fn body(&self) -> Vec<u8> {
        match self {
            Req::Put { len, seed, .. } => data(*len, *seed),
            _ => Vec::new(),
        }
    }

    /// The request's bytes, `cur` the name's content when it is sent (for
    /// the preconditions that name the current ETag).
    fn bytes(&self, cur: Option<&[u8]>) -> Vec<u8> {
        let path = format!("/{}", NAMES[self.name()]);
        let head = |m: &str, extra: &str| {
            format!("{m} {path} HTTP/1.1\r\nHost: fuzz\r\n{extra}\r\n").into_bytes()
        };
        let with_junk = |m: &str, extra: &str, junk: usize| {
            if junk == 0 {
                return head(m, extra);
            }
            // Now and then the client says it waits for 100 Continue (it
            // sends the body anyway; the 100 must not upset the pipeline).
            let expect = if junk.is_multiple_of(2) {
                "Expect: 100-continue\r\n"
            } else {
                ""
            };
            let mut v = head(m, &format!("{extra}{expect}Content-Length: {junk}\r\n"));
            v.extend(data(junk, junk as u64));
            v
        };
        let tag = cur.map(etag).unwrap_or_else(|| STALE.to_string());
        let cond = |c: Cond| match c {
            Cond::None => String::new(),
            Cond::CreateOnly => "If-None-Match: *\r\n".into(),
            Cond::IfMatchCurrent => format!("If-Match: {tag}\r\n"),
            Cond::IfMatchStale => format!("If-Match: {STALE}\r\n"),
            Cond::IfMatchAny => "If-Match: *\r\n".into(),
            Cond::IfNoneMatchCurrent => format!("If-None-Match: {tag}\r\n"),
        };
        match self {
            Req::List => {
                b"GET / HTTP/1.1\r\nHost: fuzz\r\nAccept: application/json\r\n\r\n".to_vec()
            }
            Req::Get {
                junk,
                range,
                cond: c,
                ..
            } => {
                let mut extra = cond(*c);
                match range {
                    None => {}
                    Some(Range::FromTo(a, None)) => extra += &format!("Range: bytes={a}-\r\n"),
                    Some(Range::FromTo(a, Some(b))) => {
                        extra += &format!("Range: bytes={a}-{b}\r\n")
                    }
                    Some(Range::Suffix(n)) => extra += &format!("Range: bytes=-{n}\r\n"),
                }
                with_junk("GET", &extra, *junk)
            }
            Req::Head { .. } => head("HEAD", ""),
            Req::Delete { junk, .. } => with_junk("DELETE", "", *junk),
            Req::Put {
                chunked: None,
                len,
                cond: c,
                ..
            } => {
                let mut v = head("PUT", &format!("{}Content-Length: {len}\r\n", cond(*c)));
                v.extend(self.body());
                v
            }
            Req::Put {
                chunked: Some((cuts, ext)),
                cond: c,
                ..
            } => {
                let body = self.body();
                let mut v = head(
                    "PUT",
                    &format!("{}Transfer-Encoding: chunked\r\n", cond(*c)),
                );
                let mut at: Vec<usize> = cuts
                    .iter()
                    .map(|f| (f * body.len() as f64) as usize)
                    .collect();
                at.push(0);
                at.push(body.len());
                at.sort_unstable();
                at.dedup();
                for w in at.windows(2) {
                    let p = &body[w[0]..w[1]];
                    if *ext {
                        v.extend(format!("{:X};x=\"1\"\r\n", p.len()).bytes());
                    } else {
                        v.extend(format!("{:x}\r\n", p.len()).bytes());
                    }
                    v.extend_from_slice(p);
                    v.extend_from_slice(b"\r\n");
                }
                v.extend_from_slice(b"0\r\n");
                if *ext {
                    v.extend_from_slice(b"X-Trailer: yes\r\n");
                }
                v.extend_from_slice(b"\r\n");
                v
            }
        }
    }
}

fn req(with_head: bool) -> impl Strategy<Value = Req> {
    let name = 0..NAMES.len();
    // Mostly small bodies, some past a record, a packet buffer and the
    // size a refused request's body is still read at (64 KiB).
    let len = prop_oneof![4 => 0usize..3000, 1 => 3000usize..70_000];
    let chunked =
        proptest::option::of((proptest::collection::vec(0.0..1.0f64, 0..6), any::<bool>()));
    let put_cond = prop_oneof![
        6 => Just(Cond::None),
        1 => Just(Cond::CreateOnly),
        1 => Just(Cond::IfMatchCurrent),
        1 => Just(Cond::IfMatchStale),
        1 => Just(Cond::IfMatchAny),
    ];
    let put = (name.clone(), len, any::<u64>(), chunked, put_cond).prop_map(
        |(name, len, seed, chunked, cond)| Req::Put {
            name,
            len,
            seed,
            chunked,
            cond,
        },
    );
    let head = if with_head { 1 } else { 0 };
    let junk = || prop_oneof![5 => Just(0usize), 1 => 1usize..5000];
    let range = prop_oneof![
        3 => Just(None),
        1 => (0u64..4000, proptest::option::of(0u64..4000))
            .prop_map(|(a, b)| Some(Range::FromTo(a, b))),
        1 => (0u64..4000).prop_map(|n| Some(Range::Suffix(n))),
    ];
    let get_cond = prop_oneof![
        4 => Just(Cond::None),
        1 => Just(Cond::IfNoneMatchCurrent),
        1 => Just(Cond::IfMatchStale),
    ];
    let get =
        (name.clone(), junk(), range, get_cond).prop_map(|(name, junk, range, cond)| Req::Get {
            name,
            junk,
            range,
            cond,
        });
    prop_oneof![
        4 => put,
        3 => get,
        head => name.clone().prop_map(|name| Req::Head { name }),
        1 => (name, junk()).prop_map(|(name, junk)| Req::Delete { name, junk }),
        head => Just(Req::List),
    ]
}

/// What a request should be answered, by a model of the names (which it
/// updates).
#[derive(Debug)]
struct Expect {
    status: u16,
    /// The body of a 200 or 206 to a GET.
    body: Option<Vec<u8>>,
    content_length: Option<u64>,
    etag: Option<String>,
    /// Answered as soon as its head is in (a refusal before the body).
    at_head: bool,
    /// The server closes the connection after the answer (a refused body
    /// too large to read and drop).
    closes: bool,
    /// A JSON listing's entries (their `mtime` not compared).
    listing: Option<Vec<serde_json::Value>>,
}

fn expect(r: &Req, model: &mut BTreeMap<usize, Vec<u8>>) -> Expect {
    let n = r.name();
    let cur = model.get(&n).cloned();
    let mut e = Expect {
        status: 404,
        body: None,
        content_length: None,
        etag: None,
        at_head: false,
        closes: false,
        listing: None,
    };
    match r {
        Req::Put {
            cond, chunked, len, ..
        } => {
            let pass = match cond {
                Cond::None => true,
                Cond::CreateOnly => cur.is_none(),
                Cond::IfMatchCurrent | Cond::IfMatchAny => cur.is_some(),
                Cond::IfMatchStale | Cond::IfNoneMatchCurrent => false,
            };
            if !pass {
                e.status = 412;
                e.at_head = true;
                e.closes = chunked.is_some() || *len as u64 > 64 << 10;
                return e;
            }
            let body = r.body();
            e.status = if cur.is_some() { 204 } else { 201 };
            e.etag = Some(etag(&body));
            model.insert(n, body);
        }
        Req::Get { range, cond, .. } => {
            let Some(c) = cur else { return e };
            let size = c.len() as u64;
            e.etag = Some(etag(&c));
            match cond {
                // A 304 carries the ETag a 200 would (RFC 9110 15.4.5).
                Cond::IfNoneMatchCurrent => {
                    e.status = 304;
                    return e;
                }
                Cond::IfMatchStale => {
                    e.status = 412;
                    e.etag = None;
                    return e;
                }
                _ => {}
            }
            // RFC 9110 14: an invalid range is ignored; one that starts past
            // the end (or a suffix of nothing) is unsatisfiable.
            let part = match *range {
                None => None,
                Some(Range::FromTo(a, Some(b))) if b < a => None,
                Some(Range::FromTo(a, _)) if a >= size => Some(None),
                Some(Range::FromTo(a, b)) => Some(Some((a, b.map_or(size, |b| (b + 1).min(size))))),
                Some(Range::Suffix(k)) if k == 0 || size == 0 => Some(None),
                Some(Range::Suffix(k)) => Some(Some((size - k.min(size), size))),
            };
            match part {
                None => {
                    e.status = 200;
                    e.content_length = Some(size);
                    e.body = Some(c);
                }
                Some(None) => {
                    e.status = 416;
                    e.etag = None;
                }
                Some(Some((a, b))) => {
                    e.status = 206;
                    e.content_length = Some(b - a);
                    e.body = Some(c[a as usize..b as usize].to_vec());
                }
            }
        }
        Req::Head { .. } => {
            if let Some(c) = cur {
                e.status = 200;
                e.content_length = Some(c.len() as u64);
                e.etag = Some(etag(&c));
            }
        }
        Req::Delete { .. } => {
            if model.remove(&n).is_some() {
                e.status = 204;
            }
        }
        Req::List => {
            // Sorted by name: name, type, size and ETag of each file.
            let list: Vec<serde_json::Value> = model
                .iter()
                .map(|(&i, b)| {
                    serde_json::json!({
                        "name": NAMES[i],
                        "type": "file",
                        "size": b.len(),
                        "etag": etag(b),
                    })
                })
                .collect();
            e.status = 200;
            e.listing = Some(list);
        }
    }
    e
}

/// One response as the client saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_length: Option<u64>,
    etag: Option<String>,
    body: Vec<u8>,
}

/// Parse the responses in `b`, the whole of what the server sent;
/// `head_only(i)`: the i-th request was HEAD. Err if anything is not
/// well-formed HTTP/1.1.
fn parse_answers(mut b: &[u8], head_only: impl Fn(usize) -> bool) -> Result<Vec<Answer>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let end = b.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| {
            format!(
                "a response head without its end: {:?}",
                String::from_utf8_lossy(b)
            )
        })?;
        let head =
            std::str::from_utf8(&b[..end]).map_err(|_| "a head that is not UTF-8".to_string())?;
        b = &b[end + 4..];
        let mut lines = head.split("\r\n");
        let sl = lines.next().unwrap_or("");
        let status: u16 = sl
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|s| s.parse().ok())
            .filter(|s| (100..600).contains(s))
            .ok_or_else(|| format!("a bad status line {sl:?}"))?;
        let mut content_length = None;
        let mut chunked = false;
        let mut etag = None;
        for l in lines {
            let (n, v) = l
                .split_once(':')
                .ok_or_else(|| format!("a header line without a colon: {l:?}"))?;
            let v = v.trim();
            if n.eq_ignore_ascii_case("content-length") {
                content_length = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("Content-Length {v:?}"))?,
                );
            } else if n.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.eq_ignore_ascii_case("chunked");
            } else if n.eq_ignore_ascii_case("etag") {
                etag = Some(v.to_string());
            }
        }
        if status == 100 {
            continue;
        }
        let mut body = Vec::new();
        let no_body = head_only(out.len()) || status == 204 || status == 304;
        if chunked && !no_body {
            loop {
                let e = b
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .ok_or("a chunk size line without its end")?;
                let line = std::str::from_utf8(&b[..e]).map_err(|_| "chunk size line")?;
                let n = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(|_| format!("a chunk size {line:?}"))?;
                b = &b[e + 2..];
                if n == 0 {
                    let t = b
                        .windows(2)
                        .position(|w| w == b"\r\n")
                        .ok_or("a chunked body without its end")?;
                    if t != 0 {
                        return Err("trailers in a response".into());
                    }
                    b = &b[2..];
                    break;
                }
                if b.len() < n + 2 || &b[n..n + 2] != b"\r\n" {
                    return Err("a chunk cut short".into());
                }
                body.extend_from_slice(&b[..n]);
                b = &b[n + 2..];
            }
        } else if !no_body {
            let n = content_length.ok_or("a response without Content-Length or chunking")? as usize;
            if b.len() < n {
                return Err(format!("a body cut short: {} of {n} bytes", b.len()));
            }
            body.extend_from_slice(&b[..n]);
            b = &b[n..];
        }
        out.push(Answer {
            status,
            content_length,
            etag,
            body,
        });
    }
    Ok(out)
}

/// Write `bytes` to a new connection in the pieces `cuts` (fractions of
/// its length) make, pausing after the pieces `pause` marks; half-close;
/// read until the server closes. Err if it has not closed within
/// CLOSE_WITHIN.
fn exchange(addr: SocketAddr, bytes: &[u8], cuts: &[(f64, bool)]) -> Result<Vec<u8>, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).unwrap();
    let mut r = s.try_clone().unwrap();
    r.set_read_timeout(Some(CLOSE_WITHIN)).unwrap();
    // Read while writing: a pipeline's answers can outgrow the socket
    // buffers.
    let reader = std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut got = Vec::new();
        let mut b = vec![0u8; 1 << 16];
        loop {
            match r.read(&mut b) {
                Ok(0) => return Ok(got),
                Ok(n) => got.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
                Err(e) => {
                    return Err(format!(
                    "the server had not closed {:?} after the client did ({e}); it sent {} bytes",
                    t0.elapsed(),
                    got.len()
                ))
                }
            }
        }
    });
    let mut at: Vec<(usize, bool)> = cuts
        .iter()
        .map(|(f, p)| ((f * bytes.len() as f64) as usize, *p))
        .collect();
    at.push((bytes.len(), false));
    at.sort_unstable();
    let mut w = &s;
    let mut from = 0;
    for (to, pause) in at {
        if to > from {
            // A reset (the server refused the rest) ends the writing.
            if w.write_all(&bytes[from..to]).is_err() {
                break;
            }
            from = to;
        }
        if pause {
            std::thread::sleep(Duration::from_micros(300));
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    reader.join().unwrap()
}

fn start(io: IoMode) -> Server {
    server(64 * MIB, |c| {
        c.io = io;
        c.header_timeout = CLOSE_WITHIN * 3;
        c.io_timeout = CLOSE_WITHIN * 3;
        c.idle_timeout = CLOSE_WITHIN * 3;
    })
}

fn runner(cases: u32) -> TestRunner {
    let cases = std::env::var("PKTFS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(cases);
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

/// What the names hold now, read through the Volume.
fn contents(s: &Server) -> BTreeMap<usize, Vec<u8>> {
    (0..NAMES.len())
        .filter_map(|i| s.read(&format!("/{}", NAMES[i])).map(|b| (i, b)))
        .collect()
}

fn pipelines(io: IoMode) {
    let s = start(io);
    let strategy = (
        proptest::collection::vec(req(true), 1..6),
        proptest::collection::vec((0.0..1.0f64, any::<bool>()), 0..12),
        proptest::option::of(0.0..1.0f64),
    );
    // answered as the model says, cut short, pipelines, conditional or
    // range answers (304, 206, 412, 416)
    let stats = std::cell::RefCell::new([0usize; 4]);
    runner(64)
        .run(&strategy, |(reqs, cuts, cut_short)| {
            // The stream, and what each request should be answered and
            // leave behind, by the model.
            let mut model = contents(&s);
            let mut states = vec![model.clone()];
            let mut stream = Vec::new();
            let mut spans = Vec::new(); // (start, head end, end)
            let mut exps = Vec::new();
            for r in &reqs {
                let b = r.bytes(model.get(&r.name()).map(|v| &v[..]));
                let head = b.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
                spans.push((stream.len(), stream.len() + head, stream.len() + b.len()));
                stream.extend(b);
                exps.push(expect(r, &mut model));
                states.push(model.clone());
            }
            let sent = match cut_short {
                Some(f) => (f * stream.len() as f64) as usize,
                None => stream.len(),
            };
            // Which requests are answered: each once it is whole (or its
            // head is, for a refusal), in order, none after a close.
            let mut answered = 0;
            let mut stopped_in_request = false;
            for (i, e) in exps.iter().enumerate() {
                let (from, head_end, end) = spans[i];
                if (if e.at_head { head_end } else { end }) > sent {
                    stopped_in_request = from < sent;
                    break;
                }
                answered += 1;
                if e.closes {
                    break;
                }
            }
            let got = exchange(s.http, &stream[..sent], &cuts).map_err(TestCaseError::fail)?;
            let answers = parse_answers(&got, |i| matches!(reqs.get(i), Some(Req::Head { .. })))
                .map_err(TestCaseError::fail)?;
            prop_assert!(
                answers.len() >= answered,
                "{} answers where {answered} were due: {answers:?}",
                answers.len()
            );
            for (i, (a, e)) in answers.iter().zip(&exps).take(answered).enumerate() {
                let r = &reqs[i];
                prop_assert_eq!(a.status, e.status, "request {}: {:?}", i, r);
                if let Some(b) = &e.body {
                    prop_assert!(&a.body == b, "request {i}: the body differs ({r:?})");
                }
                if e.content_length.is_some() {
                    prop_assert_eq!(a.content_length, e.content_length, "request {}: {:?}", i, r);
                }
                if e.etag.is_some() {
                    prop_assert_eq!(&a.etag, &e.etag, "request {}: {:?}", i, r);
                }
                if let Some(want) = &e.listing {
                    let got: Vec<serde_json::Value> = serde_json::from_slice(&a.body)
                        .map_err(|x| TestCaseError::fail(format!("listing: {x}")))?;
                    let got: Vec<serde_json::Value> = got
                        .into_iter()
                        .map(|mut v| {
                            let m = v.as_object_mut().expect("an object per entry");
                            prop_assert!(m.remove("mtime").is_some_and(|t| t.is_string()));
                            Ok(v)
                        })
                        .collect::<Result<_, TestCaseError>>()?;
                    prop_assert_eq!(&got, want, "request {}: the listing", i);
                }
                if matches!(a.status, 206 | 304 | 412 | 416) {
                    stats.borrow_mut()[3] += 1;
                }
            }
            // A request cut short may be answered 400 (incomplete), and
            // nothing after it.
            if stopped_in_request {
                stats.borrow_mut()[1] += 1;
                prop_assert!(
                    answers.len() <= answered + 1,
                    "answers past the cut: {:?}",
                    &answers[answered..]
                );
                if let Some(a) = answers.get(answered) {
                    prop_assert_eq!(a.status, 400, "the answer to a request cut short");
                }
            } else {
                prop_assert_eq!(
                    answers.len(),
                    answered,
                    "answers to nothing: {:?}",
                    &answers[answered..]
                );
            }
            // Stored as answered; what was cut or refused left no trace.
            s.settle();
            let want = &states[answered];
            prop_assert!(
                &contents(&s) == want,
                "the names hold other than the model says"
            );
            let mut listed: Vec<String> = s
                .vol
                .list_dir(s.vol.root())
                .unwrap()
                .into_iter()
                .map(|e| String::from_utf8(e.name).unwrap())
                .collect();
            listed.sort();
            let names: Vec<String> = want.keys().map(|&i| NAMES[i].to_string()).collect();
            prop_assert_eq!(listed, names);
            let mut st = stats.borrow_mut();
            st[0] += answered;
            st[2] += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{io:?}: {e}"));
    s.check();
    let stats = stats.into_inner();
    eprintln!(
        "{io:?}: {} pipelines, {} requests answered as the model says ({} of them 206, 304, 412 \
         or 416), {} cut short",
        stats[2], stats[0], stats[3], stats[1]
    );
    assert!(
        stats[1] > 0 && stats[0] > stats[2] && stats[3] > 0,
        "the generator exercised too little"
    );
}

#[test]
fn pipelines_in_any_segmentation_on_the_loops() {
    pipelines(IoMode::Uring);
}

#[test]
fn pipelines_in_any_segmentation_on_threads() {
    pipelines(IoMode::Threads);
}

/// Byte strings a hostile or broken client might splice in.
const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b"\0",
    b":",
    b" ",
    b"\t",
    b"Content-Length: 99999999999999999999999\r\n",
    b"Content-Length: 1099511627776\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Content-Length: 0x10\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Transfer-Encoding: chunked, gzip\r\n",
    b"ffffffffffffffffffffff\r\n",
    b"-1\r\n",
    b"0\r\n\r\n",
    b"1;ext=\"x\r\nA\r\n",
    b"/../..",
    b"/.",
    b"//",
    b"%00",
    b"%2F",
    b"%zz",
    b"%",
    b"?q=1#f",
    b"Range: bytes=5-2\r\n",
    b"Range: bytes=-0\r\n",
    b"Range: bytes=0-18446744073709551615\r\n",
    b"Range: bytes=1-2,3-4\r\n",
    b"If-Match: \"\r\n",
    b"If-Match: *\r\n",
    b"If-None-Match: *\r\n",
    b"If-None-Match: \"x\", W/\"y\"\r\n",
    b"If-Modified-Since: yesterday\r\n",
    b"If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n",
    b"Expect: 100-continue\r\n",
    b"Expect: x\r\n",
    b"Connection: close\r\n",
    b"Accept: application/json\r\n",
    b"Authorization: Bearer x\r\n",
    b"HTTP/1.0",
    b"HTTP/9.9",
    b"GET ",
    b"DELETE ",
    b"PUT ",
    b"POST ",
    b"OPTIONS ",
    b"\xff\xfe",
];

#[derive(Clone, Debug)]
enum Mutation {
    Flip(f64, u8),
    Splice(f64, usize),
    Delete(f64, usize),
    /// A header line longer than any head the server takes.
    Huge(f64),
}

fn mutate(mut v: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    let at = |f: f64, v: &Vec<u8>| ((f * v.len() as f64) as usize).min(v.len());
    for m in ms {
        match *m {
            Mutation::Flip(f, x) => {
                let i = at(f, &v);
                if i < v.len() {
                    v[i] ^= x | 1;
                }
            }
            Mutation::Splice(f, t) => {
                let i = at(f, &v);
                v.splice(i..i, TOKENS[t % TOKENS.len()].iter().copied());
            }
            Mutation::Delete(f, n) => {
                let i = at(f, &v);
                let j = (i + n).min(v.len());
                v.drain(i..j);
            }
            Mutation::Huge(f) => {
                let i = at(f, &v);
                let mut h = b"X-Huge: ".to_vec();
                h.resize(70_000, b'h');
                h.extend_from_slice(b"\r\n");
                v.splice(i..i, h);
            }
        }
    }
    v
}

/// Mutated pipelines (and now and then plain random bytes), with the
/// pieces they are written in.
fn hostile_input() -> impl Strategy<Value = (Vec<u8>, Vec<(f64, bool)>)> {
    let mutation = prop_oneof![
        4 => (0.0..1.0f64, any::<u8>()).prop_map(|(f, x)| Mutation::Flip(f, x)),
        6 => (0.0..1.0f64, any::<usize>()).prop_map(|(f, t)| Mutation::Splice(f, t)),
        2 => (0.0..1.0f64, 1usize..40).prop_map(|(f, n)| Mutation::Delete(f, n)),
        1 => (0.0..1.0f64).prop_map(Mutation::Huge),
    ];
    let input = prop_oneof![
        6 => (
            proptest::collection::vec(req(false), 1..4),
            proptest::collection::vec(mutation, 1..6)
        )
            .prop_map(|(reqs, ms)| {
                let mut v = Vec::new();
                for r in &reqs {
                    v.extend(r.bytes(None));
                }
                mutate(v, &ms)
            }),
        1 => proptest::collection::vec(any::<u8>(), 0..2000),
    ];
    (
        input,
        proptest::collection::vec((0.0..1.0f64, any::<bool>()), 0..6),
    )
}

fn hostile(io: IoMode) {
    let s = start(io);
    let control = data(20_000, 99);
    let put = http(s.http, "PUT", "/control", &[], &control);
    assert_eq!(put.status, 201);
    let etag = put.header("ETag").expect("an ETag").to_string();

    let strategy = hostile_input();
    let statuses = std::cell::RefCell::new(BTreeMap::<u16, usize>::new());
    runner(160)
        .run(&strategy, |(bytes, cuts)| {
            let got = exchange(s.http, &bytes, &cuts).map_err(TestCaseError::fail)?;
            let answers = parse_answers(&got, |_| false).map_err(TestCaseError::fail)?;
            for a in &answers {
                *statuses.borrow_mut().entry(a.status).or_default() += 1;
                prop_assert!(
                    a.status < 500 || [501, 505, 507].contains(&a.status),
                    "answered {}: {:?}",
                    a.status,
                    String::from_utf8_lossy(&a.body)
                );
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{io:?}: {e}"));
    // Whatever came in, the file stored before is as it was.
    let get = http(s.http, "GET", "/control", &[], b"");
    assert_eq!(get.status, 200);
    assert!(get.body == control, "the control file changed");
    assert_eq!(get.header("ETag"), Some(etag.as_str()));
    assert_eq!(s.read("/control").as_deref(), Some(&control[..]));
    s.check();
    let statuses = statuses.into_inner();
    eprintln!("{io:?}: answers by status: {statuses:?}");
    // The mutations reached the parser's error paths and its success ones.
    assert!(statuses.keys().any(|&c| c == 400), "no 400 in {statuses:?}");
    assert!(statuses.keys().any(|&c| c < 300), "no 2xx in {statuses:?}");
}

#[test]
fn hostile_bytes_cost_nothing_on_the_loops() {
    hostile(IoMode::Uring);
}

#[test]
fn hostile_bytes_cost_nothing_on_threads() {
    hostile(IoMode::Threads);
}

/// The two transports parse with the same code but read differently (one
/// blocking read at a time against multishot receives): the same bytes,
/// cut the same way, get the same answers from both.
#[test]
fn both_transports_answer_alike() {
    let servers = [start(IoMode::Uring), start(IoMode::Threads)];
    let agreed = std::cell::Cell::new(0usize);
    runner(160)
        .run(&hostile_input(), |(bytes, cuts)| {
            let mut answers = Vec::new();
            for s in &servers {
                let got = exchange(s.http, &bytes, &cuts).map_err(TestCaseError::fail)?;
                let a = parse_answers(&got, |_| false).map_err(TestCaseError::fail)?;
                // Statuses, and the bodies of what was read back (a 201's
                // says how many records the body landed in, which depends
                // on how it was cut).
                answers.push(
                    a.iter()
                        .map(|a| (a.status, (a.status == 200).then(|| a.body.clone())))
                        .collect::<Vec<_>>(),
                );
            }
            prop_assert_eq!(
                &answers[0],
                &answers[1],
                "io_uring loops (left) and threads (right) for {:?}",
                String::from_utf8_lossy(&bytes)
            );
            agreed.set(agreed.get() + answers[0].len());
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    for s in &servers {
        s.check();
    }
    eprintln!("{} answers alike", agreed.get());
}
