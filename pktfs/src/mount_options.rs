//! mount(8)'s option strings (`-o ro,allow_other,max_write=1M`, fstab's
//! fourth field) into [`MountOptions`]: the parsing `pktfs mount` and
//! `mount.pktfs` share, kept out of the FUSE adapter (pktfs-fuse), which
//! only translates the parsed options.

use std::time::Duration;

use pktfs_fuse::{AtimeMode, MountOption, MountOptions};

/// Apply a comma-separated option list (`-o` may be given several times;
/// later options win). Options that only mean something to mount(8) or
/// fstab (`defaults`, `noauto`, `user`, `_netdev`, `nofail`, `x-*`, ...)
/// are accepted and ignored; anything unknown is an error.
pub fn apply(o: &mut MountOptions, list: &str) -> Result<(), String> {
    for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (k, v) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let flag = |f: MountOption, this: &mut MountOptions| this.flags.push(f);
        match (k, v) {
            ("ro", None) => o.read_only = true,
            ("rw", None) => o.read_only = false,
            ("allow_other", None) => o.allow_other = true,
            ("allow_root", None) => o.allow_root = true,
            ("auto_unmount", None) => o.auto_unmount = true,
            ("default_permissions", None) => {} // always on
            ("fsname", Some(v)) => o.fsname = Some(v.to_string()),
            ("subtype", Some(v)) => o.subtype = v.to_string(),
            ("dev", None) => flag(MountOption::Dev, o),
            ("nodev", None) => flag(MountOption::NoDev, o),
            ("suid", None) => flag(MountOption::Suid, o),
            ("nosuid", None) => flag(MountOption::NoSuid, o),
            ("exec", None) => flag(MountOption::Exec, o),
            ("noexec", None) => flag(MountOption::NoExec, o),
            ("atime" | "strictatime" | "norelatime", None) => {
                o.atime = AtimeMode::Strict;
                flag(MountOption::Atime, o)
            }
            ("relatime", None) => o.atime = AtimeMode::Relative,
            ("noatime", None) => {
                o.atime = AtimeMode::Never;
                flag(MountOption::NoAtime, o)
            }
            ("sync", None) => flag(MountOption::Sync, o),
            ("async", None) => flag(MountOption::Async, o),
            ("dirsync", None) => flag(MountOption::DirSync, o),
            ("threads", Some(v)) => o.threads = num::<usize>(k, v)?.clamp(1, 64),
            ("max_write", Some(v)) => o.max_write = bytes(k, v)?.clamp(4096, 16 << 20),
            ("max_readahead", Some(v)) => o.max_readahead = bytes(k, v)?.max(4096),
            ("attr_timeout", Some(v)) => o.attr_ttl = secs(k, v)?,
            ("entry_timeout", Some(v)) => o.entry_ttl = secs(k, v)?,
            ("kernel_cache", None) => o.keep_cache = true,
            ("no_kernel_cache", None) => o.keep_cache = false,
            ("direct_io", None) => o.direct_io = true,
            ("no_direct_io", None) => o.direct_io = false,
            ("persist", Some(v)) => {
                o.persist = v
                    .parse()
                    .map_err(|e| format!("mount option persist={v}: {e}"))?
            }
            ("verify", Some(v)) => {
                o.verify = v
                    .parse()
                    .map_err(|e| format!("mount option verify={v}: {e}"))?
            }
            // For mount(8) and fstab, not for the file system.
            (
                "defaults" | "auto" | "noauto" | "user" | "users" | "nouser" | "owner" | "group"
                | "_netdev" | "nofail" | "diratime" | "nodiratime" | "lazytime" | "nonempty"
                | "loud" | "silent",
                None,
            ) => {}
            (k, _) if k.starts_with("x-") || k == "comment" => {}
            _ => return Err(format!("unknown mount option '{opt}'")),
        }
    }
    Ok(())
}

/// Parse a comma-separated option list over the defaults.
pub fn parse(list: &str) -> Result<MountOptions, String> {
    let mut o = MountOptions::default();
    apply(&mut o, list)?;
    Ok(o)
}

fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("mount option {k}={v}: not a number"))
}

/// A byte count in the form every pktfs size takes (`max_write=1M`).
fn bytes(k: &str, v: &str) -> Result<u32, String> {
    pktfs_support::size::parse_size_u32(v).map_err(|e| format!("mount option {k}={v}: {e}"))
}

fn secs(k: &str, v: &str) -> Result<Duration, String> {
    let s: f64 = num(k, v)?;
    Duration::try_from_secs_f64(s)
        .map_err(|_| format!("mount option {k}={v}: not a duration in seconds"))
}
