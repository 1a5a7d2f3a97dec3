//! The client side: signing requests (Authorization header), presigning
//! URLs and encoding aws-chunked bodies, for tests and the benchmark
//! client. It shares the canonical request with the verifier, so a test
//! against the published AWS examples checks both.

use std::borrow::Cow;

use super::canonical::{build, Scratch};
use super::chunked::Chain;
use super::encode::{hex32, hex_lower, uri_encode};
use super::key::SigningKey;
use super::time::AmzTime;
use super::verify::request_signature;
use super::{sha256, PayloadMode, Request, ALGORITHM, SERVICE, TERMINATOR};

/// Headers a signer leaves unsigned: hop-by-hop or rewritten on the way
/// (botocore and the AWS SDKs leave out the same).
const UNSIGNED_HEADERS: [&str; 6] = [
    "authorization",
    "user-agent",
    "expect",
    "transfer-encoding",
    "connection",
    "x-amzn-trace-id",
];

/// Signs as one access key in one region.
#[derive(Clone)]
pub struct Signer {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub region: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("access_key_id", &self.access_key_id)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// An aws-chunked body, encoded and signed, and the mode its request was
/// signed with.
#[derive(Debug, Clone)]
pub struct ChunkedBody {
    pub payload: PayloadMode,
    pub body: Vec<u8>,
}

/// A `%` that does not start an escape taken literally (`%25`): a
/// client signs what it will send; the server answers such a path
/// InvalidURI anyway.
fn literal_percents(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let is_escape = |i: usize| {
        b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    };
    if !(0..b.len()).any(|i| b[i] == b'%' && !is_escape(i)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.char_indices() {
        if c == '%' && !is_escape(i) {
            out.push_str("%25");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn remove_header(headers: &mut Vec<(String, String)>, name: &str) {
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
}

impl Signer {
    pub fn new(access_key_id: &str, secret_access_key: &str, region: &str) -> Signer {
        Signer {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret_access_key.to_owned(),
            region: region.to_owned(),
        }
    }

    fn key(&self, time: &AmzTime) -> SigningKey {
        SigningKey::derive(&self.secret_access_key, time.date(), &self.region)
    }

    fn credential(&self, time: &AmzTime) -> String {
        format!(
            "{}/{}/{}/{SERVICE}/{TERMINATOR}",
            self.access_key_id,
            time.date(),
            self.region
        )
    }

    fn signature(
        &self,
        key: &SigningKey,
        req: &Request<'_>,
        signed_headers: &str,
        payload_line: &str,
        presigned: bool,
        time: &AmzTime,
    ) -> [u8; 32] {
        let path = literal_percents(req.path);
        let query = literal_percents(req.query);
        let req = Request {
            path: &path,
            query: &query,
            ..*req
        };
        let mut s = Scratch::default();
        // Cannot fail: every signed header is present and every `%` starts
        // an escape; an empty canonical request would only sign garbage.
        let _ = build(
            &mut s,
            &req,
            signed_headers,
            payload_line.as_bytes(),
            presigned,
        );
        request_signature(key, time, &sha256(&s.out))
    }

    /// Adds x-amz-date, x-amz-content-sha256 and Authorization to
    /// `headers` (which must hold `host`), replacing any already there,
    /// and signs every header in it but the hop-by-hop ones. Returns the
    /// signature (hex): the seed of an aws-chunked body.
    pub fn sign(
        &self,
        method: &str,
        path: &str,
        query: &str,
        headers: &mut Vec<(String, String)>,
        payload: &PayloadMode,
        unix_s: i64,
    ) -> String {
        let time = AmzTime::from_unix(unix_s);
        for name in ["authorization", "x-amz-date", "x-amz-content-sha256"] {
            remove_header(headers, name);
        }
        let payload_line = payload.header_value();
        headers.push(("x-amz-date".into(), time.as_str().into()));
        headers.push((
            "x-amz-content-sha256".into(),
            payload_line.clone().into_owned(),
        ));
        let mut names: Vec<String> = headers
            .iter()
            .map(|(n, _)| n.to_ascii_lowercase())
            .filter(|n| !UNSIGNED_HEADERS.contains(&n.as_str()))
            .collect();
        names.sort();
        names.dedup();
        let signed_headers = names.join(";");
        let fields: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_bytes()))
            .collect();
        let req = Request {
            method,
            path,
            query,
            headers: &fields,
        };
        let key = self.key(&time);
        let sig = self.signature(&key, &req, &signed_headers, &payload_line, false, &time);
        let sig_hex = hex_lower(&sig);
        headers.push((
            "authorization".into(),
            format!(
                "{ALGORITHM} Credential={}, SignedHeaders={signed_headers}, Signature={sig_hex}",
                self.credential(&time)
            ),
        ));
        sig_hex
    }

    /// The query string of a presigned URL (to append after `?`),
    /// including any `query` given; only `host` is signed.
    pub fn presign(
        &self,
        method: &str,
        path: &str,
        query: &str,
        host: &str,
        expires_s: u64,
        unix_s: i64,
    ) -> String {
        let time = AmzTime::from_unix(unix_s);
        let mut full = String::with_capacity(query.len() + 256);
        if !query.is_empty() {
            full.push_str(query);
            full.push('&');
        }
        full.push_str(&format!(
            "X-Amz-Algorithm={ALGORITHM}&X-Amz-Credential={}&X-Amz-Date={}&X-Amz-Expires={expires_s}&X-Amz-SignedHeaders=host",
            uri_encode(self.credential(&time).as_bytes(), false),
            time.as_str()
        ));
        let fields: [(&str, &[u8]); 1] = [("host", host.as_bytes())];
        let req = Request {
            method,
            path,
            query: &full,
            headers: &fields,
        };
        let key = self.key(&time);
        let sig = self.signature(&key, &req, "host", "UNSIGNED-PAYLOAD", true, &time);
        full.push_str("&X-Amz-Signature=");
        full.push_str(&hex_lower(&sig));
        full
    }

    /// Signs a request whose body is sent aws-chunked in chunks of
    /// `chunk_size_bytes`, and returns the encoded body. `signed`: each
    /// chunk signed (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, -TRAILER when
    /// `trailers` are given, and they are signed too); else
    /// STREAMING-UNSIGNED-PAYLOAD-TRAILER. Adds to `headers`
    /// content-encoding, x-amz-decoded-content-length, content-length (of
    /// the encoded body, signed: send exactly that), x-amz-trailer, then
    /// what [`Signer::sign`] adds.
    #[allow(clippy::too_many_arguments)]
    pub fn aws_chunked(
        &self,
        method: &str,
        path: &str,
        query: &str,
        headers: &mut Vec<(String, String)>,
        body: &[u8],
        chunk_size_bytes: usize,
        signed: bool,
        trailers: &[(&str, &str)],
        unix_s: i64,
    ) -> ChunkedBody {
        let payload = if signed {
            PayloadMode::StreamingSigned {
                trailer: !trailers.is_empty(),
            }
        } else {
            PayloadMode::StreamingUnsignedTrailer
        };
        let chunk_size_bytes = chunk_size_bytes.max(1);
        // Signatures all have 64 digits: a first pass without them gives
        // the length that content-length signs.
        let encoded_len = encode(body, chunk_size_bytes, signed, trailers, None).len();
        for name in [
            "content-encoding",
            "content-length",
            "x-amz-decoded-content-length",
            "x-amz-trailer",
        ] {
            remove_header(headers, name);
        }
        headers.push(("content-encoding".into(), "aws-chunked".into()));
        headers.push(("content-length".into(), encoded_len.to_string()));
        headers.push((
            "x-amz-decoded-content-length".into(),
            body.len().to_string(),
        ));
        if !trailers.is_empty() {
            let names: Vec<&str> = trailers.iter().map(|(n, _)| *n).collect();
            headers.push(("x-amz-trailer".into(), names.join(",")));
        }
        let seed_hex = self.sign(method, path, query, headers, &payload, unix_s);
        let time = AmzTime::from_unix(unix_s);
        let seed = super::parse_hex32(seed_hex.as_bytes()).unwrap_or([0; 32]);
        let mut chain = Chain::new(&self.key(&time), time, seed);
        let body = encode(
            body,
            chunk_size_bytes,
            signed,
            trailers,
            signed.then_some(&mut chain),
        );
        ChunkedBody { payload, body }
    }
}

/// The aws-chunked encoding of `body`; signatures from `chain`, or 64
/// zeros (for the length) when signed without one.
fn encode(
    body: &[u8],
    chunk_size_bytes: usize,
    signed: bool,
    trailers: &[(&str, &str)],
    mut chain: Option<&mut Chain>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / chunk_size_bytes * 90 + 256);
    let mut sign_chunk = |out: &mut Vec<u8>, data: &[u8]| {
        out.extend_from_slice(format!("{:x}", data.len()).as_bytes());
        if signed {
            out.extend_from_slice(b";chunk-signature=");
            match chain.as_deref_mut() {
                Some(c) => {
                    let sig = c.chunk_signature(&sha256(data));
                    c.advance(sig);
                    out.extend_from_slice(&hex32(&sig));
                }
                None => out.extend_from_slice(&[b'0'; 64]),
            }
        }
        out.extend_from_slice(b"\r\n");
    };
    for data in body.chunks(chunk_size_bytes) {
        sign_chunk(&mut out, data);
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }
    sign_chunk(&mut out, b"");
    for (name, value) in trailers {
        out.extend_from_slice(format!("{name}:{value}\r\n").as_bytes());
    }
    if signed && !trailers.is_empty() {
        out.extend_from_slice(b"x-amz-trailer-signature:");
        match chain {
            Some(c) => {
                let sig = c.trailer_signature(trailers);
                c.advance(sig);
                out.extend_from_slice(&hex32(&sig));
            }
            None => out.extend_from_slice(&[b'0'; 64]),
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}
