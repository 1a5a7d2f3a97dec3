//! Small helpers: dates, socket waits, process identity.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// (year, month, day, hour, minute, second, weekday 0=Sunday) in UTC.
pub fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32, u32) {
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    let wd = (days + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
        wd,
    )
}

/// IMF-fixdate (RFC 9110 5.6.7): "Sun, 06 Nov 1994 08:49:37 GMT".
pub(crate) fn http_date(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, hh, mm, ss, wd) = civil(secs);
    format!(
        "{}, {d:02} {} {y:04} {hh:02}:{mm:02}:{ss:02} GMT",
        DAYS[wd as usize],
        MONTHS[m as usize - 1]
    )
}

/// A name for a raw-mode file: `20250101T120000.123456789Z-127.0.0.1-5000`
/// (sorts by arrival; IPv6 colons become `_`).
pub(crate) fn raw_name(ns: u64, peer: std::net::SocketAddr) -> String {
    let (y, m, d, hh, mm, ss, _) = civil((ns / 1_000_000_000) as i64);
    let ip = peer.ip().to_string().replace(':', "_");
    format!(
        "{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}.{:09}Z-{ip}-{}",
        ns % 1_000_000_000,
        peer.port()
    )
}

/// Owner of files the servers create: the server process's user.
pub(crate) fn ids() -> (u32, u32) {
    (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        let peer: std::net::SocketAddr = "[::1]:80".parse().unwrap();
        assert_eq!(
            raw_name(1_000_000_000 * 86400 + 5, peer),
            "19700102T000000.000000005Z-__1-80"
        );
    }
}
