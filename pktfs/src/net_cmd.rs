//! `pktfs serve`, `pktfs send`, `pktfs up`, and [`start_services`] for
//! `pktfs mount --listen`.
//!
//! The servers themselves are in the netpath crate; this module turns
//! flags into a [`pktfs_netpath::Config`], opens images and waits for Ctrl-C.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pktfs_fs::media::PersistChoice;
use pktfs_fs::{FormatOptions, OpenOptions, VerifyMode, Volume};

/// Network flags shared by `serve` and `mount` (flattened into both).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct NetArgs {
    /// Serve HTTP/1.1 on ADDR, HOST:PORT (e.g. 127.0.0.1:8080,
    /// localhost:8080): PUT/POST store a file, GET/HEAD (with Range) send it
    /// by its chain, DELETE removes it. serve's default, when neither
    /// --listen nor --raw-listen is given: 127.0.0.1:8080; mount serves
    /// nothing unless asked.
    #[arg(long, value_name = "ADDR", value_parser = crate::cli::resolve_addr)]
    pub listen: Option<SocketAddr>,
    /// Raw stream mode on ADDR (HOST:PORT): every connection's bytes become
    /// one file in --raw-dir, appended as they arrive (`nc HOST PORT < file`).
    #[arg(long, value_name = "ADDR", value_parser = crate::cli::resolve_addr)]
    pub raw_listen: Option<SocketAddr>,
    /// Serve the S3 API on ADDR (HOST:PORT; path-style, http): buckets are
    /// the image's top-level directories, keys their paths (aws-cli,
    /// rclone, boto3 and the SDKs work with --endpoint-url http://ADDR).
    /// Every request is signed (SigV4) with a key made by `pktfs keys
    /// add`, which also names the buckets it may read or write. Runs on
    /// the event loops (not with --io threads).
    #[arg(long = "s3", value_name = "ADDR", value_parser = crate::cli::resolve_addr)]
    pub s3_listen: Option<SocketAddr>,
    /// The region the S3 endpoint names (GetBucketLocation, HeadBucket);
    /// requests are checked with the region they were signed for.
    #[arg(long, value_name = "REGION", default_value = "us-east-1")]
    pub s3_region: String,
    /// Directory inside the image that raw connections land in (created if
    /// missing).
    #[arg(long, value_name = "DIR", default_value = "/raw")]
    pub raw_dir: String,
    /// Require a token, the content of FILE: every HTTP request, reads
    /// included (GET, HEAD, listings, OPTIONS, /metrics), must send
    /// `Authorization: Bearer TOKEN` (else 401), and every raw connection
    /// must start with the line `PKTFS-TOKEN TOKEN` (else it is closed,
    /// nothing stored). Without a token the servers listen only on
    /// loopback addresses (see --insecure-no-auth).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// With --token-file: GET and HEAD of files and listings need no token
    /// (changes still do).
    #[arg(long)]
    pub public_read: bool,
    /// With --token-file: GET and HEAD of the metrics path need no token.
    #[arg(long)]
    pub public_metrics: bool,
    /// Listen on a non-loopback address (e.g. 0.0.0.0) without
    /// --token-file: anyone who can reach the port reads, replaces and
    /// deletes every file. Without this flag that is refused at start.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Refuse every change over the network (HTTP answers 405; no raw mode).
    #[arg(long)]
    pub read_only: bool,
    /// Connections served at once; more are answered 503 [default: as many
    /// as file descriptors allow on the io_uring loops (the limit is
    /// printed); 256 with a thread per connection].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Raw connections served at once, counted on their own (the total is
    /// still capped by --max-connections); more are closed at once.
    #[arg(long, value_name = "N", default_value_t = pktfs_netpath::Config::RAW_MAX_CONNECTIONS_DEFAULT)]
    pub raw_max_connections: usize,
    /// Seconds an idle keep-alive connection is kept.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub idle_timeout: u64,
    /// Seconds to wait for a client to send the next bytes or take data.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub io_timeout: u64,
    /// Path where the HTTP server answers GET/HEAD with Prometheus metrics
    /// [default: /metrics]. A file of that name is not reachable over HTTP
    /// (it still is through the mount and the CLI).
    #[arg(long, value_name = "PATH", conflicts_with = "no_metrics")]
    pub metrics_path: Option<String>,
    /// Serve no metrics endpoint.
    #[arg(long)]
    pub no_metrics: bool,
    /// Seconds a raw stream may stay silent before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub raw_idle_timeout: u64,
    /// How connections, HTTP and raw, are served: `uring` (io_uring event
    /// loops: bytes land in free packet buffers the kernel picks, a
    /// connection costs an fd and no thread), `epoll` (the same loops on
    /// epoll, for kernels or containers without io_uring), `threads` (a
    /// thread per connection), or `auto` (io_uring when this kernel allows
    /// it, else epoll; the choice is printed). Default: $PKTFS_IO, else
    /// auto.
    #[arg(long, value_name = "MODE")]
    pub io: Option<pktfs_netpath::IoMode>,
    /// Event loops (default: one per two cores, at least one).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub loops: usize,
    /// Microseconds an io_uring loop that just did work polls for the next
    /// request before it sleeps: a request that arrives meanwhile is not
    /// delayed by waking an idle core (most of the latency of a lightly
    /// loaded server in a VM), for up to this much CPU time per quiet
    /// spell. After three polls in a row that found nothing (requests
    /// further apart than this) a loop stops polling for a while, so a
    /// paced client does not pay the window on every request. 0: sleep at
    /// once. An idle loop always sleeps. [default: 50]
    #[arg(long, value_name = "US", value_parser = crate::cli::busy_poll_value)]
    pub busy_poll_us: Option<u64>,
    /// HTTP requests act as USER (a name, or a uid; with :GROUP, a group
    /// name or gid, for the primary group): each is checked against file
    /// modes and POSIX ACLs as that user would be on the mount (403 when
    /// refused), and what it creates is that user's. The groups are the
    /// user's in the group database. [default: the server's own user,
    /// group and supplementary groups]
    #[arg(long, value_name = "USER[:GROUP]")]
    pub as_user: Option<String>,
}

