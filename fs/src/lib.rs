//! pktfs: a persistent-memory file system whose files are chains of
//! 64-byte packet-metadata records.
//!
//! - [`media`]: the mapping and persistence primitives (all `unsafe` is there);
//! - [`Volume`]: chains, allocators, journal, recovery.
//!
//! The FUSE mount is pktfs-fuse, an adapter over this crate; nothing here
//! knows FUSE.
//!
//! # Embedding
//! A program can own an image directly (docs/EMBEDDING.md has more):
//!
//! ```
//! use pktfs_fs::{FormatOptions, OpenOptions, Volume};
//! # let dir = tempfile::tempdir().unwrap();
//! # let image = dir.path().join("demo.img");
//! // Create an image (allocated in full) and open it.
//! let params = pktfs_layout::GeometryParams::for_size(16 << 20);
//! Volume::format(&image, &FormatOptions { params, label: None }, &mut |_, _| {})?;
//! let vol = Volume::open(&image, &OpenOptions::default())?;
//! // Every call is durable when it returns.
//! let dir = vol.mkdir(vol.root(), b"logs", 0o755, 0, 0)?;
//! let f = vol.create(dir.ino, b"a.txt", 0o644, 0, 0)?;
//! vol.write(f.ino, 0, b"hello, packets")?;
//! // Reads are checked against the records' CRC32C.
//! assert_eq!(vol.read(f.ino, 0, 100)?, b"hello, packets");
//! // The file as its chain of packet-metadata records.
//! let chain = vol.chain(f.ino)?;
//! assert_eq!(chain[0].len, 14);
//! vol.close()?;
//! # Ok::<(), pktfs_fs::FsError>(())
//! ```

pub mod error;
pub mod media;
pub mod volume;

pub use error::{FsError, Result};
pub use pktfs_layout::FileType;
pub use volume::Precondition;
pub use volume::{
    Access, Acl, AclKind, Attr, Bound, ChainEntry, ContentDigest, Cred, Denial, DirEntry,
    FallocMode, FormatOptions, LentRx, Linked, NewMode, OpenOptions, OpenReport, OwnedTmpFile,
    RenameFlags, RxBuf, RxHeld, RxPiece, RxTime, ScrubDamage, ScrubOptions, ScrubProgress,
    ScrubReport, Seg, SetAttr, StatFs, TimeSet, TmpFile, TxFetched, TxHold, TxKeep, TxPlan,
    TxRange, TxSeg, TxWindow, VerifyMode, Volume, XattrFlags, MAX_S3_CORS_BYTES,
    MAX_SYSTEM_XATTR_BYTES, S3_CORS_XATTR, S3_OWNER_XATTR,
};
pub use volume::{
    ObjectLive, RemoteBytes, RemoteExtent, RemoteRecordInfo, RemoteRef, RemoteSlice, RemoteSource,
    SwitchReport, TierCandidate, TierExtent, TierOut,
};
