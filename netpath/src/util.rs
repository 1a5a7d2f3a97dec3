//! Small helpers: the clock, raw-mode file names, process identity.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A name for a raw-mode file: `20250101T120000.123456789Z-127.0.0.1-5000`
/// (sorts by arrival; IPv6 colons become `_`).
pub(crate) fn raw_name(ns: u64, peer: std::net::SocketAddr) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    // RFC 3339 basic format: 2025-01-01T12:00:00.123456789Z without the
    // separators, so names stay free of ':' and sort by time.
    let mut name: String = humantime::format_rfc3339_nanos(t)
        .to_string()
        .chars()
        .filter(|&c| c != '-' && c != ':')
        .collect();
    let ip = peer.ip().to_string().replace(':', "_");
    name.push_str(&format!("-{ip}-{}", peer.port()));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let peer: std::net::SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(
            raw_name(1_000_000_000 * 86400 + 5, peer),
            "19700102T000000.000000005Z-__1-80"
        );
    }
}
