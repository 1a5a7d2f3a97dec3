//! pktfs: a persistent-memory file system whose files are chains of
//! 64-byte packet-metadata records.

pub mod media;
