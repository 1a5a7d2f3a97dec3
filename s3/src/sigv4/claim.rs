//! What a request claims about its signer, read from the Authorization
//! header or a presigned URL's query, checked for form, scope and time
//! before any key is looked up.

use super::encode::{parse_hex32, query_decode};
use super::payload::payload_mode;
use super::time::AmzTime;
use super::{AuthError, PayloadMode, Request, ALGORITHM, SERVICE, TERMINATOR};

/// How far a header-signed request's time may be from the server's clock
/// (S3's 15 minutes); also how far in the future a presigned URL may be
/// dated.
pub const MAX_SKEW_S: i64 = 15 * 60;

/// The longest a presigned URL may be valid (S3's 7 days).
pub const MAX_EXPIRES_S: i64 = 7 * 24 * 3600;

/// What a request claims (parsed, not yet verified): from the
/// Authorization header or a presigned query.
#[derive(Debug, Clone)]
pub struct Claim {
    pub access_key_id: String,
    /// Signed in the query (a presigned URL), not in the Authorization
    /// header.
    pub presigned: bool,
    /// How the body is covered: always [`PayloadMode::Unsigned`] for a
    /// presigned URL.
    pub payload: PayloadMode,
    pub(crate) region: String,
    pub(crate) signed_headers: String,
    pub(crate) signature: [u8; 32],
    pub(crate) time: AmzTime,
    expires_s: Option<i64>,
}

impl Claim {
    /// The `yyyymmdd` of the credential scope (also the request's date).
    pub fn date(&self) -> &str {
        self.time.date()
    }

    /// The region of the credential scope: whatever the client signed
    /// with (any region is accepted).
    pub fn region(&self) -> &str {
        &self.region
    }

    /// `yyyymmdd/region/s3/aws4_request`
    pub fn scope(&self) -> String {
        format!("{}/{}/{SERVICE}/{TERMINATOR}", self.date(), self.region)
    }

    /// The request time (x-amz-date, Date or X-Amz-Date) in unix seconds.
    pub fn time_unix_s(&self) -> i64 {
        self.time.unix_s
    }

    /// When a presigned URL stops being valid (unix seconds).
    pub fn expires_at_unix_s(&self) -> Option<i64> {
        self.expires_s.map(|e| self.time.unix_s + e)
    }

    /// The signed header names, as the request lists them.
    pub fn signed_headers(&self) -> impl Iterator<Item = &str> {
        self.signed_headers.split(';')
    }

    /// Whether header `name` (any case) is covered by the signature: the
    /// endpoint may insist on it for headers that change what a request
    /// does (x-amz-copy-source, say).
    pub fn signs(&self, name: &str) -> bool {
        self.signed_headers().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// The parts of `Credential=AKID/yyyymmdd/region/s3/aws4_request`.
struct Credential<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
}

fn parse_credential(c: &str) -> Result<Credential<'_>, String> {
    // From the right: the scope has four parts; the key id is the rest.
    let mut parts = c.rsplitn(5, '/');
    let (Some(terminator), Some(service), Some(region), Some(date), Some(key)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return Err(format!(
            "the credential {c:?} is not access-key-id/yyyymmdd/region/s3/aws4_request"
        ));
    };
    if key.is_empty() {
        return Err("the credential names no access key id".into());
    }
    if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the credential's date {date:?} is not yyyymmdd"));
    }
    if region.is_empty() {
        return Err("the credential names no region".into());
    }
    if service != SERVICE {
        return Err(format!(
            "the credential's service is {service:?}; this endpoint is {SERVICE:?}"
        ));
    }
    if terminator != TERMINATOR {
        return Err(format!(
            "the credential ends in {terminator:?}, not {TERMINATOR:?}"
        ));
    }
    Ok(Credential {
        access_key_id: key,
        date,
        region,
    })
}

