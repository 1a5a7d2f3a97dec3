//! The examples AWS publishes for S3's SigV4 (S3 API Reference:
//! "Examples of signature calculations" for the Authorization header,
//! "Authenticating requests: using query parameters", "Transferring payload
//! in multiple chunks" and "Including trailing headers"), checked on both
//! sides: the verifier accepts the documented signatures and the signer
//! reproduces them.

use super::*;

pub(crate) const AK: &str = "AKIAIOSFODNN7EXAMPLE";
pub(crate) const SK: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
/// 20130524T000000Z
pub(crate) const NOW: i64 = 1_369_353_600;
const HOST: &str = "examplebucket.s3.amazonaws.com";

pub(crate) fn fields<'a>(h: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, &'a [u8])> {
    h.iter().map(|(n, v)| (*n, v.as_bytes())).collect()
}

fn key() -> SigningKey {
    SigningKey::derive(SK, "20130524", "us-east-1")
}

fn auth(signed: &str, sig: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential={AK}/20130524/us-east-1/s3/aws4_request,SignedHeaders={signed},Signature={sig}"
    )
}

/// Verifies `req` as the server would; the claim too.
pub(crate) fn verify_at(req: &Request<'_>, now: i64, secret: &str) -> Result<Verified, AuthError> {
    let c = claim(req, now)?.expect("a signed request");
    let k = SigningKey::derive(secret, c.date(), c.region());
    c.verify(req, &k)
}

struct Example {
    method: &'static str,
    path: &'static str,
    query: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    signed: &'static str,
    signature: &'static str,
}

