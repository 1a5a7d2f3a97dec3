//! Times as S3's XML writes them.

/// `unix_ns` (nanoseconds since 1970-01-01 UTC) as S3's XML writes times:
/// ISO 8601 in UTC with milliseconds, `2009-10-12T17:50:30.000Z`. Times
/// before 1970 are written too (floor, not truncation toward zero); times
/// outside years 0 to 9999, which four digits cannot hold, are clamped.
pub fn iso8601(unix_ns: i64) -> String {
    const MIN_S: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
    const MAX_S: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let secs = unix_ns.div_euclid(1_000_000_000);
    let ms = unix_ns.rem_euclid(1_000_000_000) / 1_000_000;
    let t = time::OffsetDateTime::from_unix_timestamp(secs.clamp(MIN_S, MAX_S))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}
