//! pktfs direct access: a program on the same machine reads pktfs files
//! straight from the mapped image, at memory speed, every byte checked
//! against the CRC32C its record carries, while the process that holds the
//! image (a mount or a server) keeps serving and never waits for it.
//!
//! ```no_run
//! let img = pktfs_direct::Image::open("/dev/shm/pktfs.img")?;
//! let f = img.open_file("/logs/today.log")?;
//! let mut buf = vec![0u8; 4096];
//! let n = f.read_at(&mut buf, 0)?;
//! # Ok::<(), pktfs_direct::Error>(())
//! ```
//!
//! docs/DIRECT.md has the protocol between readers and the holder, its
//! invariants, and what falls back to the holder and why. In short:
//! - the mapping is read-only: a reader can never damage the image;
//! - a read copies out of the mapping inside a *section* (the inode's
//!   change counter and the image epoch, read before and after) and keeps
//!   the copy only if the section held, so it returns the file as it was at
//!   one moment, never bytes of a buffer reused meanwhile;
//! - ranges in the tier and anything else a reader cannot serve go through
//!   the holder, or fail with an error that says so.

mod base;
pub mod capi;
mod error;
mod file;
mod holder;
mod image;
mod index;
mod inode;
mod lend;
mod map;
pub mod mounts;
mod path;
mod section;
mod shared;
mod stat;
mod verify;

pub use error::{Error, Result};
pub use file::File;
pub use holder::MAX_HOLD_BYTES;
pub use image::{Image, OpenOptions};
pub use lend::Seg;
pub use path::DirEntry;
pub use pktfs_layout::FileType;
pub use stat::Stat;
pub use verify::VerifyMode;