/// The signed header list: non-empty names of token characters, host
/// among them (and x-amz-content-sha256 when `must_sign_content_sha`).
fn check_signed_headers(list: &str, must_sign_content_sha: bool) -> Result<(), String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    for name in list.split(';') {
        if name.is_empty() || !name.bytes().all(token) {
            return Err(format!(
                "the signed headers {list:?} hold an empty or invalid name {name:?}"
            ));
        }
    }
    let signs = |h: &str| list.split(';').any(|n| n.eq_ignore_ascii_case(h));
    if !signs("host") {
        return Err(format!("the signed headers {list:?} do not include host"));
    }
    if must_sign_content_sha && !signs("x-amz-content-sha256") {
        return Err(format!(
            "the signed headers {list:?} do not include x-amz-content-sha256, which the request sends"
        ));
    }
    Ok(())
}

fn parse_signature(hex: &[u8]) -> Result<[u8; 32], String> {
    parse_hex32(hex).ok_or_else(|| {
        format!(
            "the signature {:?} is not 64 hex digits",
            String::from_utf8_lossy(hex)
        )
    })
}

fn scope_date_matches(cred: &Credential<'_>, time: &AmzTime) -> Result<(), String> {
    if cred.date == time.date() {
        Ok(())
    } else {
        Err(format!(
            "the credential's date {} is not the request's date {} ({})",
            cred.date,
            time.date(),
            time.as_str()
        ))
    }
}

/// The request's time: x-amz-date, else Date (RFC 7231).
fn header_time(req: &Request<'_>) -> Result<AmzTime, AuthError> {
    if let Some(v) = req.header("x-amz-date") {
        return AmzTime::parse(v.trim_ascii()).ok_or_else(|| {
            AuthError::MissingDate(format!(
                "x-amz-date {:?} is not yyyymmddThhmmssZ",
                String::from_utf8_lossy(v)
            ))
        });
    }
    let Some(v) = req.header("date") else {
        return Err(AuthError::MissingDate("the request has neither".into()));
    };
    let bad = || {
        AuthError::MissingDate(format!(
            "Date {:?} is not an HTTP date",
            String::from_utf8_lossy(v)
        ))
    };
    let text = std::str::from_utf8(v).map_err(|_| bad())?;
    let t = httpdate::parse_http_date(text.trim()).map_err(|_| bad())?;
    let unix_s = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).map_err(|_| bad())?,
        Err(_) => return Err(bad()),
    };
    Ok(AmzTime::from_unix(unix_s))
}

fn header_claim(req: &Request<'_>, auth: &[u8], now_unix_s: i64) -> Result<Claim, AuthError> {
    let malformed = AuthError::HeaderMalformed;
    let fields = req
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("authorization"));
    if fields.count() > 1 {
        // Which one a proxy on the way would have read is anyone's guess.
        return Err(malformed("it is sent more than once".into()));
    }
    let auth = std::str::from_utf8(auth)
        .map_err(|_| malformed("it is not UTF-8".into()))?
        .trim();
    let Some(rest) = auth
        .strip_prefix(ALGORITHM)
        .filter(|r| r.starts_with([' ', '\t']))
    else {
        return Err(if auth.starts_with("AWS ") {
            AuthError::Unsupported("SigV2 (AWS access-key:signature)".into())
        } else if auth.starts_with("AWS4-ECDSA-P256-SHA256") {
            AuthError::Unsupported("SigV4a (AWS4-ECDSA-P256-SHA256)".into())
        } else {
            malformed(format!(
                "it does not start with {ALGORITHM} (got {:?})",
                auth.split_whitespace().next().unwrap_or("")
            ))
        });
    };
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let part = part.trim();
        let (slot, value) = if let Some(v) = part.strip_prefix("Credential=") {
            (&mut credential, v)
        } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
            (&mut signed, v)
        } else if let Some(v) = part.strip_prefix("Signature=") {
            (&mut signature, v)
        } else {
            return Err(malformed(format!(
                "unknown component {part:?} (expected Credential=, SignedHeaders=, Signature=)"
            )));
        };
        if slot.replace(value).is_some() {
            return Err(malformed(format!("a component is repeated: {part:?}")));
        }
    }
    let (Some(credential), Some(signed), Some(signature)) = (credential, signed, signature) else {
        return Err(malformed(
            "it needs Credential=, SignedHeaders= and Signature=".into(),
        ));
    };
    let cred = parse_credential(credential).map_err(malformed)?;
    let mut sha_fields = req
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("x-amz-content-sha256"));
    let content_sha = sha_fields.next().map(|(_, v)| *v);
    if sha_fields.next().is_some() {
        return Err(AuthError::BadContentSha256(
            "x-amz-content-sha256 sent more than once".into(),
        ));
    }
    check_signed_headers(signed, content_sha.is_some()).map_err(malformed)?;
    let signature = parse_signature(signature.as_bytes()).map_err(malformed)?;
    let time = header_time(req)?;
    scope_date_matches(&cred, &time).map_err(malformed)?;
    let skew_s = time.unix_s.saturating_sub(now_unix_s);
    if skew_s.saturating_abs() > MAX_SKEW_S {
        return Err(AuthError::TimeTooSkewed {
            request_time: time.as_str().to_owned(),
            skew_s,
            max_s: MAX_SKEW_S,
        });
    }
    let payload = payload_mode(content_sha.ok_or(AuthError::MissingContentSha256)?)?;
    Ok(Claim {
        access_key_id: cred.access_key_id.to_owned(),
        presigned: false,
        payload,
        region: cred.region.to_owned(),
        signed_headers: signed.to_owned(),
        signature,
        time,
        expires_s: None,
    })
}

