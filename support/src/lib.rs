//! What the command-line tools (`pktfs`, `mount.pktfs`, `mkfs.pktfs`,
//! `fsck.pktfs`) share and the libraries do not need: reading sizes the one
//! way every tool reads them, printing to a pipe that may close, Ctrl-C,
//! finding who holds an image, and the man pages and completions made from
//! each tool's clap definition. (mount(8)'s option strings are the pktfs
//! crate's: only its two mount binaries read them.)
//!
//! It sits above the libraries (nothing depends on it but the binaries and
//! their tests), so a library never exits the process or installs a signal
//! handler on its caller's behalf.

mod error;
pub mod gendocs;
pub mod holder;
pub mod signal;
pub mod size;
pub mod stdout;

pub use error::{finish, status, CliError};
