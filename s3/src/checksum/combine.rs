//! CRC combination (zlib's method, tables built at compile time) lives in
//! pktfs-layout, where a file's CRC32C is combined from its records': one
//! implementation for the records, the ETags and S3's FULL_OBJECT
//! multipart checksums.

pub use pktfs_layout::{crc32_combine, crc32c_combine, crc64nvme_combine};
