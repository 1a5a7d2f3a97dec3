//! S3 error codes, the HTTP status AWS documents for each ("Error
//! responses", S3 API reference), and the error the endpoint answers with.
//!
//! The body of an error answer is [`crate::xml::error`]; [`S3Error::to_xml`]
//! (which the xml module defines, so that the codes depend on nothing)
//! writes it for one error.

use std::fmt;

/// Declares [`Code`] from one table: variant, HTTP status, AWS's message.
macro_rules! codes {
    ($($(#[$attr:meta])* $name:ident = $status:literal, $message:literal;)*) => {
        /// An S3 error code (the `<Code>` of an error answer).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $(
                #[doc = $message]
                $(#[$attr])*
                $name,
            )*
        }

        impl Code {
            /// Every code.
            pub const ALL: &'static [Code] = &[$(Code::$name),*];

            /// The code as S3 writes it: `NoSuchKey`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$name => stringify!($name),)*
                }
            }

            /// The HTTP status S3 answers this code with.
            pub fn status(self) -> u16 {
                match self {
                    $(Code::$name => $status,)*
                }
            }

            /// S3's description of the code, for an answer with nothing
            /// more specific to say.
            pub fn default_message(self) -> &'static str {
                match self {
                    $(Code::$name => $message,)*
                }
            }

            /// The code S3 spells `s` (exact case), if it is one of these.
            #[allow(clippy::should_implement_trait)] // Option, not FromStr's Result
            pub fn from_str(s: &str) -> Option<Code> {
                match s {
                    $(stringify!($name) => Some(Code::$name),)*
                    _ => None,
                }
            }
        }
    };
}

