//! A reference model of pktfs's HTTP surface for `net_fuzz`: requests
//! (PUT with Content-Length or chunked framing and preconditions; GET with
//! ranges, preconditions and bodies; HEAD; DELETE; the JSON listing), their
//! bytes, a proptest strategy for them, and what RFC 9110 says each should
//! be answered given what the names hold.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::net_common::data;

/// The names the requests use, at the root.
pub const NAMES: [&str; 3] = ["a", "b", "c"];

/// A precondition a request carries.
#[derive(Clone, Copy, Debug)]
pub enum Cond {
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
pub enum Range {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

/// An ETag no file here has (no body is 2 GiB long).
pub const STALE: &str = "\"c-0badc0de-7fffffff\"";

/// The ETag of a file: its content's CRC32C and its length (computed by
/// the server from the records' CRCs, never from a second pass).
pub fn etag(b: &[u8]) -> String {
    format!("\"c-{:08x}-{:x}\"", crc32c::crc32c(b), b.len())
}

#[derive(Clone, Debug)]
pub enum Req {
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
    pub fn name(&self) -> usize {
        match self {
            Req::Put { name, .. }
            | Req::Get { name, .. }
            | Req::Head { name }
            | Req::Delete { name, .. } => *name,
            Req::List => 0,
        }
    }

    pub fn body(&self) -> Vec<u8> {
        match self {
            Req::Put { len, seed, .. } => data(*len, *seed),
            _ => Vec::new(),
        }
    }

    /// The request's bytes, `cur` the name's content when it is sent (for
    /// the preconditions that name the current ETag).
    pub fn bytes(&self, cur: Option<&[u8]>) -> Vec<u8> {
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

pub fn req(with_head: bool) -> impl Strategy<Value = Req> {
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
pub struct Expect {
    pub status: u16,
    /// The body of a 200 or 206 to a GET.
    pub body: Option<Vec<u8>>,
    pub content_length: Option<u64>,
    pub etag: Option<String>,
    /// Answered as soon as its head is in (a refusal before the body).
    pub at_head: bool,
    /// The server closes the connection after the answer (a refused body
    /// too large to read and drop).
    pub closes: bool,
    /// A JSON listing's entries (their `mtime` not compared).
    pub listing: Option<Vec<serde_json::Value>>,
}

pub fn expect(r: &Req, model: &mut BTreeMap<usize, Vec<u8>>) -> Expect {
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