/// `--io`, else $PKTFS_IO, else auto.
pub fn io_mode(flag: Option<pktfs_netpath::IoMode>) -> Result<pktfs_netpath::IoMode, String> {
    if let Some(m) = flag {
        return Ok(m);
    }
    match std::env::var("PKTFS_IO") {
        Ok(v) if !v.is_empty() => v.parse().map_err(|e| format!("PKTFS_IO: {e}")),
        _ => Ok(pktfs_netpath::IoMode::Auto),
    }
}

impl NetArgs {
    /// The flags again, for a daemon's command line (`pktfs mount`'s
    /// detached daemon). The token file's path is made absolute: the
    /// daemon reads it after it has left the caller's directory.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        if let Some(a) = self.listen {
            v.extend(["--listen".into(), a.to_string().into()]);
        }
        if let Some(a) = self.raw_listen {
            v.extend(["--raw-listen".into(), a.to_string().into()]);
        }
        if let Some(a) = self.s3_listen {
            v.extend(["--s3".into(), a.to_string().into()]);
        }
        v.extend(["--s3-region".into(), self.s3_region.clone().into()]);
        v.extend(["--raw-dir".into(), self.raw_dir.clone().into()]);
        if let Some(t) = &self.token_file {
            let t = std::path::absolute(t).unwrap_or_else(|_| t.clone());
            v.extend(["--token-file".into(), t.into_os_string()]);
        }
        for (on, flag) in [
            (self.public_read, "--public-read"),
            (self.public_metrics, "--public-metrics"),
            (self.insecure_no_auth, "--insecure-no-auth"),
        ] {
            if on {
                v.push(flag.into());
            }
        }
        if self.read_only {
            v.push("--read-only".into());
        }
        if let Some(m) = self.max_connections {
            v.extend(["--max-connections".into(), m.to_string().into()]);
        }
        v.extend([
            "--raw-max-connections".into(),
            self.raw_max_connections.to_string().into(),
        ]);
        v.extend([
            "--idle-timeout".into(),
            self.idle_timeout.to_string().into(),
        ]);
        v.extend(["--io-timeout".into(), self.io_timeout.to_string().into()]);
        if let Some(p) = &self.metrics_path {
            v.extend(["--metrics-path".into(), p.into()]);
        }
        if self.no_metrics {
            v.push("--no-metrics".into());
        }
        v.extend([
            "--raw-idle-timeout".into(),
            self.raw_idle_timeout.to_string().into(),
        ]);
        if let Some(m) = self.io {
            v.extend(["--io".into(), m.to_string().into()]);
        }
        v.extend(["--loops".into(), self.loops.to_string().into()]);
        if let Some(us) = self.busy_poll_us {
            v.extend(["--busy-poll-us".into(), us.to_string().into()]);
        }
        if let Some(u) = &self.as_user {
            v.extend(["--as-user".into(), u.into()]);
        }
        v
    }

    /// Anything to serve?
    pub fn wanted(&self) -> bool {
        self.listen.is_some() || self.raw_listen.is_some() || self.s3_listen.is_some()
    }

    /// The server configuration these flags describe.
    pub fn config(&self) -> Result<pktfs_netpath::Config, String> {
        let token = self.token_file.as_deref().map(read_token).transpose()?;
        if self.max_connections == Some(0) {
            return Err("--max-connections must be at least 1".into());
        }
        if self.raw_max_connections == 0 {
            return Err("--raw-max-connections must be at least 1".into());
        }
        if token.is_none() && (self.public_read || self.public_metrics) {
            return Err("--public-read and --public-metrics open reads that --token-file guards; without a token everything is open already".into());
        }
        let io = Duration::from_secs(self.io_timeout.max(1));
        let metrics_path = if self.no_metrics {
            None
        } else {
            let p = self.metrics_path.as_deref().unwrap_or("/metrics");
            if !p.starts_with('/') || p.len() < 2 || p.contains(['?', '#', ' ']) {
                return Err(format!(
                    "--metrics-path {p:?}: must be an absolute path like /metrics"
                ));
            }
            Some(p.to_string())
        };
        let as_user = match &self.as_user {
            Some(u) => resolve_user(u).map_err(|e| format!("--as-user {u}: {e}"))?,
            None => pktfs_netpath::Config::process_identity(),
        };
        Ok(pktfs_netpath::Config {
            as_user,
            metrics_path,
            http_listen: self.listen,
            raw_listen: self.raw_listen,
            s3_listen: self.s3_listen,
            s3_region: match self.s3_region.as_str() {
                "" => "us-east-1".into(),
                r => r.into(),
            },
            raw_dir: self.raw_dir.clone(),
            token,
            public_read: self.public_read,
            public_metrics: self.public_metrics,
            insecure_no_auth: self.insecure_no_auth,
            raw_max_connections: self.raw_max_connections,
            read_only: self.read_only,
            max_connections: self.max_connections,
            idle_timeout: Duration::from_secs(self.idle_timeout.max(1)),
            header_timeout: io.min(Duration::from_secs(10)),
            io_timeout: io,
            raw_idle_timeout: Duration::from_secs(self.raw_idle_timeout.max(1)),
            io: io_mode(self.io)?,
            loops: self.loops,
            busy_poll: self.busy_poll_us.map_or(
                pktfs_netpath::Config::BUSY_POLL_DEFAULT,
                Duration::from_micros,
            ),
            ..pktfs_netpath::Config::default()
        })
    }
}

