//! `pktfs mount IMAGE MOUNTPOINT`: serve an image through FUSE.
//!
//! Without `-f` the command starts itself again as a background daemon (a
//! plain re-exec with a hidden flag: no fork in a threaded process), waits
//! until the daemon reports that the mount is live or why it failed, and
//! returns. The daemon serves until the mount goes away (`umount`,
//! `fusermount3 -u`) or it gets SIGINT/SIGTERM/SIGHUP (it then unmounts,
//! lazily if the mount is busy), and closes the Volume cleanly.
//!
//! The Volume is opened once, as an `Arc<Volume>`: other services of the
//! same process (netpath) share it and tell the kernel about their changes
//! through [`pktfs_fuse::MountHandle::notifier`].

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal};
use pktfs_fs::{OpenOptions, Volume};
use pktfs_fuse::{MountHandle, MountOptions};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct MountArgs {
    /// The image file (made by mkfs.pktfs).
    pub image: PathBuf,
    /// An existing directory to mount it on.
    pub mountpoint: PathBuf,
    /// Stay in the foreground (logs to stderr; Ctrl-C unmounts).
    #[arg(short, long)]
    pub foreground: bool,
    /// Mount options, comma-separated, may repeat: ro, rw, allow_other,
    /// allow_root, default_permissions (always on), fsname=NAME, subtype=NAME,
    /// dev/nodev, suid/nosuid, exec/noexec, atime/noatime, sync, dirsync,
    /// auto_unmount, threads=N, max_write=SIZE (default 1M),
    /// max_readahead=SIZE, attr_timeout=SECS, entry_timeout=SECS,
    /// no_kernel_cache, persist=auto|clwb|clflushopt|clflush|msync|eadr,
    /// verify=once|always|off (payload checksums on reads; default once).
    /// See docs/MOUNT.md.
    #[arg(short = 'o', value_name = "OPTIONS")]
    pub options: Vec<String>,
    #[command(flatten)]
    pub durability: crate::cli::DurabilityArgs,
    /// Internal: run as the background daemon of a `pktfs mount`.
    #[arg(long, hide = true)]
    pub daemon_child: bool,
    /// Set by the mount.pktfs helper: the daemon is re-executed without
    /// the `mount` subcommand.
    #[arg(skip)]
    pub helper: bool,
    /// The logging asked for (`-o log=`, `-o log_file=`, `--log-level`,
    /// `--log-file`), handed on to the daemon as mount options.
    #[arg(skip)]
    pub log: crate::logging::LogSpec,
    /// Serve the mounted image over the network too (`--listen`, ...):
    /// files received appear in the mount at once.
    #[command(flatten)]
    pub net: crate::net_cmd::NetArgs,
    /// Tier cold data to an S3-compatible store (`--tier`, ...).
    #[command(flatten)]
    pub tier: crate::tier_cmd::TierArgs,
}

/// Take the logging options out of the `-o` lists (they are the
/// command's, not the file system's): `log=LEVEL` and `log_file=PATH` win
/// over what `spec` holds (--log-level, --log-file) as later options do.
/// The result is kept in `a.log` for the daemon's command line.
pub fn take_log_options(
    a: &mut MountArgs,
    spec: &mut crate::logging::LogSpec,
) -> Result<(), String> {
    let mut kept = Vec::new();
    for list in &a.options {
        let mut rest = Vec::new();
        for o in list.split(',') {
            match o.trim().split_once('=') {
                Some(("log", v)) => {
                    spec.level = Some(
                        crate::logging::parse_level(v)
                            .map_err(|e| format!("mount option log={v}: {e}"))?,
                    )
                }
                Some(("log_file", v)) if !v.is_empty() => spec.file = Some(PathBuf::from(v)),
                _ => rest.push(o),
            }
        }
        kept.push(rest.join(","));
    }
    a.options = kept;
    a.log = spec.clone();
    Ok(())
}

/// Is `o` (one option) a logging option [`take_log_options`] takes?
/// (For mount.pktfs's `-s`, which keeps only options pktfs knows.)
pub fn is_log_option(o: &str) -> bool {
    matches!(o.trim().split_once('='), Some(("log" | "log_file", _)))
}

const READY: &str = "ready";
/// A line the daemon sends before "ready" for the user to see.
const NOTE: &str = "note: ";

pub fn run(mut a: MountArgs) -> Result<(), String> {
    // --persist/--verify are -o persist=/-o verify= given last, so they win
    // (and reach the daemon as options).
    let durability = std::mem::take(&mut a.durability);
    a.options.extend(durability.as_mount_options());
    let list = a.options.join(",");
    if list.split(',').any(|o| o.trim() == "remount") {
        return remount(&a.mountpoint, &list);
    }
    let opts = crate::mount_options::parse(&list)?;
    if a.foreground || a.daemon_child {
        let r = serve(&a, &opts);
        if let (true, Err(e)) = (a.daemon_child, &r) {
            // The parent is waiting for one line on our stdout.
            tell_parent(&format!("error: {e}"));
        }
        return r;
    }
    spawn_daemon(&a)
}

