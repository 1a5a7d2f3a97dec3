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
    // `time` refuses what names no real date or time (Feb 30, 24:00).
    let month = time::Month::try_from(u8::try_from(mo).ok()?).ok()?;
    let date = time::Date::from_calendar_date(y as i32, month, d as u8).ok()?;
    let at = date.with_hms(h as u8, mi as u8, s as u8).ok()?;
    Some(at.assume_utc().unix_timestamp())
}

/// Unix seconds of a `yyyymmddThhmmssZ` timestamp; `None` if it is not
/// one (or names no real date).
pub fn parse_amz_date(text: &str) -> Option<i64> {
    parse_amz_date_bytes(text.as_bytes())
}

fn format_bytes(unix_s: i64) -> [u8; 16] {
    // Years outside 0..=9999 cannot be written in four digits: clamp
    // rather than write garbage (no signer has such a clock).
    const MIN_S: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
    const MAX_S: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    let t = time::OffsetDateTime::from_unix_timestamp(unix_s.clamp(MIN_S, MAX_S))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let mut out = *b"00000000T000000Z";
    let mut put = |at: usize, width: usize, mut v: i64| {
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, 4, i64::from(t.year()));
    put(4, 2, i64::from(u8::from(t.month())));
    put(6, 2, i64::from(t.day()));
    put(9, 2, i64::from(t.hour()));
    put(11, 2, i64::from(t.minute()));
    put(13, 2, i64::from(t.second()));
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