/// `--as-user USER[:GROUP]`: a user name or uid, and optionally a group
/// name or gid for the primary group (else the user's own, from the user
/// database; a uid the database does not know needs one). Supplementary
/// groups: the user's in the group database (getgrouplist), none for an
/// unknown uid.
pub fn resolve_user(spec: &str) -> Result<pktfs_fs::Cred, String> {
    use nix::unistd::{Gid, Group, Uid, User};
    let (u, g) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    if u.is_empty() || g.is_some_and(str::is_empty) {
        return Err("expected USER, UID, USER:GROUP or UID:GID".into());
    }
    let entry = match u.parse::<u32>() {
        Ok(n) => User::from_uid(Uid::from_raw(n)).map_err(|e| format!("user {n}: {e}"))?,
        Err(_) => Some(
            User::from_name(u)
                .map_err(|e| format!("user {u}: {e}"))?
                .ok_or_else(|| format!("no user named {u} (see /etc/passwd)"))?,
        ),
    };
    let gid = match g {
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => Group::from_name(g)
                .map_err(|e| format!("group {g}: {e}"))?
                .ok_or_else(|| format!("no group named {g} (see /etc/group)"))?
                .gid
                .as_raw(),
        },
        None => match &entry {
            Some(e) => e.gid.as_raw(),
            None => {
                return Err(format!(
                    "uid {u} is not in the user database: give its group too (UID:GID)"
                ))
            }
        },
    };
    let (uid, groups) = match &entry {
        Some(e) => {
            let name = std::ffi::CString::new(e.name.as_bytes())
                .map_err(|_| format!("user {}: a name with a NUL byte", e.name))?;
            let groups = nix::unistd::getgrouplist(&name, Gid::from_raw(gid))
                .map_err(|err| format!("the groups of {}: {err}", e.name))?;
            (
                e.uid.as_raw(),
                groups.into_iter().map(|g| g.as_raw()).collect(),
            )
        }
        None => (u.parse::<u32>().expect("numeric"), Vec::new()),
    };
    Ok(pktfs_fs::Cred::new(uid, gid, groups))
}

/// The token in a token file (`--token-file`).
fn read_token(p: &Path) -> Result<pktfs_netpath::Token, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    pktfs_netpath::Token::from_file_contents(&s).map_err(|e| format!("{}: {e}", p.display()))
}

/// The running servers (stop them with `shutdown()`, or by dropping).
pub type ServicesHandle = pktfs_netpath::Services;

/// Start the servers `args` asks for on `vol`. `on_change` is told about
/// every entry the servers create, replace or remove and about raw files
/// growing (the mount passes a closure that calls `inval_entry` /
/// `inval_inode`). Prints nothing.
pub fn start_services(
    vol: Arc<Volume>,
    args: &NetArgs,
    on_change: Option<pktfs_netpath::OnChange>,
    extra: Option<pktfs_netpath::Extra>,
) -> Result<ServicesHandle, String> {
    let mut cfg = args.config()?;
    cfg.extra = extra;
    // Before any port is tried: the listen-address rule.
    cfg.check_exposure().map_err(|e| e.to_string())?;
    if let Some(a) = cfg.s3_listen {
        crate::cli::check_listen(a)?;
    }
    for a in [cfg.http_listen, cfg.raw_listen].into_iter().flatten() {
        crate::cli::check_listen(a)?;
        if !a.ip().to_canonical().is_loopback() && cfg.token.is_none() {
            eprintln!("pktfs: warning: {a} is reachable from other hosts and needs no token (--insecure-no-auth)");
        }
    }
    pktfs_netpath::Services::start(vol, cfg, on_change)
        .map_err(|e| format!("cannot start the servers: {e}"))
}

