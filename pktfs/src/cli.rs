//! What every `pktfs` subcommand means the same way: addresses (host
//! names resolve), the durability options (`--persist`, `--verify`, also
//! `-o persist=`/`-o verify=` for mount), how an image's open error is
//! worded (the path named once), and a pre-flight check that an address
//! can be listened on. Sizes are [`pktfs_support::size`]'s, shared with mkfs.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::Path;

use pktfs_fs::media::PersistChoice;
use pktfs_fs::VerifyMode;

/// A clap value parser for HOST:PORT (`127.0.0.1:8080`, `[::1]:8080`,
/// `localhost:8080`): the first address the name resolves to, IPv4 first.
/// Errors do not repeat the value (clap names it).
pub fn resolve_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if s.rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        return Err("expected HOST:PORT, e.g. 127.0.0.1:8080".into());
    }
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("the host name does not resolve ({e})"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| "the host name resolves to no address".into())
}

/// Fail early, naming the address, when `addr` cannot be listened on
/// (in use, not an address of this host, a privileged port): before an
/// image is created or opened for it.
pub fn check_listen(addr: SocketAddr) -> Result<(), String> {
    TcpListener::bind(addr)
        .map(drop)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

// clap names the value, so these errors do not (the FromStr errors do).
fn persist_value(s: &str) -> Result<String, String> {
    s.parse::<PersistChoice>()
        .map(|_| s.to_string())
        .map_err(|_| format!("not a persist mode ({})", pktfs_fs::media::persist_names()))
}

/// `--busy-poll-us`: microseconds, at most one second.
pub fn busy_poll_value(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n <= 1_000_000 => Ok(n),
        Ok(_) => Err("more than 1000000 microseconds (one second)".into()),
        Err(_) => Err("not a number of microseconds".into()),
    }
}

fn verify_value(s: &str) -> Result<String, String> {
    s.parse::<VerifyMode>()
        .map(|_| s.to_string())
        .map_err(|_| "not a verify mode (once, always, off)".into())
}

/// `--persist` and `--verify`, the same in mount, serve and up.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DurabilityArgs {
    /// How writes are made durable: auto (chosen by what the image is on,
    /// and printed), clwb (write back each line with the best instruction
    /// the CPU has), clflushopt or clflush (the same with that instruction,
    /// to see what a CPU without clwb costs), msync, eadr [default: auto].
    /// For mount, the same as -o persist=MODE.
    #[arg(long, value_name = "MODE", value_parser = persist_value)]
    pub persist: Option<String>,
    /// When reads check payload checksums: once (each record once per
    /// open), always, off [default: once]. For mount, the same as
    /// -o verify=WHEN. `pktfs send` checks every record it sends
    /// whatever this says.
    #[arg(long, value_name = "WHEN", value_parser = verify_value)]
    pub verify: Option<String>,
}

impl DurabilityArgs {
    pub fn persist(&self) -> PersistChoice {
        self.persist
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or(PersistChoice::Auto)
    }

    pub fn verify(&self) -> VerifyMode {
        self.verify
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or(VerifyMode::Once)
    }

    /// The same choices as mount options (`persist=...`, `verify=...`).
    pub fn as_mount_options(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(p) = &self.persist {
            v.push(format!("persist={p}"));
        }
        if let Some(w) = &self.verify {
            v.push(format!("verify={w}"));
        }
        v
    }
}

/// Is `e` the refusal of an image whose lock another process holds?
pub fn is_locked(e: &pktfs_fs::FsError) -> bool {
    matches!(
        e,
        pktfs_fs::FsError::Media(pktfs_fs::media::MediaError::Locked { .. })
    )
}

/// `Volume::open`, waiting (a bounded time, saying so through `note`) for
/// a mount daemon that is still closing the image after `umount`.
pub fn open_volume(
    image: &Path,
    opts: &pktfs_fs::OpenOptions,
    note: impl FnMut(&str),
) -> Result<pktfs_fs::Volume, pktfs_fs::FsError> {
    pktfs_support::holder::wait_for_release(
        image,
        || pktfs_fs::Volume::open(image, opts),
        is_locked,
        note,
    )
}

/// An error opening `image`, naming the path once (most Volume errors
/// already name it; the others get it in front).
pub fn open_error(image: &Path, e: &pktfs_fs::FsError) -> String {
    if e.names_path() {
        e.to_string()
    } else {
        format!("{}: {e}", image.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            resolve_addr("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            resolve_addr("[::1]:80").unwrap(),
            "[::1]:80".parse().unwrap()
        );
        let l = resolve_addr("localhost:8080").unwrap();
        assert!(l.ip().is_loopback() && l.port() == 8080, "{l}");
        for bad in [
            "localhost",
            "8080",
            ":80",
            "localhost:http",
            "localhost:99999",
        ] {
            let e = resolve_addr(bad).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
        let e = resolve_addr("no-such-host.invalid:80").unwrap_err();
        assert!(e.contains("does not resolve"), "{e}");
    }

    #[test]
    fn durability_as_mount_options() {
        let d = DurabilityArgs {
            persist: Some("msync".into()),
            verify: Some("always".into()),
        };
        assert_eq!(d.as_mount_options(), ["persist=msync", "verify=always"]);
        assert_eq!(d.verify(), VerifyMode::Always);
        assert_eq!(DurabilityArgs::default().persist(), PersistChoice::Auto);
        assert!(persist_value("fast").is_err());
    }
}
