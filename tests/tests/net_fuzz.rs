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
    },
    /// `junk`: the length of a body it carries (read and dropped before
    /// the request is acted on).
    Get {
        name: usize,
        junk: usize,
    },
    Head {
        name: usize,
    },
    Delete {
        name: usize,
        junk: usize,
    },
}

impl Req {
    fn name(&self) -> usize {
        match self {
            Req::Put { name, .. }
            | Req::Get { name, .. }
            | Req::Head { name }
            | Req::Delete { name, .. } => *name,
        }
    }

    fn body(&self) -> Vec<u8> {
        match self {
            Req::Put { len, seed, .. } => data(*len, *seed),
            _ => Vec::new(),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let path = format!("/{}", NAMES[self.name()]);
        let head = |m: &str, extra: &str| {
            format!("{m} {path} HTTP/1.1\r\nHost: fuzz\r\n{extra}\r\n").into_bytes()
        };
        let with_junk = |m: &str, junk: usize| {
            if junk == 0 {
                return head(m, "");
            }
            let mut v = head(m, &format!("Content-Length: {junk}\r\n"));
            v.extend(data(junk, junk as u64));
            v
        };
        match self {
            Req::Get { junk, .. } => with_junk("GET", *junk),
            Req::Head { .. } => head("HEAD", ""),
            Req::Delete { junk, .. } => with_junk("DELETE", *junk),
            Req::Put {
                chunked: None, len, ..
            } => {
                let mut v = head("PUT", &format!("Content-Length: {len}\r\n"));
                v.extend(self.body());
                v
            }
            Req::Put {
                chunked: Some((cuts, ext)),
                ..
            } => {
                let body = self.body();
                let mut v = head("PUT", "Transfer-Encoding: chunked\r\n");
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
    // Mostly small bodies, some past a record and a packet buffer.
    let len = prop_oneof![4 => 0usize..3000, 1 => 3000usize..70_000];
    let chunked =
        proptest::option::of((proptest::collection::vec(0.0..1.0f64, 0..6), any::<bool>()));
    let put = (name.clone(), len, any::<u64>(), chunked).prop_map(|(name, len, seed, chunked)| {
        Req::Put {
            name,
            len,
            seed,
            chunked,
        }
    });
    let head = if with_head { 1 } else { 0 };
    let junk = || prop_oneof![5 => Just(0usize), 1 => 1usize..5000];
    prop_oneof![
        4 => put,
        2 => (name.clone(), junk()).prop_map(|(name, junk)| Req::Get { name, junk }),
        head => name.clone().prop_map(|name| Req::Head { name }),
        1 => (name, junk()).prop_map(|(name, junk)| Req::Delete { name, junk }),
    ]
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
                Err(e) => return Err(format!(
                    "the server had not closed {:?} after the client did ({e}); it sent {} bytes",
                    t0.elapsed(),
                    got.len()
                )),
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
        proptest::collection::vec(req(true), 1..5),
        proptest::collection::vec((0.0..1.0f64, any::<bool>()), 0..12),
        proptest::option::of(0.0..1.0f64),
    );
    let stats = std::cell::RefCell::new([0usize; 3]);
    runner(48)
        .run(&strategy, |(reqs, cuts, cut_short)| {
            let mut model = contents(&s);
            let mut stream = Vec::new();
            let mut ends = Vec::new();
            for r in &reqs {
                stream.extend(r.bytes());
                ends.push(stream.len());
            }
            let sent = match cut_short {
                Some(f) => (f * stream.len() as f64) as usize,
                None => stream.len(),
            };
            let complete = ends.iter().filter(|&&e| e <= sent).count();
            let got = exchange(s.http, &stream[..sent], &cuts).map_err(TestCaseError::fail)?;
            let answers = parse_answers(&got, |i| matches!(reqs.get(i), Some(Req::Head { .. })))
                .map_err(TestCaseError::fail)?;
            stats.borrow_mut()[0] += complete;
            // Every complete request answered, as the model says.
            prop_assert!(
                answers.len() >= complete,
                "{} answers to {complete} complete requests: {answers:?}",
                answers.len()
            );
            // The ETag each PUT answered with: what a GET or HEAD of the
            // name gives until it changes.
            let mut etags: BTreeMap<usize, String> = BTreeMap::new();
            for (i, r) in reqs.iter().take(complete).enumerate() {
                let a = &answers[i];
                let n = r.name();
                let had = model.get(&n).cloned();
                match r {
                    Req::Put { .. } => {
                        let want = if had.is_some() { 204 } else { 201 };
                        prop_assert_eq!(a.status, want, "request {}: {:?}", i, r);
                        let tag = a.etag.clone();
                        prop_assert!(tag.is_some(), "request {i}: a PUT answered without an ETag");
                        etags.insert(n, tag.unwrap());
                        model.insert(n, r.body());
                    }
                    Req::Get { .. } | Req::Head { .. } => match had {
                        Some(b) => {
                            prop_assert_eq!(a.status, 200, "request {}: {:?}", i, r);
                            if matches!(r, Req::Get { .. }) {
                                prop_assert!(a.body == b, "request {i}: GET's body differs");
                            }
                            prop_assert_eq!(a.content_length, Some(b.len() as u64));
                            if let Some(t) = etags.get(&n) {
                                prop_assert_eq!(a.etag.as_ref(), Some(t), "request {}: {:?}", i, r);
                            }
                        }
                        None => prop_assert_eq!(a.status, 404, "request {}: {:?}", i, r),
                    },
                    Req::Delete { .. } => {
                        let want = if model.remove(&n).is_some() { 204 } else { 404 };
                        etags.remove(&n);
                        prop_assert_eq!(a.status, want, "request {}: {:?}", i, r);
                    }
                }
            }
            // The request cut short may be answered (400: an incomplete
            // request), and nothing after it.
            if sent < stream.len() && sent > complete.checked_sub(1).map_or(0, |k| ends[k]) {
                stats.borrow_mut()[1] += 1;
                prop_assert!(
                    answers.len() <= complete + 1,
                    "answers past the cut: {:?}",
                    &answers[complete..]
                );
                if let Some(a) = answers.get(complete) {
                    prop_assert_eq!(a.status, 400, "the answer to a request cut short");
                }
            } else {
                prop_assert_eq!(
                    answers.len(),
                    complete,
                    "answers to nothing: {:?}",
                    &answers[complete..]
                );
            }
            // Stored as answered; what was cut left no trace.
            s.settle();
            prop_assert_eq!(contents(&s), model.clone());
            let mut listed: Vec<String> = s
                .vol
                .list_dir(s.vol.root())
                .unwrap()
                .into_iter()
                .map(|e| String::from_utf8(e.name).unwrap())
                .collect();
            listed.sort();
            let want: Vec<String> = model.keys().map(|&i| NAMES[i].to_string()).collect();
            prop_assert_eq!(listed, want);
            stats.borrow_mut()[2] += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{io:?}: {e}"));
    s.check();
    let stats = stats.into_inner();
    eprintln!(
        "{io:?}: {} pipelines, {} complete requests answered as the model says, {} cut short",
        stats[2], stats[0], stats[1]
    );
    assert!(
        stats[1] > 0 && stats[0] > stats[2],
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
                    v.extend(r.bytes());
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