/// The X-Amz-* parameters of a presigned URL, raw (still encoded).
#[derive(Default)]
struct QueryAuth<'a> {
    algorithm: Option<&'a [u8]>,
    credential: Option<&'a [u8]>,
    date: Option<&'a [u8]>,
    expires: Option<&'a [u8]>,
    signed_headers: Option<&'a [u8]>,
    signature: Option<&'a [u8]>,
    sigv2: bool,
}

impl<'a> QueryAuth<'a> {
    fn scan(query: &'a str) -> Result<QueryAuth<'a>, AuthError> {
        let mut q = QueryAuth::default();
        let (mut v2_key, mut v2_sig) = (false, false);
        for piece in query.as_bytes().split(|&b| b == b'&') {
            let (name, value) = match piece.iter().position(|&b| b == b'=') {
                Some(eq) => (&piece[..eq], &piece[eq + 1..]),
                None => (piece, &b""[..]),
            };
            let slot = match name {
                b"X-Amz-Algorithm" => &mut q.algorithm,
                b"X-Amz-Credential" => &mut q.credential,
                b"X-Amz-Date" => &mut q.date,
                b"X-Amz-Expires" => &mut q.expires,
                b"X-Amz-SignedHeaders" => &mut q.signed_headers,
                b"X-Amz-Signature" => &mut q.signature,
                b"AWSAccessKeyId" => {
                    v2_key = true;
                    continue;
                }
                b"Signature" => {
                    v2_sig = true;
                    continue;
                }
                _ => continue,
            };
            if slot.replace(value).is_some() {
                return Err(AuthError::QueryMalformed(format!(
                    "{} is given more than once",
                    String::from_utf8_lossy(name)
                )));
            }
        }
        q.sigv2 = v2_key && v2_sig;
        Ok(q)
    }

    fn present(&self) -> bool {
        self.algorithm.is_some() || self.credential.is_some() || self.signature.is_some()
    }
}

fn required<'a>(v: Option<&'a [u8]>, name: &str) -> Result<std::borrow::Cow<'a, [u8]>, AuthError> {
    let v = v.ok_or_else(|| {
        AuthError::QueryMalformed(format!(
            "{name} is missing (a presigned URL needs X-Amz-Algorithm, X-Amz-Credential, \
             X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature)"
        ))
    })?;
    query_decode(v, name)
}

