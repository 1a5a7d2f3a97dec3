//! pktfs: a persistent-memory file system whose files are chains of
//! 64-byte packet-metadata records.
//!
//! - [`media`]: the mapping and persistence primitives (all `unsafe` is there);
//! - [`Volume`]: chains, allocators, journal, recovery; no FUSE types.

pub mod error;
pub mod holder;
pub mod fuse;
pub mod media;
pub mod size;
pub mod stdout;
pub mod volume;

pub use error::{FsError, Result};
pub use layout::FileType;
pub use volume::{
    Attr, ChainEntry, DirEntry, FallocMode, FormatOptions, Linked, OpenOptions, OpenReport,
    RenameFlags, RxBuf, RxPiece, ScrubDamage, ScrubOptions, ScrubProgress, ScrubReport, Seg, SetAttr, StatFs, TimeSet, TxHold, TxSeg, VerifyMode, Volume,
    XattrFlags,
};
