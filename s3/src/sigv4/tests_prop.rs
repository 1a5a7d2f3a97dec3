//! Properties: what the signer signs the verifier accepts, for odd paths,
//! queries and headers; any change to a signed element is refused as
//! SignatureDoesNotMatch; malformed input is an error, never a panic.

use proptest::prelude::*;

use super::tests_aws::{fields, try_decode_chunked, verify_at, AK, NOW, SK};
use super::*;

/// A path or query piece as a client might send it: some bytes encoded,
/// some raw (`$`, `!`, `~`, `+` in a path, UTF-8).
fn sent_piece(s: &str, encode_all: bool) -> String {
    if encode_all {
        return uri_encode(s.as_bytes(), false);
    }
    let mut out = String::new();
    for c in s.chars() {
        match c {
            'a'..='z'
            | 'A'..='Z'
            | '0'..='9'
            | '-'
            | '_'
            | '.'
            | '~'
            | '$'
            | '!'
            | '*'
            | '\''
            | '('
            | ')'
            | ','
            | ':'
            | '@' => out.push(c),
            _ => out.push_str(&uri_encode(c.to_string().as_bytes(), false)),
        }
    }
    out
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("GET".to_string()),
        Just("PUT".to_string()),
        Just("POST".to_string()),
        Just("DELETE".to_string()),
        Just("HEAD".to_string()),
        "[A-Z]{1,8}",
    ]
}

#[derive(Debug, Clone)]
struct Case {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    payload: PayloadMode,
    region: String,
}

fn case() -> impl Strategy<Value = Case> {
    let segments = prop::collection::vec(("\\PC{0,12}", any::<bool>()), 0..5);
    let params = prop::collection::vec(
        ("[a-zA-Z0-9 /+=&%é~-]{0,8}", "\\PC{0,10}", any::<bool>()),
        0..5,
    );
    let headers = prop::collection::vec(
        (
            "x-amz-meta-[a-z0-9-]{1,10}",
            "[ \t]{0,2}[!-~]{0,6}([ \t]{1,3}[!-~]{1,6}){0,3}[ \t]{0,2}",
        ),
        0..5,
    );
    let payload = prop_oneof![
        Just(PayloadMode::Unsigned),
        any::<[u8; 32]>().prop_map(PayloadMode::Sha256),
        any::<bool>().prop_map(|trailer| PayloadMode::StreamingSigned { trailer }),
        Just(PayloadMode::StreamingUnsignedTrailer),
    ];
    (
        method(),
        segments,
        params,
        headers,
        payload,
        "[a-z0-9-]{1,14}",
    )
        .prop_map(|(method, segments, params, headers, payload, region)| {
            let mut path = String::new();
            for (s, all) in &segments {
                path.push('/');
                path.push_str(&sent_piece(s, *all));
            }
            if path.is_empty() {
                path.push('/');
            }
            let query = params
                .iter()
                .map(|(n, v, all)| {
                    let n = sent_piece(n, *all);
                    if v.is_empty() && *all {
                        n
                    } else {
                        format!("{n}={}", sent_piece(v, *all))
                    }
                })
                .collect::<Vec<_>>()
                .join("&");
            let mut h = vec![("Host".to_string(), "bucket.example:9000".to_string())];
            h.extend(headers);
            Case {
                method,
                path,
                query,
                headers: h,
                payload,
                region,
            }
        })
}

fn signed(c: &Case, secret: &str) -> Vec<(String, String)> {
    let mut h = c.headers.clone();
    Signer::new(AK, secret, &c.region).sign(&c.method, &c.path, &c.query, &mut h, &c.payload, NOW);
    h
}

fn check(c: &Case, h: &[(String, String)]) -> Result<Verified, AuthError> {
    let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let f = fields(&hs);
    let req = Request {
        method: &c.method,
        path: &c.path,
        query: &c.query,
        headers: &f,
    };
    verify_at(&req, NOW + 17, SK)
}

