//! The one way every pktfs tool reads a size (`mkfs.pktfs --size`,
//! `--buffer-size`, `pktfs up --size`, `pktfs scrub --rate`,
//! `mount -o max_write=`, ...), so the same text means the same bytes
//! everywhere. The parsing is the `parse-size` crate's, in binary units.

/// The accepted forms, written once: every tool's `--help` ends with it
/// (`after_help`) and every size error quotes it.
pub const SIZE_FORMS: &str = "Sizes are bytes, or a number with K, M, G or T \
(powers of 1024; KB/KiB, MB/MiB, ... mean the same): 4096, 512K, 1M, 4G, 4GiB, 1.5G.";

/// Parse a size (errors do not repeat `s`: clap and the mount-option
/// parser already name the value): `4096`, `512K`, `1M`, `4G`, `4GiB`, `1.5G` (powers of
/// 1024 whether written K, KB or KiB, as mkfs(8) and dd(1) take them).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty size. {SIZE_FORMS}"));
    }
    parse_size::Config::new()
        .with_binary()
        .parse_size(t)
        .map_err(|e| match e {
            parse_size::Error::PosOverflow => "too large".to_string(),
            _ => format!("not a size. {SIZE_FORMS}"),
        })
}

/// [`parse_size()`] for a value that must fit a `u32` (a buffer size, a
/// FUSE request size).
pub fn parse_size_u32(s: &str) -> Result<u32, String> {
    let n = parse_size(s)?;
    u32::try_from(n).map_err(|_| "too large (at most 4G - 1)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accepted_forms() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("4GB"), Ok(4 << 30));
        assert_eq!(parse_size(" 64 MiB "), Ok(64 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert!(parse_size("").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("too large"));
        assert_eq!(parse_size_u32("1M"), Ok(1 << 20));
        assert!(parse_size_u32("4G").is_err());
    }
}