fn examples() -> Vec<Example> {
    vec![
        // GET Object with a Range.
        Example {
            method: "GET",
            path: "/test.txt",
            query: "",
            headers: vec![
                ("Host", HOST),
                ("Range", "bytes=0-9"),
                ("x-amz-content-sha256", EMPTY_SHA256_HEX),
                ("x-amz-date", "20130524T000000Z"),
            ],
            signed: "host;range;x-amz-content-sha256;x-amz-date",
            signature: "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        },
        // PUT Object: `$` in the key, Date and x-amz-date both signed.
        Example {
            method: "PUT",
            path: "/test$file.text",
            query: "",
            headers: vec![
                ("Host", HOST),
                ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
                (
                    "x-amz-content-sha256",
                    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                ),
            ],
            signed: "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
            signature: "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
        },
        // GET Bucket Lifecycle: a parameter without a value.
        Example {
            method: "GET",
            path: "/",
            query: "lifecycle",
            headers: vec![
                ("Host", HOST),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-content-sha256", EMPTY_SHA256_HEX),
            ],
            signed: "host;x-amz-content-sha256;x-amz-date",
            signature: "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
        },
        // GET Bucket (List Objects): parameters sorted.
        Example {
            method: "GET",
            path: "/",
            query: "max-keys=2&prefix=J",
            headers: vec![
                ("Host", HOST),
                ("x-amz-date", "20130524T000000Z"),
                ("x-amz-content-sha256", EMPTY_SHA256_HEX),
            ],
            signed: "host;x-amz-content-sha256;x-amz-date",
            signature: "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
        },
    ]
}

#[test]
fn documented_header_examples_verify() {
    for ex in examples() {
        let a = auth(ex.signed, ex.signature);
        let mut h = ex.headers.clone();
        h.push(("Authorization", &a));
        let f = fields(&h);
        let req = Request {
            method: ex.method,
            path: ex.path,
            query: ex.query,
            headers: &f,
        };
        let v =
            verify_at(&req, NOW, SK).unwrap_or_else(|e| panic!("{} {}: {e}", ex.method, ex.path));
        assert_eq!(v.access_key_id, AK);
        assert_eq!(hex_lower(&v.seed_signature()), ex.signature);
        // The same request with another secret fails.
        let e = verify_at(&req, NOW, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ").unwrap_err();
        assert_eq!(e.code(), "SignatureDoesNotMatch");
    }
}

#[test]
fn documented_header_examples_are_what_the_signer_produces() {
    let signer = Signer::new(AK, SK, "us-east-1");
    for ex in examples() {
        let mut h: Vec<(String, String)> = ex
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("x-amz-date"))
            .filter(|(n, _)| !n.eq_ignore_ascii_case("x-amz-content-sha256"))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let sha = ex
            .headers
            .iter()
            .find(|(n, _)| *n == "x-amz-content-sha256")
            .map(|(_, v)| *v)
            .unwrap();
        let payload = payload_mode(sha.as_bytes()).unwrap();
        let sig = signer.sign(ex.method, ex.path, ex.query, &mut h, &payload, NOW);
        assert_eq!(sig, ex.signature, "{} {}", ex.method, ex.path);
        let a = &h.iter().find(|(n, _)| n == "authorization").unwrap().1;
        assert!(a.contains(&format!("SignedHeaders={},", ex.signed)), "{a}");
    }
}

/// The canonical request and string to sign of the GET Object example, as
/// the documentation prints them.
#[test]
fn documented_canonical_request() {
    let ex = &examples()[0];
    let f = fields(&ex.headers);
    let req = Request {
        method: ex.method,
        path: ex.path,
        query: ex.query,
        headers: &f,
    };
    let c = canonical_request(&req, ex.signed, EMPTY_SHA256_HEX, false).unwrap();
    assert_eq!(
        String::from_utf8(c.clone()).unwrap(),
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n\
         x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
         x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n\
         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        hex_lower(&sha256(&c)),
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
    );
}

const PRESIGNED_QUERY: &str = "X-Amz-Algorithm=AWS4-HMAC-SHA256\
    &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
    &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
    &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";

#[test]
fn documented_presigned_url_verifies_until_it_expires() {
    let h = [("Host", HOST)];
    let f = fields(&h);
    let req = Request {
        method: "GET",
        path: "/test.txt",
        query: PRESIGNED_QUERY,
        headers: &f,
    };
    let v = verify_at(&req, NOW, SK).unwrap();
    assert_eq!(v.payload, PayloadMode::Unsigned);
    let c = claim(&req, NOW).unwrap().unwrap();
    assert!(c.presigned);
    assert_eq!(c.expires_at_unix_s(), Some(NOW + 86_400));
    // Valid through its last second, expired after it.
    assert!(verify_at(&req, NOW + 86_400, SK).is_ok());
    let e = verify_at(&req, NOW + 86_401, SK).unwrap_err();
    assert_eq!((e.code(), e.status()), ("AccessDenied", 403));
    // Dated too far in the future.
    let e = claim(&req, NOW - MAX_SKEW_S - 1).unwrap_err();
    assert_eq!(e.code(), "AccessDenied");
    // Another method, path or host: SignatureDoesNotMatch.
    for (method, path, host) in [
        ("PUT", "/test.txt", HOST),
        ("GET", "/test.txu", HOST),
        ("GET", "/test.txt", "evil"),
    ] {
        let h = [("Host", host)];
        let f = fields(&h);
        let req = Request {
            method,
            path,
            query: PRESIGNED_QUERY,
            headers: &f,
        };
        assert_eq!(
            verify_at(&req, NOW, SK).unwrap_err().code(),
            "SignatureDoesNotMatch"
        );
    }
}

#[test]
fn documented_presigned_url_is_what_the_signer_produces() {
    let signer = Signer::new(AK, SK, "us-east-1");
    let q = signer.presign("GET", "/test.txt", "", HOST, 86_400, NOW);
    assert_eq!(q, PRESIGNED_QUERY);
}

const SEED: &str = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
const CHUNK_SIGS: [&str; 3] = [
    "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
];
const TRAILER_SEED: &str = "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e";
const TRAILER_CHUNK_SIGS: [&str; 3] = [
    "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
    "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
    "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
];
const TRAILER_SIG: &str = "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435";

/// The chunked example's request: 65 KiB of `a` in chunks of 64 KiB, 1 KiB
/// and the final empty one.
fn chunked_request_headers(trailer: bool) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("Host", "s3.amazonaws.com"),
        ("x-amz-date", "20130524T000000Z"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ("Content-Encoding", "aws-chunked"),
        ("x-amz-decoded-content-length", "66560"),
        ("Content-Length", "66824"),
    ];
    if trailer {
        h.push((
            "x-amz-content-sha256",
            "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        ));
        h.push(("x-amz-trailer", "x-amz-checksum-crc32c"));
    } else {
        h.push(("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"));
    }
    h
}

fn chunk_hashes() -> [[u8; 32]; 3] {
    [sha256(&[b'a'; 65_536]), sha256(&[b'a'; 1024]), sha256(b"")]
}

#[test]
fn documented_chunked_upload_verifies() {
    let a = auth(
        "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class",
        SEED,
    );
    let mut h = chunked_request_headers(false);
    h.push(("Authorization", &a));
    let f = fields(&h);
    let req = Request {
        method: "PUT",
        path: "/examplebucket/chunkObject.txt",
        query: "",
        headers: &f,
    };
    let v = verify_at(&req, NOW, SK).unwrap();
    assert_eq!(v.payload, PayloadMode::StreamingSigned { trailer: false });
    let mut cv = v.chunk_verifier().unwrap();
    // A flipped bit in a chunk: refused, and the chain stays broken.
    let mut bad = cv.clone();
    let mut flipped = chunk_hashes()[0];
    flipped[0] ^= 1;
    assert_eq!(
        bad.chunk(&flipped, CHUNK_SIGS[0].as_bytes())
            .unwrap_err()
            .code(),
        "SignatureDoesNotMatch"
    );
    assert!(bad
        .chunk(&chunk_hashes()[0], CHUNK_SIGS[0].as_bytes())
        .is_err());
    assert!(bad.finish().is_err());
    // Out of order: refused.
    let mut bad = cv.clone();
    assert!(bad
        .chunk(&chunk_hashes()[1], CHUNK_SIGS[1].as_bytes())
        .is_err());
    for (hash, sig) in chunk_hashes().iter().zip(CHUNK_SIGS) {
        assert!(cv.finish().is_err(), "complete before the final chunk");
        cv.chunk(hash, sig.as_bytes()).unwrap();
    }
    cv.finish().unwrap();
    assert!(cv.is_complete());
    // Nothing after the final chunk.
    let e = cv
        .chunk(&chunk_hashes()[0], CHUNK_SIGS[0].as_bytes())
        .unwrap_err();
    assert_eq!(e.code(), "IncompleteBody");
    assert!(cv.trailer(&[], CHUNK_SIGS[0].as_bytes()).is_err());
}

#[test]
fn documented_trailer_upload_verifies() {
    let a = auth(
        "content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer",
        TRAILER_SEED,
    );
    let mut h = chunked_request_headers(true);
    h.push(("Authorization", &a));
    let f = fields(&h);
    let req = Request {
        method: "PUT",
        path: "/examplebucket/chunkObject.txt",
        query: "",
        headers: &f,
    };
    let v = verify_at(&req, NOW, SK).unwrap();
    assert_eq!(v.payload, PayloadMode::StreamingSigned { trailer: true });
    let mut cv = v.chunk_verifier().unwrap();
    // The trailer before the final chunk: refused.
    assert!(cv
        .clone()
        .trailer(
            &[("x-amz-checksum-crc32c", "sOO8/Q==")],
            TRAILER_SIG.as_bytes()
        )
        .is_err());
    for (hash, sig) in chunk_hashes().iter().zip(TRAILER_CHUNK_SIGS) {
        cv.chunk(hash, sig.as_bytes()).unwrap();
    }
    assert!(cv.finish().is_err(), "complete before the trailer");
    // Another checksum value: refused.
    let e = cv
        .clone()
        .trailer(
            &[("x-amz-checksum-crc32c", "sOO8/Q=A")],
            TRAILER_SIG.as_bytes(),
        )
        .unwrap_err();
    assert_eq!(e.code(), "SignatureDoesNotMatch");
    cv.trailer(
        &[("x-amz-checksum-crc32c", "sOO8/Q==")],
        TRAILER_SIG.as_bytes(),
    )
    .unwrap();
    cv.finish().unwrap();
}

/// The signer's aws-chunked encoding of the documented body: without a
/// trailer it signs the documented headers (content-length included), so
/// its seed and chunk signatures are the documented ones; with one it also
/// signs content-length, which the trailer example does not, so there the
/// verifier checks it. Every mode decodes back to the body.
#[test]
fn signer_chunked_body_round_trips_and_matches_the_documented_layout() {
    let signer = Signer::new(AK, SK, "us-east-1");
    let body = vec![b'a'; 66_560];
    for (signed, trailers) in [
        (true, &[][..]),
        (true, &[("x-amz-checksum-crc32c", "sOO8/Q==")][..]),
        (false, &[("x-amz-checksum-crc32c", "sOO8/Q==")][..]),
    ] {
        let mut h = vec![
            ("Host".to_string(), "s3.amazonaws.com".to_string()),
            (
                "x-amz-storage-class".to_string(),
                "REDUCED_REDUNDANCY".to_string(),
            ),
        ];
        let enc = signer.aws_chunked(
            "PUT",
            "/examplebucket/chunkObject.txt",
            "",
            &mut h,
            &body,
            65_536,
            signed,
            trailers,
            NOW,
        );
        let len: usize = h
            .iter()
            .find(|(n, _)| n == "content-length")
            .unwrap()
            .1
            .parse()
            .unwrap();
        assert_eq!(len, enc.body.len());
        if signed && trailers.is_empty() {
            // The documented Content-Length, seed and chunk signatures.
            assert_eq!(len, 66_824);
            let a = &h.iter().find(|(n, _)| n == "authorization").unwrap().1;
            assert!(a.ends_with(&format!("Signature={SEED}")), "{a}");
            for sig in CHUNK_SIGS {
                let needle = format!("chunk-signature={sig}\r\n");
                assert!(enc
                    .body
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes()));
            }
        }
        if signed && !trailers.is_empty() {
            assert_eq!(len, 66_946);
        }
        let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let f = fields(&hs);
        let req = Request {
            method: "PUT",
            path: "/examplebucket/chunkObject.txt",
            query: "",
            headers: &f,
        };
        let v = verify_at(&req, NOW, SK).unwrap();
        assert_eq!(v.payload, enc.payload);
        let decoded = decode_chunked(&enc.body, v.chunk_verifier());
        assert_eq!(decoded.0, body);
        assert_eq!(
            decoded.1,
            trailers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        );
    }
}

/// A test decoder of an aws-chunked body, verifying as it goes: the data
/// and the trailer fields. Panics on anything malformed (tests only).
pub(crate) fn decode_chunked(
    body: &[u8],
    cv: Option<ChunkVerifier>,
) -> (Vec<u8>, Vec<(String, String)>) {
    try_decode_chunked(body, cv).unwrap()
}

type Decoded = (Vec<u8>, Vec<(String, String)>);

/// [`decode_chunked`], saying what is wrong instead of panicking.
pub(crate) fn try_decode_chunked(
    mut body: &[u8],
    mut cv: Option<ChunkVerifier>,
) -> Result<Decoded, String> {
    fn line<'a>(body: &mut &'a [u8]) -> Result<&'a [u8], String> {
        let at = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("no CRLF")?;
        let l = &body[..at];
        *body = &body[at + 2..];
        Ok(l)
    }
    let e = |e: AuthError| e.to_string();
    let mut data = Vec::new();
    loop {
        let h = parse_chunk_header(line(&mut body)?).map_err(e)?;
        let size = usize::try_from(h.size_bytes).map_err(|x| x.to_string())?;
        let chunk = body.get(..size).ok_or("a chunk longer than the body")?;
        if let Some(cv) = cv.as_mut() {
            let sig = h.signature.ok_or("no chunk signature")?;
            cv.chunk(&sha256(chunk), sig).map_err(e)?;
        }
        data.extend_from_slice(chunk);
        body = &body[size..];
        if size == 0 {
            break;
        }
        if !line(&mut body)?.is_empty() {
            return Err("no CRLF after a chunk's data".into());
        }
    }
    let mut trailers = Vec::new();
    let mut trailer_sig = None;
    loop {
        let l = line(&mut body)?;
        if l.is_empty() {
            break;
        }
        let l = std::str::from_utf8(l).map_err(|x| x.to_string())?;
        let (n, v) = l.split_once(':').ok_or("a trailer line without `:`")?;
        if n == "x-amz-trailer-signature" {
            trailer_sig = Some(v.to_string());
        } else {
            trailers.push((n.to_string(), v.to_string()));
        }
    }
    if !body.is_empty() {
        return Err("bytes after the end".into());
    }
    if let Some(cv) = cv.as_mut() {
        match trailer_sig {
            Some(sig) => {
                let t: Vec<(&str, &str)> = trailers
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_str()))
                    .collect();
                cv.trailer(&t, sig.as_bytes()).map_err(e)?;
            }
            None if !trailers.is_empty() => return Err("unsigned trailers".into()),
            None => {}
        }
        cv.finish().map_err(e)?;
    }
    Ok((data, trailers))
}

/// The chunk chain itself against the documentation, from the
/// documented seed (independent of which headers a signer signs).
#[test]
fn chunk_chain_from_the_documented_seeds() {
    let time = time::AmzTime::parse(b"20130524T000000Z").unwrap();
    for (seed, sigs) in [(SEED, CHUNK_SIGS), (TRAILER_SEED, TRAILER_CHUNK_SIGS)] {
        let mut chain = chunked::Chain::new(&key(), time, parse_hex32(seed.as_bytes()).unwrap());
        for (hash, sig) in chunk_hashes().iter().zip(sigs) {
            let s = chain.chunk_signature(hash);
            assert_eq!(hex_lower(&s), sig);
            chain.advance(s);
        }
        if seed == TRAILER_SEED {
            let s = chain.trailer_signature(&[("x-amz-checksum-crc32c", "sOO8/Q==")]);
            assert_eq!(hex_lower(&s), TRAILER_SIG);
        }
    }
}
