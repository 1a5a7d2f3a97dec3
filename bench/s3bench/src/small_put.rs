//! Small-object PUTs: `conns` keep-alive connections, each sending one
//! signed PUT of a distinct key at a time (a closed loop, as wrk and the
//! SDKs' transfer pools do), for `secs`, on `threads` epoll loops (mio).
//! Every answer is checked: status 200 and the ETag of the body sent.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::bodies::{Body, Checksum};
use crate::http::parse_head;
use crate::latency::Histogram;
use crate::request::{Endpoint, Payload};

/// The most answers that may fail before a run stops: a server refusing
/// everything is found in a second, not after the whole run.
const MAX_ERRORS: u64 = 1000;

/// How long in-flight requests may take to be answered once the run's
/// time is up.
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Opts {
    pub conns: usize,
    pub threads: usize,
    pub secs: f64,
    pub checksum: Checksum,
    pub payload: Payload,
    pub bucket: String,
    /// Keys are `PREFIX/T-C-N` (thread, connection, request).
    pub prefix: String,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Answers 200 with the right ETag.
    pub ok: u64,
    /// Anything else: another status, a wrong ETag, a closed or failed
    /// connection, a request unanswered after the drain.
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the start to the last answer.
    pub elapsed_s: f64,
    pub latency: Histogram,
}

struct Conn {
    s: TcpStream,
    out: Vec<u8>,
    sent: usize,
    inb: Vec<u8>,
    /// A request is in flight.
    busy: bool,
    t0: Instant,
    body: usize,
    n: u64,
}

/// One loop's part of the run.
struct Lane<'a> {
    ep: &'a Endpoint,
    addr: SocketAddr,
    o: &'a Opts,
    bodies: &'a [Body],
    thread: usize,
    out: Outcome,
    last_answer: Instant,
}

impl Lane<'_> {
    fn error(&mut self, what: String) {
        self.out.errors += 1;
        if self.out.first_error.is_none() {
            self.out.first_error = Some(what);
        }
    }

    /// Put the next request of connection `k` in its send buffer.
    fn next_request(&self, k: usize, c: &mut Conn) {
        c.n += 1;
        c.body = (c.n as usize + k) % self.bodies.len();
        let b = &self.bodies[c.body];
        let path = format!(
            "/{}/{}/{}-{k}-{}",
            self.o.bucket, self.o.prefix, self.thread, c.n
        );
        c.out = self.ep.head(
            "PUT",
            &path,
            "",
            Some((b, self.o.checksum)),
            self.o.payload,
            &[],
        );
        c.out.extend_from_slice(&b.data);
        c.sent = 0;
        c.busy = true;
        c.t0 = Instant::now();
    }

    /// Send and receive on `c` until the socket would block: answers are
    /// checked and, before `stop`, the next request follows at once.
    fn pump(&mut self, k: usize, c: &mut Conn, stop: bool) -> Result<(), String> {
        loop {
            let mut progress = false;
            while c.sent < c.out.len() {
                match c.s.write(&c.out[c.sent..]) {
                    Ok(0) => return Err("the connection takes no more bytes".into()),
                    Ok(n) => {
                        c.sent += n;
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("send: {e}")),
                }
            }
            loop {
                let at = c.inb.len();
                if at >= crate::http::MAX_HEAD_BYTES * 4 {
                    return Err("an answer larger than the client reads".into());
                }
                c.inb.resize(at + 8192, 0);
                match c.s.read(&mut c.inb[at..]) {
                    Ok(0) => {
                        c.inb.truncate(at);
                        return Err("the server closed the connection".into());
                    }
                    Ok(n) => {
                        c.inb.truncate(at + n);
                        progress = true;
                    }
                    Err(e) => {
                        c.inb.truncate(at);
                        match e.kind() {
                            ErrorKind::WouldBlock => break,
                            ErrorKind::Interrupted => {}
                            _ => return Err(format!("receive: {e}")),
                        }
                    }
                }
            }
            if c.busy {
                if let Some(h) = parse_head(&c.inb).map_err(|e| e.to_string())? {
                    let end = h.head_bytes + h.content_length as usize;
                    if c.inb.len() >= end {
                        let us = c.t0.elapsed().as_micros() as u64;
                        self.last_answer = Instant::now();
                        let want = &self.bodies[c.body].etag;
                        if h.status == 200 && h.etag.as_deref() == Some(want.as_str()) {
                            self.out.ok += 1;
                            self.out.latency.record(us);
                        } else {
                            let body = String::from_utf8_lossy(&c.inb[h.head_bytes..end]);
                            self.error(format!(
                                "PUT answered {} with ETag {:?} (want {want}): {}",
                                h.status,
                                h.etag,
                                &body[..body.len().min(400)]
                            ));
                        }
                        c.inb.drain(..end);
                        c.busy = false;
                        if h.close {
                            return Err("the server closes the connection".into());
                        }
                        if !stop {
                            self.next_request(k, c);
                            progress = true;
                        }
                    }
                }
            }
            if !progress {
                return Ok(());
            }
        }
    }
}