/// What is being served, for a person.
pub fn describe(s: &ServicesHandle, args: &NetArgs) -> String {
    let mut out = String::new();
    if let Some(a) = s.http_addr() {
        out.push_str(&format!(
            "  HTTP  http://{a}/{}\n",
            if args.read_only { "  (read-only)" } else { "" }
        ));
        if !args.no_metrics {
            let p = args.metrics_path.as_deref().unwrap_or("/metrics");
            out.push_str(&format!("  metrics http://{a}{p}\n"));
        }
    }
    if let Some(a) = s.s3_addr() {
        out.push_str(&format!(
            "  S3    http://{a}  (SigV4 keys: pktfs keys add)\n"
        ));
    }
    if let Some(a) = s.raw_addr() {
        out.push_str(&format!(
            "  raw   {a} -> {}/<time>-<peer>\n",
            args.raw_dir.trim_end_matches('/')
        ));
    }
    let io = s.io_summary();
    if !io.is_empty() {
        out.push_str(&format!("  io    {io}\n"));
    }
    if let Some(l) = s.loop_stats() {
        out.push_str(&format!(
            "        up to {} connections on the loops (RLIMIT_NOFILE {})\n",
            l.max_connections, l.nofile
        ));
        let busy = l.busy_poll.as_micros();
        out.push_str(&if busy == 0 {
            "        no busy polling (--busy-poll-us 0)\n".to_string()
        } else {
            format!(
                "        busy polling {busy} us after each turn with work, paused while polls miss (--busy-poll-us)\n"
            )
        });
    }
    out
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The image file (made by mkfs.pktfs).
    pub image: PathBuf,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub durability: crate::cli::DurabilityArgs,
    #[command(flatten)]
    pub tier: crate::tier_cmd::TierArgs,
}

#[derive(clap::Args, Debug)]
pub struct SendArgs {
    /// The image file.
    pub image: PathBuf,
    /// Path of a file inside the image, e.g. /logs/a.bin.
    pub path: String,
    /// Where to send it: HOST:PORT.
    pub addr: String,
    /// Seconds to wait to connect or for the peer to take data.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// The peer is a pktfs raw listener with a token: send the line
    /// `PKTFS-TOKEN TOKEN` (TOKEN: the content of FILE) before the file.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Where the image's tiered bytes are (an image no process holds):
    /// they are fetched, checked, and sent.
    #[command(flatten)]
    pub tier: crate::tier_cmd::TierArgs,
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Image to use, created if missing (default: /dev/shm/pktfs-$USER.img,
    /// or ~/.local/share/pktfs/pktfs.img where there is no /dev/shm).
    #[arg(long, value_name = "FILE")]
    pub image: Option<PathBuf>,
    /// Where to mount it (default: ~/pktfs).
    #[arg(long, value_name = "DIR")]
    pub mountpoint: Option<PathBuf>,
    /// Size of a new image, e.g. 512M, 4G, 4GiB (default: 1G, at most half
    /// the free space where it goes).
    #[arg(long, value_name = "SIZE", value_parser = pktfs_support::size::parse_size)]
    pub size: Option<u64>,
    /// HTTP address, HOST:PORT.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080",
          value_parser = crate::cli::resolve_addr)]
    pub listen: SocketAddr,
    /// Also take raw streams on ADDR (HOST:PORT, e.g. 127.0.0.1:8081).
    #[arg(long, value_name = "ADDR", value_parser = crate::cli::resolve_addr)]
    pub raw_listen: Option<SocketAddr>,
    /// The S3 endpoint's address, HOST:PORT (path-style, http; SigV4 with
    /// the key in --s3-key-file).
    #[arg(long = "s3", value_name = "ADDR", default_value = "127.0.0.1:9000",
          value_parser = crate::cli::resolve_addr, conflicts_with = "no_s3")]
    pub s3_listen: SocketAddr,
    /// Serve no S3 (it also needs the event loops: none with --io threads).
    #[arg(long)]
    pub no_s3: bool,
    /// The AWS config file holding your S3 key (profile "pktfs") [default:
    /// $XDG_CONFIG_HOME/pktfs/aws-config or ~/.config/pktfs/aws-config,
    /// made 0600 with a new key when missing]. The key (every bucket, read
    /// and write) is added to the image when it is not there yet, so one
    /// key serves all your images.
    #[arg(long, value_name = "FILE")]
    pub s3_key_file: Option<PathBuf>,
    /// Serve without mounting.
    #[arg(long)]
    pub no_mount: bool,
    /// The token every request needs, the content of FILE [default:
    /// $XDG_CONFIG_HOME/pktfs/token or ~/.config/pktfs/token, made 0600
    /// with a random token when missing]: HTTP requests, reads included,
    /// send `Authorization: Bearer TOKEN`; raw connections start with the
    /// line `PKTFS-TOKEN TOKEN`. Other local users can reach a loopback
    /// port too, so `up` never serves without one unless told to.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure_no_auth")]
    pub token_file: Option<PathBuf>,
    /// Serve without a token: every local user (and, on a non-loopback
    /// address, anyone who can reach it) may read, replace and delete
    /// every file as you.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// How connections are served: auto, uring, epoll or threads (see
    /// `pktfs serve --help`). Default: $PKTFS_IO, else auto.
    #[arg(long, value_name = "MODE")]
    pub io: Option<pktfs_netpath::IoMode>,
    #[command(flatten)]
    pub durability: crate::cli::DurabilityArgs,
    #[command(flatten)]
    pub tier: crate::tier_cmd::TierArgs,
}