codes! {
    AccessDenied = 403, "Access Denied.";
    AccountProblem = 403, "There is a problem with your account that prevents the operation from completing.";
    AuthorizationHeaderMalformed = 400, "The authorization header that you provided is not valid.";
    AuthorizationQueryParametersError = 400, "The X-Amz-* query parameters of a presigned request are missing or malformed.";
    BadDigest = 400, "The Content-MD5 or checksum value that you specified did not match what the server received.";
    BadRequest = 400, "Bad Request.";
    BucketAlreadyExists = 409, "The requested bucket name is not available. Select a different name and try again.";
    BucketAlreadyOwnedByYou = 409, "The bucket that you tried to create already exists, and you own it.";
    BucketNotEmpty = 409, "The bucket that you tried to delete is not empty.";
    ConditionalRequestConflict = 409, "A conflicting operation occurred. If using PutObject you can retry the request.";
    CredentialsNotSupported = 400, "This request does not support credentials.";
    EntityTooLarge = 400, "Your proposed upload exceeds the maximum allowed object size.";
    EntityTooSmall = 400, "Your proposed upload is smaller than the minimum allowed object size.";
    ExpiredToken = 400, "The provided token has expired.";
    IllegalLocationConstraintException = 400, "The location constraint you specified does not match this endpoint's region.";
    IncompleteBody = 400, "You did not provide the number of bytes specified by the Content-Length HTTP header.";
    InternalError = 500, "An internal error occurred. Try again.";
    InvalidAccessKeyId = 403, "The access key ID that you provided does not exist in our records.";
    InvalidArgument = 400, "Invalid argument.";
    InvalidBucketName = 400, "The specified bucket is not valid.";
    InvalidBucketState = 409, "The request is not valid for the current state of the bucket.";
    /// Not in AWS's published table; S3 sends it for an aws-chunked body
    /// with a short chunk before the last. 400 as MinIO answers it.
    InvalidChunkSizeError = 400, "Only the last chunk is allowed to have a size less than 8192 bytes.";
    InvalidDigest = 400, "The Content-MD5 or checksum value that you specified is not valid.";
    InvalidEncryptionAlgorithmError = 400, "The encryption request that you specified is not valid.";
    InvalidLocationConstraint = 400, "The specified location constraint is not valid.";
    InvalidObjectState = 403, "The operation is not valid for the current state of the object.";
    InvalidPart = 400, "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified ETag might not have matched the uploaded part's ETag.";
    InvalidPartNumber = 416, "The requested part number is not satisfiable.";
    InvalidPartOrder = 400, "The list of parts was not in ascending order. The parts list must be specified in order by part number.";
    InvalidRange = 416, "The requested range cannot be satisfied.";
    InvalidRequest = 400, "Invalid request.";
    InvalidStorageClass = 400, "The storage class that you specified is not valid.";
    InvalidTag = 400, "The tag provided was not a valid tag.";
    InvalidToken = 400, "The provided token is malformed or otherwise not valid.";
    InvalidURI = 400, "The specified URI couldn't be parsed.";
    KeyTooLongError = 400, "Your key is too long.";
    MalformedACLError = 400, "The ACL that you provided was not well formed or did not validate against our published schema.";
    MalformedPOSTRequest = 400, "The body of your POST request is not well-formed multipart/form-data.";
    /// Not in AWS's published table; an aws-chunked body's trailer that
    /// cannot be read. 400 as MinIO answers it.
    MalformedTrailerError = 400, "The request contained trailing data that was not well-formed or did not conform to our published schema.";
    MalformedXML = 400, "The XML that you provided was not well formed or did not validate against our published schema.";
    MaxMessageLengthExceeded = 400, "Your request was too large.";
    MetadataTooLarge = 400, "Your metadata headers exceed the maximum allowed metadata size.";
    MethodNotAllowed = 405, "The specified method is not allowed against this resource.";
    MissingContentLength = 411, "You must provide the Content-Length HTTP header.";
    MissingRequestBodyError = 400, "The request body is empty.";
    MissingSecurityHeader = 400, "Your request is missing a required header.";
    NoSuchBucket = 404, "The specified bucket does not exist.";
    NoSuchBucketPolicy = 404, "The specified bucket does not have a bucket policy.";
    NoSuchCORSConfiguration = 404, "The CORS configuration does not exist.";
    NoSuchKey = 404, "The specified key does not exist.";
    NoSuchLifecycleConfiguration = 404, "The lifecycle configuration does not exist.";
    NoSuchTagSet = 404, "The TagSet does not exist.";
    NoSuchUpload = 404, "The specified multipart upload does not exist. The upload ID might not be valid, or the multipart upload might have been aborted or completed.";
    NoSuchVersion = 404, "The version ID specified in the request does not match an existing version.";
    NotImplemented = 501, "A header or query parameter that you provided implies functionality that is not implemented.";
    /// Not an error S3 writes a body for: a conditional GET or HEAD whose
    /// `If-None-Match` / `If-Modified-Since` held answers 304 without one.
    NotModified = 304, "Not Modified.";
    OperationAborted = 409, "A conflicting conditional operation is currently in progress against this resource. Try again.";
    PermanentRedirect = 301, "The bucket that you are attempting to access must be addressed using the specified endpoint.";
    PreconditionFailed = 412, "At least one of the preconditions that you specified did not hold.";
    Redirect = 307, "Temporary redirect.";
    RequestIsNotMultiPartContent = 400, "A bucket POST request must be of the enclosure-type multipart/form-data.";
    RequestTimeout = 400, "Your socket connection to the server was not read from or written to within the timeout period.";
    RequestTimeTooSkewed = 403, "The difference between the request time and the server's time is too large.";
    ServiceUnavailable = 503, "Service is unable to handle request.";
    SignatureDoesNotMatch = 403, "The request signature that the server calculated does not match the signature that you provided. Check your secret access key and signing method.";
    SlowDown = 503, "Please reduce your request rate.";
    TemporaryRedirect = 307, "You are being redirected to the bucket while DNS updates.";
    TooManyBuckets = 400, "You have attempted to create more buckets than allowed.";
    UnexpectedContent = 400, "This request does not support content.";
    UnresolvableGrantByEmailAddress = 400, "The email address that you provided does not match any account on record.";
    XAmzContentSHA256Mismatch = 400, "The provided 'x-amz-content-sha256' header does not match what was computed.";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error the endpoint answers with: the code (and through it the
/// status) and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct S3Error {
    /// The S3 code.
    pub code: Code,
    /// What went wrong, for the `<Message>`.
    pub message: String,
}

impl S3Error {
    /// An error with its own message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        S3Error {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status to answer with.
    pub fn status(&self) -> u16 {
        self.code.status()
    }
}

impl From<Code> for S3Error {
    /// The code with S3's own description of it.
    fn from(code: Code) -> Self {
        S3Error::new(code, code.default_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_as_aws_documents_them() {
        for (code, status) in [
            (Code::AccessDenied, 403),
            (Code::BadDigest, 400),
            (Code::BucketAlreadyExists, 409),
            (Code::BucketAlreadyOwnedByYou, 409),
            (Code::BucketNotEmpty, 409),
            (Code::EntityTooLarge, 400),
            (Code::EntityTooSmall, 400),
            (Code::IncompleteBody, 400),
            (Code::InternalError, 500),
            (Code::InvalidAccessKeyId, 403),
            (Code::InvalidArgument, 400),
            (Code::InvalidBucketName, 400),
            (Code::InvalidDigest, 400),
            (Code::InvalidPart, 400),
            (Code::InvalidPartOrder, 400),
            (Code::InvalidRange, 416),
            (Code::InvalidRequest, 400),
            (Code::KeyTooLongError, 400),
            (Code::MalformedXML, 400),
            (Code::MethodNotAllowed, 405),
            (Code::MissingContentLength, 411),
            (Code::NoSuchBucket, 404),
            (Code::NoSuchKey, 404),
            (Code::NoSuchUpload, 404),
            (Code::NotImplemented, 501),
            (Code::PreconditionFailed, 412),
            (Code::RequestTimeout, 400),
            (Code::RequestTimeTooSkewed, 403),
            (Code::ServiceUnavailable, 503),
            (Code::SignatureDoesNotMatch, 403),
            (Code::SlowDown, 503),
            (Code::XAmzContentSHA256Mismatch, 400),
            (Code::AuthorizationHeaderMalformed, 400),
            (Code::AuthorizationQueryParametersError, 400),
        ] {
            assert_eq!(code.status(), status, "{code}");
        }
    }

    #[test]
    fn names_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for &c in Code::ALL {
            assert_eq!(Code::from_str(c.as_str()), Some(c));
            assert!(seen.insert(c.as_str()));
            assert!(c.default_message().ends_with('.'), "{c}");
            assert!((300..600).contains(&c.status()), "{c}");
        }
        assert_eq!(
            Code::XAmzContentSHA256Mismatch.as_str(),
            "XAmzContentSHA256Mismatch"
        );
        assert_eq!(Code::from_str("nosuchkey"), None);
        assert_eq!(Code::from_str(""), None);
    }

    #[test]
    fn error_display() {
        let e = S3Error::new(Code::NoSuchKey, "no object \"a<b\" in bucket logs");
        assert_eq!(e.to_string(), "NoSuchKey: no object \"a<b\" in bucket logs");
        assert_eq!(e.status(), 404);
        let d = S3Error::from(Code::SlowDown);
        assert_eq!(d.message, "Please reduce your request rate.");
    }
}
