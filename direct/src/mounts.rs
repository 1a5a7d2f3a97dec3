//! The pktfs mounts this process can see (/proc/self/mountinfo): where
//! each is, its device, and its source (the image file). A direct reader
//! finds the image behind a mount here; the command-line tools find who
//! holds an image the same way.

use std::path::PathBuf;

/// A `fuse.pktfs` mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PktfsMount {
    pub mountpoint: PathBuf,
    /// The image file the mount was made from, as the mount table says.
    pub source: PathBuf,
    /// The mount's device (`st_dev` of its files).
    pub dev: u64,
}

/// The pktfs mounts this process can see.
pub fn mounts() -> std::io::Result<Vec<PktfsMount>> {
    Ok(parse_mountinfo(&std::fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}

/// The `fuse.pktfs` lines of a mountinfo table.
pub fn parse_mountinfo(info: &str) -> Vec<PktfsMount> {
    let mut out = Vec::new();
    for line in info.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let mut pre = pre.split(' ');
        let (majmin, mp) = (pre.nth(2).unwrap_or(""), pre.nth(1).unwrap_or(""));
        let mut post = post.split(' ');
        let (fstype, source) = (post.next().unwrap_or(""), post.next().unwrap_or(""));
        if fstype != "fuse.pktfs" {
            continue;
        }
        let dev = majmin
            .split_once(':')
            .and_then(|(a, b)| Some(libc::makedev(a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or(0);
        out.push(PktfsMount {
            mountpoint: PathBuf::from(unescape_mountinfo(mp)),
            source: PathBuf::from(unescape_mountinfo(source)),
            dev,
        });
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = |c: &u8| (b'0'..=b'7').contains(c);
        if b[i] == b'\\' && i + 4 <= b.len() && b[i + 1..i + 4].iter().all(octal) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pktfs_lines_with_device_mountpoint_and_source() {
        let t =
            "36 35 0:31 / /mnt/a\\040b rw,nosuid - fuse.pktfs /dev/shm/p\\040m.img rw,user_id=0\n\
                 37 35 0:32 / /tmp rw - tmpfs tmpfs rw\n\
                 38 35 8:1 / / rw - ext4 /dev/sda1 rw\n";
        assert_eq!(
            parse_mountinfo(t),
            vec![PktfsMount {
                mountpoint: "/mnt/a b".into(),
                source: "/dev/shm/p m.img".into(),
                dev: libc::makedev(0, 31),
            }]
        );
        assert_eq!(unescape_mountinfo(r"/x\04"), r"/x\04");
        assert_eq!(unescape_mountinfo(r"a\134b"), r"a\b");
    }
}