fn open_rw(
    image: &Path,
    persist: PersistChoice,
    verify: VerifyMode,
    read_only: bool,
) -> Result<Volume, String> {
    let opts = OpenOptions {
        persist,
        read_only,
        verify,
        ..Default::default()
    };
    let vol = crate::cli::open_volume(image, &opts, |note| eprintln!("pktfs: {note}"))
        .map_err(|e| crate::cli::open_error(image, &e))?;
    if let Some(note) = vol.open_report().completed_note(image) {
        eprintln!("pktfs: {note}");
    }
    warn_open_report(&vol, image);
    Ok(vol)
}

/// Say what opening found that the user must act on (the Volume logged
/// the details): damaged inodes, a writable open turned read-only.
pub fn warn_open_report(v: &Volume, image: &Path) {
    let r = v.open_report();
    if let Some(why) = &r.read_only_because {
        eprintln!(
            "pktfs: warning: {} opened read-only: {why}",
            image.display()
        );
    } else if !r.damaged_inodes.is_empty() {
        eprintln!(
            "pktfs: warning: {}: {} damaged inode(s) answer EIO; run fsck.pktfs on the image",
            image.display(),
            r.damaged_inodes.len()
        );
    }
}

/// Answer `pktfs chain`, `stat`, `scrub`, `recv` and `send` about `image`
/// from this process (see pktfs_netpath::control). A holder that cannot have the
/// image's control socket does not start: clients would reach whatever
/// process has the name instead (another user may have bound it first).
pub fn start_control(
    vol: &Arc<Volume>,
    image: &Path,
    extra: Option<pktfs_netpath::Extra>,
) -> Result<pktfs_netpath::control::Control, String> {
    // main reports the error, to the log too when the log is not stderr.
    pktfs_netpath::control::Control::start_with(vol.clone(), image, extra)
        .map_err(|e| e.to_string())
}

/// Close the volume cleanly if nothing else holds it any more.
fn close(vol: Arc<Volume>) -> Result<(), String> {
    match Arc::try_unwrap(vol) {
        Ok(v) => v.close().map_err(|e| format!("closing the image: {e}")),
        Err(v) => {
            drop(v); // the last holder's drop marks it clean
            Ok(())
        }
    }
}

pub fn serve(a: ServeArgs) -> Result<(), String> {
    let mut net = a.net.clone();
    if !net.wanted() {
        net.listen = Some(SocketAddr::from(([127, 0, 0, 1], 8080)));
    }
    let vol = Arc::new(open_rw(
        &a.image,
        a.durability.persist(),
        a.durability.verify(),
        net.read_only,
    )?);
    let tier = a.tier.start(&vol)?;
    let extra = tier.as_ref().map(crate::tier_cmd::extra);
    let control = start_control(&vol, &a.image, extra.clone())?;
    let sig = pktfs_support::signal::shutdown_signal()?;
    let svc = start_services(vol.clone(), &net, None, extra)?;
    pktfs_support::sayln!(
        "pktfs: serving {} ({} persistence)",
        a.image.display(),
        vol.persistence()
    );
    pktfs_support::sayln!("{}", describe(&svc, &net).trim_end());
    if let Some(t) = &tier {
        pktfs_support::sayln!("  tier  {}", t.target());
    }
    pktfs_support::sayln!("Ctrl-C stops.");
    let _ = sig.recv();
    eprintln!("pktfs: stopping");
    let st = svc.shutdown();
    eprintln!(
        "pktfs: {} connections, {} requests, {} files stored",
        st.connections, st.requests, st.files_stored
    );
    if let Some(t) = tier {
        t.stop();
    }
    drop(control);
    close(vol)
}

