//! Why a request's authentication was refused, with the S3 error code and
//! HTTP status each reason is answered with.

/// Why a request's authentication was refused. [`AuthError::code`] and
/// [`AuthError::status`] are what the S3 error response carries; the
/// message (Display) is for the `<Message>` and the logs.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    /// The Authorization header is not SigV4's form.
    #[error("the Authorization header is malformed: {0}")]
    HeaderMalformed(String),
    /// A presigned URL's X-Amz-* parameters are missing or malformed.
    #[error("the presigned URL's query parameters are malformed: {0}")]
    QueryMalformed(String),
    /// An authorization scheme other than SigV4 (SigV2, SigV4a).
    #[error(
        "the authorization mechanism {0} is not supported; sign with AWS4-HMAC-SHA256 (SigV4)"
    )]
    Unsupported(String),
    /// Both an Authorization header and a presigned query.
    #[error("only one auth mechanism is allowed: either the Authorization header or X-Amz-* query parameters, not both")]
    BothMechanisms,
    /// No usable x-amz-date (or Date) for a header-signed request.
    #[error("AWS authentication requires a valid Date or x-amz-date header: {0}")]
    MissingDate(String),
    /// A header-signed request without x-amz-content-sha256.
    #[error("missing required header for this request: x-amz-content-sha256 (S3 needs it with every SigV4 Authorization header)")]
    MissingContentSha256,
    /// x-amz-content-sha256 is neither a SHA-256 in hex nor a mode S3 knows.
    #[error("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER], STREAMING-UNSIGNED-PAYLOAD-TRAILER or 64 hex digits, not {0:?}")]
    BadContentSha256(String),
    /// The body's SHA-256 is not the one x-amz-content-sha256 announced
    /// (found by the endpoint once the body is in).
    #[error("the body's SHA-256 {computed} is not the x-amz-content-sha256 the request was signed with, {claimed}")]
    ContentSha256Mismatch { claimed: String, computed: String },
    /// The path or query holds a malformed percent-escape.
    #[error("{0}")]
    InvalidUri(String),
    /// The request's time is too far from the server's clock.
    #[error("the request was signed at {request_time} ({skew_s} s from the server's clock); at most {max_s} s are allowed: check the client's clock")]
    TimeTooSkewed {
        request_time: String,
        skew_s: i64,
        max_s: i64,
    },
    /// A presigned URL past its expiry.
    #[error("request has expired: the presigned URL was valid until {expired_at_unix_s} (unix s), it is now {now_unix_s}")]
    Expired {
        expired_at_unix_s: i64,
        now_unix_s: i64,
    },
    /// A presigned URL dated in the future.
    #[error("request is not valid yet: the presigned URL is dated {0}, later than the server's clock allows")]
    NotYetValid(String),
    /// The access key is not known (the endpoint's lookup says so).
    #[error("the AWS access key id {0:?} does not exist in our records")]
    UnknownAccessKey(String),
    /// The key is known but not allowed this request (the endpoint's
    /// grants say so).
    #[error("access denied: {0}")]
    AccessDenied(String),
    /// The recomputed signature differs from the request's.
    #[error("the request signature we calculated does not match the signature you provided: {0}")]
    SignatureMismatch(String),
    /// A chunk's or the trailer's signature differs from the recomputed one.
    #[error(
        "the signature of {0} does not match: the body was changed or signed with another key"
    )]
    ChunkSignatureMismatch(String),
    /// An aws-chunked body out of order (a chunk after the final one, a
    /// trailer where none is due, a malformed chunk header).
    #[error("malformed aws-chunked body: {0}")]
    ChunkedMalformed(String),
    /// The endpoint passed a key derived for another scope (a bug there).
    #[error("the signing key is for {key_scope}, the request's scope is {request_scope}")]
    KeyScope {
        key_scope: String,
        request_scope: String,
    },
}

impl AuthError {
    /// The S3 error code this is answered with.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::HeaderMalformed(_) => "AuthorizationHeaderMalformed",
            AuthError::QueryMalformed(_) => "AuthorizationQueryParametersError",
            AuthError::Unsupported(_) | AuthError::MissingContentSha256 => "InvalidRequest",
            AuthError::BothMechanisms | AuthError::BadContentSha256(_) => "InvalidArgument",
            AuthError::MissingDate(_)
            | AuthError::Expired { .. }
            | AuthError::NotYetValid(_)
            | AuthError::AccessDenied(_) => "AccessDenied",
            AuthError::ContentSha256Mismatch { .. } => "XAmzContentSHA256Mismatch",
            AuthError::InvalidUri(_) => "InvalidURI",
            AuthError::TimeTooSkewed { .. } => "RequestTimeTooSkewed",
            AuthError::UnknownAccessKey(_) => "InvalidAccessKeyId",
            AuthError::SignatureMismatch(_) | AuthError::ChunkSignatureMismatch(_) => {
                "SignatureDoesNotMatch"
            }
            AuthError::ChunkedMalformed(_) => "IncompleteBody",
            AuthError::KeyScope { .. } => "InternalError",
        }
    }

    /// The HTTP status this is answered with.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::HeaderMalformed(_)
            | AuthError::QueryMalformed(_)
            | AuthError::Unsupported(_)
            | AuthError::BothMechanisms
            | AuthError::MissingContentSha256
            | AuthError::BadContentSha256(_)
            | AuthError::ContentSha256Mismatch { .. }
            | AuthError::InvalidUri(_)
            | AuthError::ChunkedMalformed(_) => 400,
            AuthError::MissingDate(_)
            | AuthError::TimeTooSkewed { .. }
            | AuthError::Expired { .. }
            | AuthError::NotYetValid(_)
            | AuthError::UnknownAccessKey(_)
            | AuthError::AccessDenied(_)
            | AuthError::SignatureMismatch(_)
            | AuthError::ChunkSignatureMismatch(_) => 403,
            AuthError::KeyScope { .. } => 500,
        }
    }
}