fn utf8<'a>(v: &'a [u8], name: &str) -> Result<&'a str, AuthError> {
    std::str::from_utf8(v).map_err(|_| AuthError::QueryMalformed(format!("{name} is not UTF-8")))
}

fn query_claim(q: &QueryAuth<'_>, now_unix_s: i64) -> Result<Claim, AuthError> {
    let malformed = AuthError::QueryMalformed;
    let algorithm = required(q.algorithm, "X-Amz-Algorithm")?;
    if *algorithm != *ALGORITHM.as_bytes() {
        let algorithm = String::from_utf8_lossy(&algorithm).into_owned();
        return Err(if algorithm == "AWS4-ECDSA-P256-SHA256" {
            AuthError::Unsupported("SigV4a (AWS4-ECDSA-P256-SHA256)".into())
        } else {
            malformed(format!(
                "X-Amz-Algorithm is {algorithm:?}; only {ALGORITHM} is supported"
            ))
        });
    }
    let credential = required(q.credential, "X-Amz-Credential")?;
    let cred = parse_credential(utf8(&credential, "X-Amz-Credential")?).map_err(malformed)?;
    let date = required(q.date, "X-Amz-Date")?;
    let time = AmzTime::parse(&date).ok_or_else(|| {
        malformed(format!(
            "X-Amz-Date {:?} is not yyyymmddThhmmssZ",
            String::from_utf8_lossy(&date)
        ))
    })?;
    scope_date_matches(&cred, &time).map_err(malformed)?;
    let expires = required(q.expires, "X-Amz-Expires")?;
    let expires_s = utf8(&expires, "X-Amz-Expires")?
        .parse::<i64>()
        .ok()
        .filter(|e| (1..=MAX_EXPIRES_S).contains(e))
        .ok_or_else(|| {
            malformed(format!(
                "X-Amz-Expires {:?} must be a number of seconds from 1 to {MAX_EXPIRES_S}",
                String::from_utf8_lossy(&expires)
            ))
        })?;
    let signed = required(q.signed_headers, "X-Amz-SignedHeaders")?;
    let signed = utf8(&signed, "X-Amz-SignedHeaders")?;
    check_signed_headers(signed, false).map_err(malformed)?;
    let signature = required(q.signature, "X-Amz-Signature")?;
    let signature = parse_signature(&signature).map_err(malformed)?;
    if time.unix_s.saturating_sub(now_unix_s) > MAX_SKEW_S {
        return Err(AuthError::NotYetValid(time.as_str().to_owned()));
    }
    let expired_at_unix_s = time.unix_s.saturating_add(expires_s);
    if now_unix_s > expired_at_unix_s {
        return Err(AuthError::Expired {
            expired_at_unix_s,
            now_unix_s,
        });
    }
    Ok(Claim {
        access_key_id: cred.access_key_id.to_owned(),
        presigned: true,
        payload: PayloadMode::Unsigned,
        region: cred.region.to_owned(),
        signed_headers: signed.to_owned(),
        signature,
        time,
        expires_s: Some(expires_s),
    })
}

/// None: an anonymous request (no Authorization header, no
/// X-Amz-Signature). Checks the form, the algorithm, the scope (service
/// "s3", `aws4_request`; any region, the client's scope is what it signed
/// with), that the signed headers include host (and x-amz-content-sha256
/// when present), the request time within 15 min of now (header auth) or
/// the presigned URL not expired (X-Amz-Expires 1..=604800 from
/// X-Amz-Date).
pub fn claim(req: &Request<'_>, now_unix_s: i64) -> Result<Option<Claim>, AuthError> {
    let q = QueryAuth::scan(req.query)?;
    match req.header("authorization") {
        Some(_) if q.present() => Err(AuthError::BothMechanisms),
        Some(auth) => header_claim(req, auth, now_unix_s).map(Some),
        None if q.present() => query_claim(&q, now_unix_s).map(Some),
        None if q.sigv2 => Err(AuthError::Unsupported(
            "SigV2 presigned URLs (AWSAccessKeyId, Signature)".into(),
        )),
        None => Ok(None),
    }
}