pub fn send(a: SendArgs) -> Result<(), String> {
    let timeout = Duration::from_secs(a.timeout.max(1));
    // What the send would refuse (no such file, a directory, damage found
    // when the file is held) is refused before connecting: the peer must
    // never see a connection end cleanly with a stream that is not the file.
    let check = serde_json::json!({"op": "send_check", "path": a.path});
    let served = match pktfs_netpath::control::request(&a.image, &check, &mut |_| {}) {
        Ok(_) => true,
        Err(pktfs_netpath::control::ControlError::NotServed(_)) => false,
        // A holder from before the check: it checks once connected (and
        // resets the connection on failure).
        Err(pktfs_netpath::control::ControlError::Refused(e)) if e.starts_with("unknown op") => {
            true
        }
        Err(e) => return Err(e.to_string()),
    };
    let local =
        |sock: Option<&std::net::TcpStream>| -> Result<pktfs_netpath::transmit::to_peer::SendReport, String> {
            let vol = Arc::new(crate::chain_cmd::open_ro(&a.image)?);
            let _tier = a.tier.start(&vol)?;
            let ino = pktfs_netpath::transmit::to_peer::check_source(&vol, &a.path)?;
            match sock {
                // Held, every record's CRC checked whatever the verify
                // mode, before connecting.
                None => pktfs_netpath::transmit::to_peer::send_file(&vol, ino, &a.addr, timeout),
                Some(s) => pktfs_netpath::transmit::to_peer::send_on(&vol, ino, s, timeout),
            }
        };
    // A raw listener with a token wants its preface before the stream.
    let preface = a
        .token_file
        .as_deref()
        .map(read_token)
        .transpose()?
        .map(|t| pktfs_netpath::raw::preface(&t));
    let connect = || -> Result<std::net::TcpStream, String> {
        let sock = pktfs_netpath::transmit::to_peer::connect(&a.addr, timeout)?;
        if let Some(p) = &preface {
            std::io::Write::write_all(&mut &sock, p)
                .map_err(|e| format!("sending the token preface to {}: {e}", a.addr))?;
        }
        Ok(sock)
    };
    let r = if served {
        // A mounted or served image is sent by the process that holds it:
        // the connected socket is passed to it (see pktfs_netpath::control).
        let sock = connect()?;
        let req = serde_json::json!({"op": "send", "path": a.path});
        match pktfs_netpath::control::request_passing(&a.image, &req, Some(&sock), &mut |_| {}) {
            Ok(v) => pktfs_netpath::transmit::to_peer::SendReport {
                bytes: v["bytes"].as_u64().unwrap_or(0),
                segments: v["segments"].as_u64().unwrap_or(0),
                syscalls: v["syscalls"].as_u64().unwrap_or(0),
                elapsed: Duration::from_secs_f64(v["elapsed_s"].as_f64().unwrap_or(0.0)),
            },
            // The holder went away since the check.
            Err(pktfs_netpath::control::ControlError::NotServed(_)) => local(Some(&sock))?,
            Err(e) => {
                pktfs_netpath::transmit::to_peer::reset(&sock);
                return Err(e.to_string());
            }
        }
    } else if preface.is_some() {
        // Connected first, for the preface to go before the file; a file
        // that then cannot be held resets the connection (nothing stored).
        local(Some(&connect()?))?
    } else {
        local(None)?
    };
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    eprintln!(
        "pktfs: sent {} bytes of {} to {} (every record's CRC32C checked first) as {} iovecs \
         (one per record, or part of one) in {} sendmsg calls, {:.3} s, {:.1} MB/s",
        r.bytes,
        a.path,
        a.addr,
        r.segments,
        r.syscalls,
        secs,
        r.bytes as f64 / secs / 1e6
    );
    Ok(())
}

fn user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty() && !u.contains('/'))
        .unwrap_or_else(|| "user".into())
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn default_image() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly()) {
        return shm.join(format!("pktfs-{}.img", user()));
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("pktfs").join("pktfs.img")
}

fn default_mountpoint() -> PathBuf {
    match home() {
        Some(h) => h.join("pktfs"),
        None => std::env::temp_dir().join(format!("pktfs-{}", user())),
    }
}

/// Create and format the image if there is none.
fn ensure_image(path: &Path, size: Option<u64>) -> Result<bool, String> {
    if path.exists() {
        return Ok(false);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let size = match size {
        Some(s) => s,
        None => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let free = crate::quickstart::free_bytes(dir).unwrap_or(u64::MAX);
            (1u64 << 30).min(free / 2) / (1 << 20) * (1 << 20)
        }
    };
    let params = pktfs_layout::GeometryParams::for_size(size);
    Volume::format(
        path,
        &FormatOptions {
            params,
            label: Some("pktfs".into()),
        },
        &mut |_, _| {},
    )
    // The same message mkfs.pktfs gives (when there is no room: how much
    // there is and the largest --size that fits), naming the path once.
    .map_err(|e| {
        if e.names_path() {
            e.to_string()
        } else {
            format!("creating {}: {e}", path.display())
        }
    })?;
    Ok(true)
}

pub fn up(a: UpArgs) -> Result<(), String> {
    let image = a.image.clone().unwrap_or_else(default_image);
    // A busy port is found before an image is made for nothing.
    let s3 = s3_wanted(&a)?;
    for addr in std::iter::once(a.listen).chain(a.raw_listen).chain(s3.ok()) {
        crate::cli::check_listen(addr)?;
    }
    let me = nix::unistd::geteuid().as_raw();
    if let Some(note) = crate::quickstart::check_image(&image, me)? {
        eprintln!("pktfs: warning: {}", note.0);
    }
    let created = ensure_image(&image, a.size)?;
    // Again after creating: a file planted between the first check and the
    // create is opened, not created, by the media layer, and is refused here.
    let r = crate::quickstart::check_image(&image, me)
        .and_then(|_| up_token(&a, me))
        .and_then(|token_file| run_up(&a, &image, created, token_file.as_deref(), s3));
    if r.is_err() && created {
        // Leave nothing behind that this command made and could not use.
        match std::fs::remove_file(&image) {
            Ok(()) => eprintln!(
                "pktfs: removed {}, which this command created",
                image.display()
            ),
            Err(e) => eprintln!("pktfs: could not remove {}: {e}", image.display()),
        }
    }
    r
}

/// The S3 address `up` serves on, or why it serves none.
fn s3_wanted(a: &UpArgs) -> Result<Result<SocketAddr, &'static str>, String> {
    Ok(if a.no_s3 {
        Err("not served (--no-s3)")
    } else if io_mode(a.io)? == pktfs_netpath::IoMode::Threads {
        Err("not served: it runs on the event loops, not with --io threads")
    } else {
        Ok(a.s3_listen)
    })
}