/// Check what can be checked before starting the daemon, so the common
/// mistakes get a message from the command itself.
fn check_paths(a: &MountArgs) -> Result<(PathBuf, PathBuf), String> {
    let image = a
        .image
        .canonicalize()
        .map_err(|e| format!("{}: {e}", a.image.display()))?;
    let mp = a
        .mountpoint
        .canonicalize()
        .map_err(|e| format!("{}: {e}", a.mountpoint.display()))?;
    if !mp.is_dir() {
        return Err(format!("{}: not a directory", mp.display()));
    }
    Ok((image, mp))
}

/// The flags of `a` the daemon needs again on its command line, after the
/// image and the mount point: the servers' and the tier's (each flag
/// `pktfs mount` takes must be here or reach the daemon another way: the
/// test `every_flag_reaches_the_daemon` parses the result back).
fn daemon_flags(a: &MountArgs) -> Vec<std::ffi::OsString> {
    let mut v = Vec::new();
    // Only when serving: the mount.pktfs helper's daemon (whose parser
    // takes mount(8)'s arguments) never serves, and it never tiers.
    if a.net.wanted() {
        v.extend(a.net.to_args());
    }
    v.extend(a.tier.to_args());
    v.push("--daemon-child".into());
    v
}

fn spawn_daemon(a: &MountArgs) -> Result<(), String> {
    let (image, mp) = check_paths(a)?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my own executable: {e}"))?;
    let mut cmd = Command::new(exe);
    if !a.helper {
        cmd.arg("mount");
    }
    cmd.arg(&image).arg(&mp);
    for o in &a.options {
        cmd.arg("-o").arg(o);
    }
    if let Some(l) = &a.log.level {
        cmd.arg("-o").arg(format!("log={l}"));
    }
    if let Some(f) = &a.log.file {
        // Absolute: the daemon's working directory is not ours for long.
        let f = std::path::absolute(f).unwrap_or_else(|_| f.clone());
        cmd.arg("-o").arg(format!("log_file={}", f.display()));
    }
    cmd.args(daemon_flags(a));
    // The daemon keeps none of our descriptors: a caller waiting for our
    // output must not wait for the daemon too.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start the mount daemon: {e}"))?;
    let out = child.stdout.take().ok_or("no pipe to the mount daemon")?;
    let mut out = BufReader::new(out);
    let mut line = String::new();
    // Notes (e.g. "the image was sparse") come before the verdict.
    loop {
        line.clear();
        let _ = out.read_line(&mut line);
        match line.trim_end().strip_prefix(NOTE) {
            Some(note) => eprintln!("pktfs: {note}"),
            None => break,
        }
    }
    let line = line.trim_end();
    if let Some(mode) = line.strip_prefix(READY) {
        // The daemon says which persist mode `auto` (or -o persist=) chose.
        pktfs_support::outln!(
            "pktfs: {} mounted on {} ({} persistence)",
            image.display(),
            mp.display(),
            mode.trim()
        );
        return Ok(());
    }
    if let Some(msg) = line.strip_prefix("error: ") {
        let _ = child.wait();
        return Err(msg.to_string());
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    Err(format!(
        "the mount daemon exited ({status}) before the mount was live"
    ))
}

/// `mount -o remount,ro DIR` (mount(8) runs the helper for it): change the
/// kernel's flags of the live mount; the daemon keeps serving.
fn remount(mp: &Path, list: &str) -> Result<(), String> {
    use nix::mount::MsFlags;
    let mut flags = MsFlags::MS_REMOUNT;
    // Mounts are made nosuid,nodev unless suid/dev is asked for.
    // atime is the daemon's policy (FUSE leaves it to the daemon), chosen
    // at mount time; a remount changes only the kernel's flags.
    let (mut suid, mut dev) = (false, false);
    for o in list.split(',').map(str::trim) {
        match o {
            "ro" => flags |= MsFlags::MS_RDONLY,
            "rw" => flags &= !MsFlags::MS_RDONLY,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "noatime" => flags |= MsFlags::MS_NOATIME,
            "sync" => flags |= MsFlags::MS_SYNCHRONOUS,
            "dirsync" => flags |= MsFlags::MS_DIRSYNC,
            "suid" => suid = true,
            "dev" => dev = true,
            _ => {}
        }
    }
    if !suid {
        flags |= MsFlags::MS_NOSUID;
    }
    if !dev {
        flags |= MsFlags::MS_NODEV;
    }
    nix::mount::mount(None::<&str>, mp, None::<&str>, flags, None::<&str>)
        .map_err(|e| format!("remount {}: {e}", mp.display()))
}

fn tell_parent(msg: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{msg}");
    let _ = o.flush();
}

fn serve(a: &MountArgs, opts: &MountOptions) -> Result<(), String> {
    let (image, mp) = check_paths(a)?;
    if a.daemon_child {
        // Said first: if the mount fails, the reason is in the log too.
        tell_parent(&format!(
            "{NOTE}the mount daemon (pid {}) logs to {}",
            std::process::id(),
            crate::logging::destination()
        ));
        tracing::info!(
            "mount daemon {} for {} on {}",
            std::process::id(),
            image.display(),
            mp.display()
        );
        // Our own session: no terminal's SIGHUP or Ctrl-C reaches us, and
        // no directory is kept busy.
        let _ = nix::unistd::setsid();
        let _ = std::env::set_current_dir("/");
    }
    // Signals are taken by one thread with sigwait; block them before any
    // thread starts so every thread inherits the mask.
    let mut sigs = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        sigs.add(s);
    }
    sigs.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;

    let open_opts = OpenOptions {
        persist: opts.persist,
        read_only: opts.read_only,
        no_lock: false,
        verify: opts.verify,
        no_populate: false,
    };
    let vol = crate::cli::open_volume(&image, &open_opts, |note| {
        tracing::info!("{note}");
        if a.daemon_child {
            tell_parent(&format!("{NOTE}{note}"));
        } else {
            eprintln!("pktfs: {note}");
        }
    })
    .map_err(|e| crate::cli::open_error(&image, &e))?;
    crate::net_cmd::warn_open_report(&vol, &image);
    if let Some(note) = vol.open_report().completed_note(&image) {
        if a.daemon_child {
            tell_parent(&format!("{NOTE}{note}"));
        } else {
            eprintln!("pktfs: {note}");
        }
    }
    if a.foreground {
        eprintln!(
            "pktfs: {} mounted on {} ({} persistence); Ctrl-C unmounts",
            image.display(),
            mp.display(),
            vol.persistence()
        );
    }
    let vol = Arc::new(vol);
    let tier = a.tier.start(&vol)?;
    let extra = tier.as_ref().map(crate::tier_cmd::extra);
    let control = crate::net_cmd::start_control(&vol, &image, extra.clone())?;
    let handle =
        pktfs_fuse::mount(vol.clone(), &mp, opts).map_err(|e| format!("cannot mount: {e}"))?;
    let services = start_services(&vol, &handle, &a.net, extra)?;
    if let Some(t) = &tier {
        let l = format!("tier  {}", t.target());
        if a.daemon_child {
            tell_parent(&format!("{NOTE}{l}"));
        } else {
            eprintln!("pktfs: {l}");
        }
    }
    // Where the servers listen, for the person who mounted: the daemon
    // hands the lines to its parent, which prints them.
    if let Some(s) = &services {
        for l in crate::net_cmd::describe(s, &a.net).lines() {
            if a.daemon_child {
                tell_parent(&format!("{NOTE}{}", l.trim_start()));
            } else {
                eprintln!("pktfs: {}", l.trim_start());
            }
        }
    }
    tracing::info!(
        "{} mounted on {} ({} persistence)",
        image.display(),
        mp.display(),
        vol.persistence()
    );
    if a.daemon_child {
        tell_parent(&format!("{READY} {}", vol.persistence()));
        // Nothing more goes to the parent's pipe.
        if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
            let _ = nix::unistd::dup2_stdout(&null);
        }
    }

    let unmounter = handle.unmounter();
    std::thread::Builder::new()
        .name("pktfs-signals".into())
        .spawn(move || {
            while let Ok(sig) = sigs.wait() {
                tracing::info!("{sig}: unmounting");
                if let Err(e) = unmounter.unmount() {
                    tracing::warn!("unmount: {e}");
                }
            }
        })
        .map_err(|e| e.to_string())?;

    let served = handle.join();
    if let Some(s) = services {
        s.shutdown();
    }
    // A last snapshot of what was tiered, before the image closes.
    if let Some(t) = tier {
        t.stop();
    }
    drop(control);
    close(vol, &image)?;
    served.map_err(|e| format!("FUSE session: {e}"))?;
    tracing::info!(
        "{} unmounted from {}; image closed",
        image.display(),
        mp.display()
    );
    Ok(())
}

