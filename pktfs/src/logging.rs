//! Logging: what the Volume and the servers report through `tracing`
//! (damaged data, a volume that stopped, refused images) goes to stderr.
//! `RUST_LOG` sets the levels (default: info).

/// Install the subscriber; call once, first thing in `main`.
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