/// The token file `up` serves behind (made when missing), or None with
/// `--insecure-no-auth`; an absolute path, as the banner prints it.
fn up_token(a: &UpArgs, me: u32) -> Result<Option<PathBuf>, String> {
    if a.insecure_no_auth {
        return Ok(None);
    }
    let p = match &a.token_file {
        Some(p) => p.clone(),
        None => crate::quickstart::default_token_path().ok_or(
            "no home directory to keep the token in (set HOME or XDG_CONFIG_HOME, or pass \
             --token-file FILE)",
        )?,
    };
    crate::quickstart::ensure_token_file(&p, me)?;
    std::path::absolute(&p)
        .map(Some)
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// `up`'s S3 key, made or brought to `vol` (see [`crate::up_s3`]).
fn up_s3_key(a: &UpArgs, vol: &Volume) -> Result<crate::up_s3::UpKey, String> {
    let p = match &a.s3_key_file {
        Some(p) => p.clone(),
        None => crate::up_s3::default_path().ok_or(
            "no home directory to keep the S3 key in (set HOME or XDG_CONFIG_HOME, or pass \
             --s3-key-file FILE, or --no-s3)",
        )?,
    };
    let p = std::path::absolute(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    crate::up_s3::ensure(vol, &p, me, &user(), "us-east-1")
}

/// What `up`'s banner offers to try, each line working as pasted into a
/// shell: secrets are read from their files there, never printed.
fn up_try_lines(
    image: &Path,
    svc: &ServicesHandle,
    token_file: Option<&Path>,
    mount: Option<&Path>,
    s3_key: Option<&crate::up_s3::UpKey>,
) -> Vec<(String, &'static str)> {
    let http = svc.http_addr().expect("listening");
    let exe = std::env::args().next().unwrap_or_else(|| "pktfs".into());
    // Each line works as pasted into a shell, the token read from its file
    // there (never printed).
    let (auth, mut tries): (&str, Vec<(String, &'static str)>) = match token_file {
        Some(t) => (
            " -H \"Authorization: Bearer $TOKEN\"",
            vec![(
                format!("TOKEN=$(cat {})", t.display()),
                "every request sends it",
            )],
        ),
        None => ("", Vec::new()),
    };
    tries.extend([
        (
            format!("curl{auth} -T somefile http://{http}/somefile"),
            "store a file (201 once it is durable)",
        ),
        (format!("curl{auth} http://{http}/"), "list"),
        (
            format!("curl{auth} -o copy http://{http}/somefile"),
            "fetch it (Range works too)",
        ),
    ]);
    if let Some(mp) = mount {
        tries.push((
            format!("ls -l {}", mp.display()),
            "it is in the mount at once",
        ));
    }
    if let Some(r) = svc.raw_addr() {
        let cmd = match token_file {
            Some(_) => format!(
                "(echo \"PKTFS-TOKEN $TOKEN\"; cat somefile) | nc -N {} {}",
                r.ip(),
                r.port()
            ),
            None => format!("nc -N {} {} < somefile", r.ip(), r.port()),
        };
        tries.push((cmd, "raw stream -> /raw/<time>-<peer>"));
    }
    if let (Some(k), Some(addr)) = (s3_key, svc.s3_addr()) {
        tries.extend(crate::up_s3::try_lines(k, addr));
    }
    tries.push((
        format!("{exe} chain {} /somefile", image.display()),
        "the file as its packets",
    ));
    tries
}

fn run_up(
    a: &UpArgs,
    image: &Path,
    created: bool,
    token_file: Option<&Path>,
    s3: Result<SocketAddr, &'static str>,
) -> Result<(), String> {
    let vol = Arc::new(open_rw(
        image,
        a.durability.persist(),
        a.durability.verify(),
        false,
    )?);
    let s3_key = match s3 {
        Ok(_) => Some(up_s3_key(a, &vol)?),
        Err(_) => None,
    };
    let tier = a.tier.start(&vol)?;
    let extra = tier.as_ref().map(crate::tier_cmd::extra);
    let control = start_control(&vol, image, extra.clone())?;
    let sig = pktfs_support::signal::shutdown_signal()?;
    // The mount, when this build has it and it works here.
    let mp = a.mountpoint.clone().unwrap_or_else(default_mountpoint);
    let mut mount_note = String::new();
    let mount = if a.no_mount {
        mount_note.push_str("not mounted (--no-mount)");
        None
    } else {
        match crate::net_cmd::mount_for_up(vol.clone(), &mp) {
            Ok(m) => Some(m),
            Err(e) => {
                mount_note = format!("not mounted: {e}");
                None
            }
        }
    };
    let on_change = mount.as_ref().map(|m| m.on_change());
    let net = NetArgs {
        listen: Some(a.listen),
        raw_listen: a.raw_listen,
        raw_dir: "/raw".into(),
        max_connections: None,
        raw_max_connections: pktfs_netpath::Config::RAW_MAX_CONNECTIONS_DEFAULT,
        idle_timeout: 60,
        io_timeout: 30,
        raw_idle_timeout: 300,
        io: a.io,
        token_file: token_file.map(Path::to_path_buf),
        insecure_no_auth: a.insecure_no_auth,
        s3_listen: s3.ok(),
        s3_region: "us-east-1".into(),
        ..NetArgs::default()
    };
    let svc = start_services(vol.clone(), &net, on_change, extra)?;
    let g = vol.geometry();
    pktfs_support::sayln!(
        "pktfs is up: {} {} ({} MiB, {} persistence)",
        if created { "created" } else { "using" },
        image.display(),
        g.image_len_bytes >> 20,
        vol.persistence()
    );
    pktfs_support::sayln!("{}", describe(&svc, &net).trim_end());
    match &mount {
        Some(_) => pktfs_support::sayln!("  mount {}", mp.display()),
        None => pktfs_support::sayln!("  mount {mount_note}"),
    }
    match (&s3_key, s3) {
        (Some(k), _) => pktfs_support::sayln!(
            "  S3 key {} in {}{}",
            k.id,
            k.file.display(),
            match k.how {
                crate::up_s3::How::Made => " (made now)",
                crate::up_s3::How::Brought => " (added to this image)",
                crate::up_s3::How::Found => "",
            }
        ),
        (None, Err(why)) => pktfs_support::sayln!("  S3    {why}"),
        (None, Ok(_)) => {}
    }
    if let Some(t) = &tier {
        pktfs_support::sayln!("  tier  {}", t.target());
    }
    match token_file {
        Some(t) => pktfs_support::sayln!("  token {}", t.display()),
        None => {
            pktfs_support::sayln!("  token none (--insecure-no-auth: every local user may use it)")
        }
    }
    let tries = up_try_lines(
        image,
        &svc,
        token_file,
        mount.is_some().then_some(mp.as_path()),
        s3_key.as_ref(),
    );
    let w = tries.iter().map(|t| t.0.len()).max().unwrap_or(0);
    pktfs_support::sayln!("Try:");
    for (cmd, what) in &tries {
        pktfs_support::sayln!("  {cmd:<w$}   # {what}");
    }
    pktfs_support::sayln!(
        "Ctrl-C stops{}.",
        if mount.is_some() { " and unmounts" } else { "" }
    );
    let _ = sig.recv();
    eprintln!("pktfs: stopping");
    svc.shutdown();
    if let Some(m) = mount {
        m.stop();
    }
    if let Some(t) = tier {
        t.stop();
    }
    drop(control);
    close(vol)
}

/// A mount made by `up`.
#[derive(Debug)]
pub struct UpMount {
    handle: pktfs_fuse::MountHandle,
}

/// The change callback for servers running beside a FUSE mount: each
/// change the servers make is told to the kernel (`inval_entry` of the name
/// and `inval_inode` of its directory; `inval_inode` of a growing raw
/// file), so it shows in the mount at once.
pub fn invalidate_with(inv: pktfs_fuse::Invalidator) -> pktfs_netpath::OnChange {
    Arc::new(move |c: pktfs_netpath::Change<'_>| match c {
        pktfs_netpath::Change::Entry { parent, name, .. }
        | pktfs_netpath::Change::Removed { parent, name, .. } => {
            use std::os::unix::ffi::OsStrExt;
            let _ = inv.inval_entry(parent, std::ffi::OsStr::from_bytes(name));
            let _ = inv.inval_inode(parent);
        }
        pktfs_netpath::Change::Data { ino, .. } => {
            let _ = inv.inval_inode(ino);
        }
    })
}

impl UpMount {
    fn on_change(&self) -> pktfs_netpath::OnChange {
        invalidate_with(self.handle.invalidator())
    }

    fn stop(self) {
        if let Err(e) = self.handle.unmount() {
            eprintln!("pktfs: unmount: {e}");
        }
        if let Err(e) = self.handle.join() {
            eprintln!("pktfs: mount: {e}");
        }
    }
}

fn mount_for_up(vol: Arc<Volume>, mp: &Path) -> Result<UpMount, String> {
    std::fs::create_dir_all(mp).map_err(|e| format!("{}: {e}", mp.display()))?;
    let opts = pktfs_fuse::MountOptions::default();
    let handle = pktfs_fuse::mount(vol, mp, &opts).map_err(|e| e.to_string())?;
    Ok(UpMount { handle })
}

#[cfg(test)]
mod as_user_tests {
    use super::resolve_user;

    #[test]
    fn users_by_name_or_id_with_their_groups() {
        let root = resolve_user("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(resolve_user("0").unwrap(), root);
        // A group given overrides the primary one.
        let r = resolve_user("0:5").unwrap();
        assert_eq!((r.uid, r.gid), (0, 5));
        assert!(r.in_group(5));
        // A uid nobody has needs its group.
        let e = resolve_user("3999999").unwrap_err();
        assert!(e.contains("UID:GID"), "{e}");
        let n = resolve_user("3999999:3999998").unwrap();
        assert_eq!((n.uid, n.gid, n.groups().len()), (3999999, 3999998, 0));
        for bad in [
            "",
            ":",
            "root:",
            "no-such-user-here",
            "root:no-such-group-here",
        ] {
            assert!(resolve_user(bad).is_err(), "{bad:?} accepted");
        }
    }
}