/// The network servers sharing the mounted Volume (`--listen`,
/// `--raw-listen`, ...): every change they make is told to the kernel, so it
/// shows in the mount at once.
fn start_services(
    vol: &Arc<Volume>,
    handle: &MountHandle,
    net: &crate::net_cmd::NetArgs,
    extra: Option<pktfs_netpath::Extra>,
) -> Result<Option<crate::net_cmd::ServicesHandle>, String> {
    if !net.wanted() {
        return Ok(None);
    }
    let on_change = crate::net_cmd::invalidate_with(handle.invalidator());
    let s = crate::net_cmd::start_services(vol.clone(), net, Some(on_change), extra)?;
    Ok(Some(s))
}

/// Close the Volume once every other holder has let go: this writes the
/// clean flag so the next open is fast.
fn close(vol: Arc<Volume>, image: &Path) -> Result<(), String> {
    let mut vol = vol;
    for _ in 0..100 {
        match Arc::try_unwrap(vol) {
            Ok(v) => {
                return v
                    .close()
                    .map_err(|e| format!("{}: closing: {e}", image.display()))
            }
            Err(v) => vol = v,
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Someone still holds it; its last drop marks the image clean.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    /// `pktfs mount`'s own flags (the global ones, --log-level and
    /// --log-file, become `-o` options before the daemon starts).
    fn command() -> clap::Command {
        MountArgs::augment_args(clap::Command::new("mount"))
    }

    /// `pktfs mount` with every flag of its own away from its default
    /// (`--no-metrics` conflicts with `--metrics-path`: the second line).
    #[rustfmt::skip]
    const ALL: &[&str] = &[
        "img", "mp", "-o", "noatime",
        "--listen", "127.0.0.1:9000", "--raw-listen", "127.0.0.1:9001", "--raw-dir", "/in",
        "--s3", "127.0.0.1:9002", "--s3-region", "eu-test-1",
        "--token-file", "tok", "--read-only", "--max-connections", "77",
        "--public-read", "--public-metrics", "--insecure-no-auth", "--raw-max-connections", "55",
        "--idle-timeout", "61", "--io-timeout", "31", "--metrics-path", "/m",
        "--raw-idle-timeout", "301", "--io", "epoll", "--loops", "3", "--busy-poll-us", "7",
        "--tier", "s3://bkt/p", "--tier-endpoint", "http://127.0.0.1:1", "--tier-region", "r",
        "--tier-age", "2h", "--tier-high", "70%", "--tier-low", "50%", "--tier-segment", "2M",
        "--tier-concurrency", "3", "--tier-bandwidth", "1M", "--tier-busy-bandwidth", "off",
        "--tier-interval", "2s", "--tier-snapshot-interval", "90s",
        "--tier-promote-after", "off", "--tier-readahead", "4",
        "--as-user", "nobody",
    ];
    const NO_METRICS: &[&str] = &["img", "mp", "--listen", "127.0.0.1:9000", "--no-metrics"];

    /// Flags that reach the daemon another way: as `-o` options
    /// (`--persist`, `--verify`, `--log-level`, `--log-file`), or that only
    /// the parent uses.
    const NOT_FORWARDED: &[&str] = &[
        "help",
        "foreground",
        "daemon-child",
        "persist",
        "verify",
        "log-level",
        "log-file",
    ];

    fn parse(args: &[impl AsRef<std::ffi::OsStr>]) -> MountArgs {
        let argv = std::iter::once("mount".as_ref()).chain(args.iter().map(|a| a.as_ref()));
        let m = command().try_get_matches_from(argv).unwrap();
        MountArgs::from_arg_matches(&m).unwrap()
    }

    /// What the daemon parses: the image and mount point, then the flags.
    fn daemon_view(a: &MountArgs) -> MountArgs {
        let mut argv: Vec<std::ffi::OsString> = vec!["img".into(), "mp".into()];
        argv.extend(daemon_flags(a));
        parse(&argv)
    }

    #[test]
    fn every_flag_reaches_the_daemon() {
        for line in [ALL, NO_METRICS] {
            let mut a = parse(line);
            let b = daemon_view(&a);
            assert!(b.daemon_child);
            // The one change on the way: the token file's path is absolute.
            if let Some(t) = &mut a.net.token_file {
                *t = std::path::absolute(&*t).unwrap();
                assert!(t.is_absolute());
            }
            assert_eq!(format!("{:?}", a.net), format!("{:?}", b.net), "{line:?}");
            assert_eq!(format!("{:?}", a.tier), format!("{:?}", b.tier), "{line:?}");
        }
        // The tier without servers (a detached mount once dropped it).
        let a = parse(&["img", "mp", "--tier", "s3://bkt/p", "--tier-age", "1s"]);
        let b = daemon_view(&a);
        assert_eq!(format!("{:?}", a.tier), format!("{:?}", b.tier));
        assert!(b.tier.tier.is_some(), "--tier reached the daemon");
        // No flag of `pktfs mount` is left out of the lines above.
        for arg in command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if NOT_FORWARDED.contains(&long) {
                continue;
            }
            let flag = format!("--{long}");
            assert!(
                ALL.contains(&flag.as_str()) || NO_METRICS.contains(&flag.as_str()),
                "{flag}: add it to this test's command lines (and to the daemon's flags)"
            );
        }
    }
}
