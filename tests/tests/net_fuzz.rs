//! HTTP framing against a reference model and hostile bytes, on every
//! transport (the io_uring loops, the same loops on epoll, threads), over
//! real sockets.
//!
//! `pipelines_in_any_segmentation`: keep-alive pipelines of PUT (with
//! Content-Length or chunked, chunk extensions and trailers, and
//! preconditions), GET (ranges, preconditions, bodies), HEAD, DELETE and
//! the JSON listing, written in pieces cut anywhere (a multishot receive
//! or a blocking read may see any split), sometimes cut short before the
//! client half-closes. Every complete request is answered as the model of
//! `http_model` says, in order; the request that was cut or refused has no
//! effect (an upload that does not complete is never visible); the server
//! closes once the client has; the image's invariants hold.
//!
//! `both_transports_answer_alike`: the io_uring loops, the threads and the
//! epoll loops give the same answers to the same hostile bytes cut the
//! same way.
//!
//! `hostile_bytes_cost_nothing`: the same requests mutated (bytes flipped,
//! cut, or spliced with hostile tokens: conflicting lengths, overflowing
//! chunk sizes, `..` and `%00` in paths, oversized heads, bad ranges and
//! conditions), or plain random bytes. Every answer is a well-formed
//! HTTP/1.1 response and none is a 500; the server closes once the client
//! has; a file stored before is still byte for byte what it was, with the
//! same ETag; the image's invariants hold.

use std::collections::BTreeMap;

use pktfs_netpath::IoMode;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use crate::http_model::{expect, req, Req, NAMES};
use crate::http_wire::{exchange, parse_answers, CLOSE_WITHIN};
use crate::net_common::{data, http, server, Server};

const MIB: u64 = 1 << 20;
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
fn pipelines_in_any_segmentation_on_epoll() {
    pipelines(IoMode::Epoll);
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
fn hostile_bytes_cost_nothing_on_epoll() {
    hostile(IoMode::Epoll);
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
    let servers = [
        start(IoMode::Uring),
        start(IoMode::Threads),
        start(IoMode::Epoll),
    ];
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
            prop_assert_eq!(
                &answers[0],
                &answers[2],
                "io_uring loops (left) and epoll loops (right) for {:?}",
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
