//! The commands of the `pktfs` and `mount.pktfs` binaries, one module per
//! subcommand (plus `cli`, what they share, `mount_options`, mount(8)'s
//! `-o` list, and `logging`). Both binaries are thin: they parse arguments
//! and call in here.

pub mod chain_cmd;
pub mod cli;
pub use pktfs_support::gendocs;
pub mod keys_cmd;
pub mod logging;
pub mod mount_cmd;
pub mod mount_options;
pub mod net_cmd;
pub mod offline_cmd;
pub mod pcapng;
pub mod quickstart;
pub mod scrub_cmd;
pub mod stream_cmd;
pub mod tier_cmd;
pub mod up_s3;