fn mismatch(r: Result<Verified, AuthError>) -> Result<(), TestCaseError> {
    match r {
        Err(e) => {
            prop_assert_eq!(e.code(), "SignatureDoesNotMatch", "{}", e);
            Ok(())
        }
        Ok(_) => Err(TestCaseError::fail("a tampered request verified")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn signed_requests_verify_and_tampered_ones_do_not(c in case(), pick in any::<prop::sample::Index>()) {
        let h = signed(&c, SK);
        let v = check(&c, &h).map_err(|e| TestCaseError::fail(format!("{e}: {c:?}")))?;
        prop_assert_eq!(&v.access_key_id, AK);
        prop_assert_eq!(v.payload, c.payload);
        prop_assert_eq!(v.chunk_verifier().is_some(), matches!(c.payload, PayloadMode::StreamingSigned { .. }));

        // The method.
        let mut t = c.clone();
        t.method.push('X');
        mismatch(check(&t, &h))?;
        // The path.
        let mut t = c.clone();
        t.path.push('x');
        mismatch(check(&t, &h))?;
        // The query: a parameter more.
        let mut t = c.clone();
        t.query.push_str(if c.query.is_empty() { "x=1" } else { "&x=1" });
        mismatch(check(&t, &h))?;
        // A signed header's value (any but the date, checked below).
        let mut th = h.clone();
        let i = pick.index(c.headers.len());
        th[i].1.push('x');
        mismatch(check(&c, &th))?;
        // A signed header removed, or added twice.
        let mut th = h.clone();
        th.remove(i);
        prop_assert!(check(&c, &th).is_err());
        let mut th = h.clone();
        th.push(h[i].clone());
        mismatch(check(&c, &th))?;
        // The date, within the allowed skew.
        let mut th = h.clone();
        for (n, v) in th.iter_mut() {
            if n == "x-amz-date" {
                *v = format_amz_date(NOW + 1);
            }
        }
        mismatch(check(&c, &th))?;
        // The payload mode.
        let mut th = h.clone();
        for (n, v) in th.iter_mut() {
            if n == "x-amz-content-sha256" {
                *v = if c.payload == PayloadMode::Unsigned { EMPTY_SHA256_HEX.into() } else { "UNSIGNED-PAYLOAD".into() };
            }
        }
        mismatch(check(&c, &th))?;
        // The key.
        mismatch(check(&c, &signed(&c, "another secret")))?;
        // An unsigned header added changes nothing.
        let mut th = h.clone();
        th.push(("user-agent".into(), "anything".into()));
        prop_assert!(check(&c, &th).is_ok());
    }

    #[test]
    fn presigned_urls_verify_and_tampered_ones_do_not(c in case(), expires_s in 1u64..=604_800) {
        let signer = Signer::new(AK, SK, &c.region);
        let host = "bucket.example:9000";
        let q = signer.presign(&c.method, &c.path, &c.query, host, expires_s, NOW);
        let h = [("host", host)];
        let f = fields(&h);
        let req = Request { method: &c.method, path: &c.path, query: &q, headers: &f };
        let v = verify_at(&req, NOW + 1, SK).map_err(|e| TestCaseError::fail(format!("{e}: {q}")))?;
        prop_assert_eq!(v.payload, PayloadMode::Unsigned);
        let end = NOW + i64::try_from(expires_s).unwrap();
        prop_assert!(verify_at(&req, end, SK).is_ok());
        prop_assert_eq!(verify_at(&req, end + 1, SK).unwrap_err().code(), "AccessDenied");
        let path = format!("{}x", c.path);
        mismatch(verify_at(&Request { path: &path, ..req }, NOW, SK))?;
        let q2 = q.replacen("X-Amz-Expires=", "X-Amz-Expires=1", 1);
        let r = verify_at(&Request { query: &q2, ..req }, NOW, SK);
        prop_assert!(r.is_err());
        mismatch(verify_at(&req, NOW, "another secret"))?;
    }

    /// aws-chunked bodies of any length, chunk size and trailers decode
    /// back to the body; when signed, any byte changed is refused (but
    /// not a case flip, XOR 0x20: hex digits and field names are
    /// case-insensitive).
    #[test]
    fn chunked_bodies_round_trip_and_any_changed_byte_is_refused(
        body in prop::collection::vec(any::<u8>(), 0..3000),
        chunk_size in 1usize..1200,
        signed in any::<bool>(),
        trailers in prop::collection::vec(("x-amz-checksum-[a-z0-9]{1,8}", "[A-Za-z0-9+/=]{1,12}"), 0..3),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        prop_assume!(xor != 0x20);
        let trailers: Vec<(&str, &str)> = trailers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        prop_assume!(signed || !trailers.is_empty());
        let mut h = vec![("host".to_string(), "h".to_string())];
        let enc = Signer::new(AK, SK, "us-east-1")
            .aws_chunked("PUT", "/b/k", "", &mut h, &body, chunk_size, signed, &trailers, NOW);
        let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let f = fields(&hs);
        let req = Request { method: "PUT", path: "/b/k", query: "", headers: &f };
        let v = verify_at(&req, NOW, SK).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(v.payload, enc.payload);
        let (data, got) = try_decode_chunked(&enc.body, v.chunk_verifier()).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&data, &body);
        let want: Vec<(String, String)> = trailers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        prop_assert_eq!(got, want);
        if signed {
            let mut bad = enc.body.clone();
            let i = at.index(bad.len());
            bad[i] ^= xor;
            prop_assert!(try_decode_chunked(&bad, v.chunk_verifier()).is_err(), "byte {} changed", i);
        }
    }

    /// Random bytes anywhere a request carries them: an error or a claim,
    /// never a panic; and what is claimed does not verify.
    #[test]
    fn random_input_is_an_error_not_a_panic(
        auth in prop::collection::vec(any::<u8>(), 0..200),
        date in prop::collection::vec(any::<u8>(), 0..20),
        sha in prop::collection::vec(any::<u8>(), 0..70),
        query in "\\PC{0,80}",
        path in "\\PC{0,40}",
    ) {
        let h: [(&str, &[u8]); 4] = [("host", b"h"), ("authorization", &auth), ("x-amz-date", &date), ("x-amz-content-sha256", &sha)];
        for headers in [&h[..], &h[..1]] {
            let req = Request { method: "GET", path: &path, query: &query, headers };
            if let Ok(Some(c)) = claim(&req, NOW) {
                let k = SigningKey::derive(SK, c.date(), c.region());
                prop_assert!(c.verify(&req, &k).is_err());
            }
        }
    }

    /// Authorization headers made of the right words in random shapes.
    #[test]
    fn shaped_authorization_is_an_error_not_a_panic(
        parts in prop::collection::vec(prop_oneof![
            Just("AWS4-HMAC-SHA256 ".to_string()),
            Just("Credential=".to_string()),
            Just("SignedHeaders=".to_string()),
            Just("Signature=".to_string()),
            Just(format!("{AK}/20130524/us-east-1/s3/aws4_request")),
            Just("host;x-amz-date".to_string()),
            Just("host;x-amz-content-sha256;x-amz-date".to_string()),
            Just(",".to_string()),
            Just(" ".to_string()),
            Just("/".to_string()),
            Just(";".to_string()),
            Just("=".to_string()),
            Just("0".repeat(64)),
            "[a-z0-9]{0,5}",
        ], 0..16),
        presign in prop::collection::vec(prop_oneof![
            Just("X-Amz-Algorithm=AWS4-HMAC-SHA256".to_string()),
            Just("X-Amz-Credential=AKID%2F20130524%2Fus-east-1%2Fs3%2Faws4_request".to_string()),
            Just("X-Amz-Date=20130524T000000Z".to_string()),
            Just("X-Amz-Expires=60".to_string()),
            Just("X-Amz-Expires=0".to_string()),
            Just("X-Amz-Expires=604801".to_string()),
            Just("X-Amz-SignedHeaders=host".to_string()),
            Just(format!("X-Amz-Signature={}", "0".repeat(64))),
            Just("%".to_string()),
            Just("&".to_string()),
            "[a-z%=&]{0,6}",
        ], 0..10),
    ) {
        let a = parts.concat();
        let q = presign.join("&");
        let h: [(&str, &[u8]); 4] = [
            ("host", b"h"),
            ("x-amz-date", b"20130524T000000Z"),
            ("x-amz-content-sha256", b"UNSIGNED-PAYLOAD"),
            ("authorization", a.as_bytes()),
        ];
        for (headers, query) in [(&h[..], ""), (&h[..3], q.as_str()), (&h[..], q.as_str())] {
            let req = Request { method: "GET", path: "/", query, headers };
            if let Ok(Some(c)) = claim(&req, NOW) {
                let k = SigningKey::derive(SK, c.date(), c.region());
                prop_assert!(c.verify(&req, &k).is_err());
            }
        }
    }
}

/// Request fields as a test writes them.
fn req_of<'a>(query: &'a str, f: &'a [(&'a str, &'a [u8])]) -> Request<'a> {
    Request {
        method: "GET",
        path: "/b/k",
        query,
        headers: f,
    }
}

fn header_signed(extra: &[(&str, &str)], payload: &PayloadMode, at: i64) -> Vec<(String, String)> {
    let mut h = vec![("host".to_string(), "h".to_string())];
    h.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    Signer::new(AK, SK, "us-east-1").sign("GET", "/b/k", "", &mut h, payload, at);
    h
}

fn claim_of(h: &[(String, String)], query: &str, now: i64) -> Result<Option<Claim>, AuthError> {
    let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let f = fields(&hs);
    claim(&req_of(query, &f), now)
}

#[test]
fn clock_skew_is_refused_beyond_15_minutes() {
    let h = header_signed(&[], &PayloadMode::Unsigned, NOW);
    assert!(claim_of(&h, "", NOW + MAX_SKEW_S).unwrap().is_some());
    assert!(claim_of(&h, "", NOW - MAX_SKEW_S).unwrap().is_some());
    for now in [
        NOW + MAX_SKEW_S + 1,
        NOW - MAX_SKEW_S - 1,
        0,
        i64::MAX,
        i64::MIN,
    ] {
        let e = claim_of(&h, "", now).unwrap_err();
        assert_eq!(
            (e.code(), e.status()),
            ("RequestTimeTooSkewed", 403),
            "{now}"
        );
    }
}

#[test]
fn anonymous_requests_claim_nothing() {
    let h = vec![("host".to_string(), "h".to_string())];
    assert!(claim_of(&h, "", NOW).unwrap().is_none());
    assert!(claim_of(&h, "prefix=a&list-type=2", NOW).unwrap().is_none());
}

#[test]
fn malformed_claims_have_their_codes() {
    let good = header_signed(&[], &PayloadMode::Unsigned, NOW);
    let auth = good
        .iter()
        .find(|(n, _)| n == "authorization")
        .unwrap()
        .1
        .clone();
    let with_auth = |a: &str| {
        let mut h = good.clone();
        h.retain(|(n, _)| n != "authorization");
        h.push(("authorization".into(), a.into()));
        h
    };
    let cases: Vec<(String, &str)> = vec![
        (
            auth.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"),
            "AuthorizationHeaderMalformed",
        ),
        (
            "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=".into(),
            "InvalidRequest",
        ),
        (
            auth.replace("AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256"),
            "InvalidRequest",
        ),
        (
            auth.replace("/s3/", "/iam/"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("aws4_request", "aws4_reques"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("/20130524/", "/20130525/"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("/20130524/", "/2013052/"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("/us-east-1/", "//"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace(&format!("{AK}/"), "/"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("SignedHeaders=host;", "SignedHeaders="),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("host;", "host;;"),
            "AuthorizationHeaderMalformed",
        ),
        (auth.replace("host;", ""), "AuthorizationHeaderMalformed"),
        (
            auth.replace("x-amz-content-sha256;", ""),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("Signature=", "Signature=0"),
            "AuthorizationHeaderMalformed",
        ),
        (
            auth.replace("Signature=", "Signature=zz"),
            "AuthorizationHeaderMalformed",
        ),
        (
            format!("{auth}, Signature={}", "0".repeat(64)),
            "AuthorizationHeaderMalformed",
        ),
        (format!("{auth}, Foo=bar"), "AuthorizationHeaderMalformed"),
        ("AWS4-HMAC-SHA256".into(), "AuthorizationHeaderMalformed"),
        ("".into(), "AuthorizationHeaderMalformed"),
    ];
    for (a, code) in cases {
        let e = claim_of(&with_auth(&a), "", NOW).unwrap_err();
        assert_eq!(e.code(), code, "{a}: {e}");
        assert!(e.status() == 400 || e.status() == 403);
    }
    // No date, a bad date, no x-amz-content-sha256, a bad one, both
    // mechanisms.
    let without = |name: &str| {
        let mut h = good.clone();
        h.retain(|(n, _)| n != name);
        h
    };
    let replaced = |name: &str, v: &str| {
        let mut h = without(name);
        h.push((name.into(), v.into()));
        h
    };
    assert_eq!(
        claim_of(&without("x-amz-date"), "", NOW)
            .unwrap_err()
            .code(),
        "AccessDenied"
    );
    assert_eq!(
        claim_of(&replaced("x-amz-date", "2013-05-24T00:00:00Z"), "", NOW)
            .unwrap_err()
            .code(),
        "AccessDenied"
    );
    let no_sha = {
        let mut h = without("x-amz-content-sha256");
        let a = auth.replace("x-amz-content-sha256;", "");
        h.retain(|(n, _)| n != "authorization");
        h.push(("authorization".into(), a));
        h
    };
    assert_eq!(
        claim_of(&no_sha, "", NOW).unwrap_err().code(),
        "InvalidRequest"
    );
    assert_eq!(
        claim_of(&replaced("x-amz-content-sha256", "sha"), "", NOW)
            .unwrap_err()
            .code(),
        "InvalidArgument"
    );
    let mut twice = good.clone();
    twice.push(("Authorization".into(), auth.clone()));
    assert_eq!(
        claim_of(&twice, "", NOW).unwrap_err().code(),
        "AuthorizationHeaderMalformed"
    );
    let mut twice = good.clone();
    twice.push(("x-amz-content-sha256".into(), "UNSIGNED-PAYLOAD".into()));
    assert_eq!(
        claim_of(&twice, "", NOW).unwrap_err().code(),
        "InvalidArgument"
    );
    let e = claim_of(&good, &format!("X-Amz-Signature={}", "0".repeat(64)), NOW).unwrap_err();
    assert_eq!(e.code(), "InvalidArgument");
}

#[test]
fn date_header_stands_in_for_x_amz_date() {
    let mut h = vec![
        ("host".to_string(), "h".to_string()),
        (
            "date".to_string(),
            "Fri, 24 May 2013 00:00:00 GMT".to_string(),
        ),
    ];
    Signer::new(AK, SK, "us-east-1").sign("GET", "/b/k", "", &mut h, &PayloadMode::Unsigned, NOW);
    // The signer sends x-amz-date; a client may send only Date.
    let a = h
        .iter()
        .find(|(n, _)| n == "authorization")
        .unwrap()
        .1
        .replace(";x-amz-date", "");
    h.retain(|(n, _)| n != "x-amz-date" && n != "authorization");
    h.push(("authorization".into(), a));
    let c = claim_of(&h, "", NOW).unwrap().unwrap();
    assert_eq!(c.date(), "20130524");
    assert_eq!(c.time_unix_s(), NOW);
    assert!(c.signs("Date"));
    let e = claim_of(&h, "", NOW + 3600).unwrap_err();
    assert_eq!(e.code(), "RequestTimeTooSkewed");
}

#[test]
fn presigned_query_errors_have_their_codes() {
    let signer = Signer::new(AK, SK, "us-east-1");
    let q = signer.presign("GET", "/b/k", "", "h", 60, NOW);
    let h = vec![("host".to_string(), "h".to_string())];
    let cases: Vec<(String, &str)> = vec![
        (
            q.replace("X-Amz-Expires=60", "X-Amz-Expires=0"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("X-Amz-Expires=60", "X-Amz-Expires=604801"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("X-Amz-Expires=60", "X-Amz-Expires=-1"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("X-Amz-Expires=60&", ""),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("X-Amz-Date=20130524T000000Z", "X-Amz-Date=20130524"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=HMAC"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace(
                "X-Amz-Algorithm=AWS4-HMAC-SHA256",
                "X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256",
            ),
            "InvalidRequest",
        ),
        (
            q.replace("%2Fs3%2F", "%2Fs4%2F"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.replace("%2F20130524%2F", "%2F20130523%2F"),
            "AuthorizationQueryParametersError",
        ),
        (q.replace("%2F20130524", "%2G20130524"), "InvalidURI"),
        (
            q.replace("SignedHeaders=host", "SignedHeaders=range"),
            "AuthorizationQueryParametersError",
        ),
        (
            format!("{q}&X-Amz-Date=20130524T000000Z"),
            "AuthorizationQueryParametersError",
        ),
        (
            q.split("&X-Amz-Signature").next().unwrap().to_string(),
            "AuthorizationQueryParametersError",
        ),
        (
            "AWSAccessKeyId=AKID&Expires=1369353600&Signature=abc".to_string(),
            "InvalidRequest",
        ),
    ];
    for (query, code) in cases {
        let e = claim_of(&h, &query, NOW).unwrap_err();
        assert_eq!(e.code(), code, "{query}: {e}");
    }
    assert!(claim_of(&h, &q, NOW).unwrap().unwrap().presigned);
}

#[test]
fn key_for_another_scope_is_an_internal_error_not_a_pass() {
    let h = header_signed(&[], &PayloadMode::Unsigned, NOW);
    let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let f = fields(&hs);
    let req = req_of("", &f);
    let c = claim(&req, NOW).unwrap().unwrap();
    for k in [
        SigningKey::derive(SK, "20130525", "us-east-1"),
        SigningKey::derive(SK, "20130524", "us-east-2"),
    ] {
        let e = c.verify(&req, &k).unwrap_err();
        assert_eq!((e.code(), e.status()), ("InternalError", 500));
    }
}

/// The same request sent with its path and query encoded differently
/// (`~` or `%7E`, `$` or `%24`, `%2b` or `%2B`) has one canonical form.
#[test]
fn encoding_variants_share_a_signature() {
    let mut h = vec![("host".to_string(), "h".to_string())];
    let signer = Signer::new(AK, SK, "us-east-1");
    signer.sign(
        "GET",
        "/b/a~$%2b",
        "p=a~$&q=%2b",
        &mut h,
        &PayloadMode::Unsigned,
        NOW,
    );
    let hs: Vec<(&str, &str)> = h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let f = fields(&hs);
    for (path, query) in [
        ("/b/a%7E%24%2B", "q=%2B&p=a%7E%24"),
        ("/b/a~$%2B", "p=a~$&q=%2B"),
    ] {
        let req = Request {
            method: "GET",
            path,
            query,
            headers: &f,
        };
        verify_at(&req, NOW, SK).unwrap();
    }
    // A `+` in a path is a plus (as %2B is), in a query a blank.
    let req = Request {
        method: "GET",
        path: "/b/a~$+",
        query: "p=a~$&q=%2b",
        headers: &f,
    };
    verify_at(&req, NOW, SK).unwrap();
    let req = Request {
        method: "GET",
        path: "/b/a~$%2b",
        query: "p=a~$&q=+",
        headers: &f,
    };
    assert_eq!(
        verify_at(&req, NOW, SK).unwrap_err().code(),
        "SignatureDoesNotMatch"
    );
}