fn connect(addr: SocketAddr) -> Result<TcpStream, String> {
    let s = std::net::TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(TcpStream::from_std(s))
}

/// One loop with connections `conns` until `deadline`, then the drain.
fn lane(
    mut l: Lane<'_>,
    conns: usize,
    start: &std::sync::Barrier,
    t_start: &std::sync::OnceLock<Instant>,
) -> Result<Outcome, String> {
    let setup = (|| -> Result<(Poll, Vec<Conn>), String> {
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let mut cs: Vec<Conn> = Vec::with_capacity(conns);
        for k in 0..conns {
            let mut s = connect(l.addr)?;
            poll.registry()
                .register(&mut s, Token(k), Interest::READABLE | Interest::WRITABLE)
                .map_err(|e| e.to_string())?;
            cs.push(Conn {
                s,
                out: Vec::new(),
                sent: 0,
                inb: Vec::with_capacity(16 * 1024),
                busy: false,
                t0: Instant::now(),
                body: 0,
                n: 0,
            });
        }
        Ok((poll, cs))
    })();
    // Every loop connected (or failed to) before the clock starts; a loop
    // that failed still meets the others here, so none waits for ever.
    start.wait();
    let (mut poll, mut cs) = setup?;
    let t0 = *t_start.get_or_init(Instant::now);
    let deadline = t0 + Duration::from_secs_f64(l.o.secs);
    l.last_answer = t0;
    for (k, c) in cs.iter_mut().enumerate() {
        l.next_request(k, c);
        if let Err(e) = l.pump(k, c, false) {
            return Err(format!("the first request: {e}"));
        }
    }
    let mut events = Events::with_capacity(1024);
    loop {
        let now = Instant::now();
        let stop = now >= deadline;
        if stop && (cs.iter().all(|c| !c.busy) || now >= deadline + DRAIN) {
            let unanswered = cs.iter().filter(|c| c.busy).count();
            for _ in 0..unanswered {
                l.error("a request unanswered after the run's end".into());
            }
            break;
        }
        if l.out.errors > MAX_ERRORS {
            break;
        }
        let wait = if stop {
            Duration::from_millis(50)
        } else {
            (deadline - now).min(Duration::from_millis(50))
        };
        poll.poll(&mut events, Some(wait))
            .or_else(|e| {
                if e.kind() == ErrorKind::Interrupted {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| e.to_string())?;
        let stop = Instant::now() >= deadline;
        for ev in events.iter() {
            let k = ev.token().0;
            let c = &mut cs[k];
            if let Err(e) = l.pump(k, c, stop) {
                // A failed connection: counted, and replaced.
                l.error(e);
                let _ = poll.registry().deregister(&mut c.s);
                let mut s = connect(l.addr)?;
                poll.registry()
                    .register(&mut s, Token(k), Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| e.to_string())?;
                c.s = s;
                c.inb.clear();
                c.busy = false;
                if !stop {
                    l.next_request(k, c);
                    if let Err(e) = l.pump(k, c, stop) {
                        l.error(e);
                    }
                }
            }
        }
    }
    l.out.elapsed_s = (l.last_answer - t0).as_secs_f64();
    Ok(l.out)
}

/// The run: `o.conns` connections spread over `o.threads` loops.
pub fn run(ep: &Endpoint, addr: SocketAddr, o: &Opts, bodies: &[Body]) -> Result<Outcome, String> {
    let threads = o.threads.clamp(1, o.conns.max(1));
    let start = std::sync::Barrier::new(threads);
    let t_start = std::sync::OnceLock::new();
    let results: Vec<Result<Outcome, String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let conns = o.conns / threads + usize::from(t < o.conns % threads);
                let l = Lane {
                    ep,
                    addr,
                    o,
                    bodies,
                    thread: t,
                    out: Outcome::default(),
                    last_answer: Instant::now(),
                };
                let (start, t_start) = (&start, &t_start);
                sc.spawn(move || lane(l, conns, start, t_start))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a client thread panicked".into()))
            })
            .collect()
    });
    let mut all = Outcome::default();
    for r in results {
        let r = r?;
        all.ok += r.ok;
        all.errors += r.errors;
        if all.first_error.is_none() {
            all.first_error = r.first_error;
        }
        all.elapsed_s = all.elapsed_s.max(r.elapsed_s);
        all.latency.merge(&r.latency);
    }
    Ok(all)
}
