//! The S3 protocol as pktfs speaks it, with no I/O: what the S3 endpoint
//! (pktfs-netpath) and its clients in tests and benchmarks share.
//!
//! - [`sigv4`]: AWS Signature Version 4: the Authorization header,
//!   presigned URLs, aws-chunked bodies with chunk and trailer signatures;
//!   verifying (server) and signing (clients).
//! - [`checksum`]: CRC32C, CRC32, CRC64NVME, SHA-256 and MD5 as S3 defines
//!   them (base64 values, multipart composites); ETags.
//! - [`xml`]: the response bodies and the request bodies parsed.
//! - [`error`]: S3 error codes, their HTTP status and the Error XML.
//! - [`names`]: bucket names, object keys and their mapping to paths,
//!   query strings.
//! - [`percent`]: percent-encoding (AWS's UriEncode) and strict decoding.
//! - [`keys`]: access keys and their per-bucket grants, as stored in the
//!   image.

pub mod checksum;
pub mod cors;
pub mod error;
pub mod keys;
pub mod meta_value;
pub mod names;
pub mod part_sizes;
pub mod percent;
pub mod sigv4;
pub mod xml;
