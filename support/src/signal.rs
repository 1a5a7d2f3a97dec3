//! Ctrl-C / SIGTERM for the long-running commands.

use std::sync::mpsc::{channel, Receiver};

/// A receiver that gets `()` on SIGINT, SIGTERM or SIGHUP. Call once per
/// process.
pub fn shutdown_signal() -> Result<Receiver<()>, String> {
    let (tx, rx) = channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    Ok(rx)
}
