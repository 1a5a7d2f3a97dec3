//! Printing a command's output the way coreutils do: output to a closed
//! pipe (`pktfs chain IMAGE FILE | head`) ends the command quietly with
//! status 141 (128 + SIGPIPE, what a shell reports for `seq 1e9 | head`),
//! instead of `println!`'s panic. Rust ignores SIGPIPE, and restoring its
//! default action needs `unsafe` (forbidden in the tools), so the write
//! error is what tells.
//!
//! Servers print their banner with [`line_or_ignore`]: a closed pipe must
//! not stop a running service.

use std::io::Write;

/// The status of a command whose output pipe was closed.
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// Write `args` and a newline to stdout; end the process quietly on a
/// broken pipe. Other write errors are reported once and end it with 1.
pub fn line(args: std::fmt::Arguments<'_>) {
    if let Err(e) = write_line(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        eprintln!("cannot write the output: {e}");
        std::process::exit(1);
    }
}

/// Write `args` and a newline to stdout; a failed write is ignored.
pub fn line_or_ignore(args: std::fmt::Arguments<'_>) {
    let _ = write_line(args);
}

fn write_line(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_fmt(args)?;
    o.write_all(b"\n")?;
    o.flush()
}

/// `println!` for a command's output: see [`line()`].
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => { $crate::stdout::line(format_args!($($t)*)) };
}

/// `println!` for a server's banner: see [`line_or_ignore`].
#[macro_export]
macro_rules! sayln {
    ($($t:tt)*) => { $crate::stdout::line_or_ignore(format_args!($($t)*)) };
}

/// Write raw bytes to stdout (`pktfs cat`), ending quietly on a broken
/// pipe as [`line()`] does.
pub fn bytes(b: &[u8]) {
    use std::io::Write;
    let r = std::io::stdout().lock().write_all(b);
    if let Err(e) = r {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        eprintln!("cannot write the output: {e}");
        std::process::exit(1);
    }
}
