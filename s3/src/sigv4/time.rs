//! SigV4's timestamps: ISO 8601 basic format in UTC, `yyyymmddThhmmssZ`.

/// A request time: its text as signed and its unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AmzTime {
    text: [u8; 16],
    pub(crate) unix_s: i64,
}

impl AmzTime {
    pub(crate) fn parse(text: &[u8]) -> Option<AmzTime> {
        let unix_s = parse_amz_date_bytes(text)?;
        let text: [u8; 16] = text.try_into().ok()?;
        Some(AmzTime { text, unix_s })
    }

    pub(crate) fn from_unix(unix_s: i64) -> AmzTime {
        AmzTime {
            text: format_bytes(unix_s),
            unix_s,
        }
    }

    /// `yyyymmddThhmmssZ`
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits, `T` and `Z` are ever stored.
        std::str::from_utf8(&self.text).unwrap_or("")
    }

    /// `yyyymmdd`
    pub(crate) fn date(&self) -> &str {
        std::str::from_utf8(&self.text[..8]).unwrap_or("")
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (civil_from_days).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn parse_amz_date_bytes(t: &[u8]) -> Option<i64> {
    if t.len() != 16 || t[8] != b'T' || t[15] != b'Z' {
        return None;
    }
    let (y, mo, d) = (digits(&t[0..4])?, digits(&t[4..6])?, digits(&t[6..8])?);
    let (h, mi, s) = (digits(&t[9..11])?, digits(&t[11..13])?, digits(&t[13..15])?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Unix seconds of a `yyyymmddThhmmssZ` timestamp; `None` if it is not
/// one (or names no real date).
pub fn parse_amz_date(text: &str) -> Option<i64> {
    parse_amz_date_bytes(text.as_bytes())
}

fn format_bytes(unix_s: i64) -> [u8; 16] {
    let (y, m, d) = civil_from_days(unix_s.div_euclid(86_400));
    let secs = unix_s.rem_euclid(86_400);
    // Years outside 0..=9999 cannot be written in four digits: clamp
    // rather than write garbage (no signer has such a clock).
    let y = y.clamp(0, 9999);
    let mut out = *b"00000000T000000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, y);
    put(4, 2, m);
    put(6, 2, d);
    put(9, 2, secs / 3600);
    put(11, 2, secs / 60 % 60);
    put(13, 2, secs % 60);
    out
}

/// `yyyymmddThhmmssZ` of unix seconds.
pub fn format_amz_date(unix_s: i64) -> String {
    AmzTime::from_unix(unix_s).as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(parse_amz_date("20130524T000000Z"), Some(1_369_353_600));
        assert_eq!(parse_amz_date("19700101T000000Z"), Some(0));
        assert_eq!(parse_amz_date("20000229T235959Z"), Some(951_868_799));
        assert_eq!(format_amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(format_amz_date(951_868_799), "20000229T235959Z");
    }

    #[test]
    fn bad_dates_refused() {
        for bad in [
            "",
            "20130524T000000",
            "20130524 000000Z",
            "20130230T000000Z",
            "20190229T000000Z",
            "20131324T000000Z",
            "20130524T240000Z",
            "20130524T006000Z",
            "2013052AT000000Z",
            "+0130524T000000Z",
            "20130524T000000Z ",
        ] {
            assert_eq!(parse_amz_date(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn format_parse_round_trip(unix_s in 0i64..253_402_300_799) {
            proptest::prop_assert_eq!(parse_amz_date(&format_amz_date(unix_s)), Some(unix_s));
        }
    }
}
