//! `pktfs ls|cat|get|put|rm IMAGE PATH`: use an image that nothing holds,
//! without mounting it, as debugfs and mtools do. Each opens the image
//! itself (read-only for ls, cat and get) and closes it cleanly. An image
//! that a mount or a server holds is refused, naming the way to reach it
//! instead (the mount point, or HTTP): a second writer would corrupt it,
//! and the holder's view would go stale.

use std::io::Read;
use std::path::{Path, PathBuf};

use pktfs_fs::{FileType, OpenOptions, Volume};
use pktfs_netpath::control::{self, ControlError};

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// The image file (not mounted or served).
    pub image: PathBuf,
    /// Directory (or file) inside the image.
    #[arg(default_value = "/")]
    pub path: String,
    /// Long listing: type and mode, links, owner, size, name.
    #[arg(short, long)]
    pub long: bool,
}

#[derive(clap::Args, Debug)]
pub struct CatArgs {
    /// The image file (not mounted or served).
    pub image: PathBuf,
    /// File inside the image, e.g. /logs/a.bin.
    pub path: String,
}

#[derive(clap::Args, Debug)]
pub struct GetArgs {
    /// The image file (not mounted or served).
    pub image: PathBuf,
    /// File inside the image.
    pub path: String,
    /// Where to write it [default: its name, in the current directory].
    pub dest: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct PutArgs {
    /// The image file (not mounted or served).
    pub image: PathBuf,
    /// The local file to copy in.
    pub src: PathBuf,
    /// Where in the image: a path, or an existing directory to put it in
    /// under its own name [default: /NAME].
    pub path: Option<String>,
    /// Replace a file that exists there.
    #[arg(short, long)]
    pub force: bool,
}

#[derive(clap::Args, Debug)]
pub struct RmArgs {
    /// The image file (not mounted or served).
    pub image: PathBuf,
    /// File, symlink or empty directory inside the image.
    pub path: String,
}

/// Bytes moved per Volume call.
const CHUNK: u64 = 1 << 20;

/// Open `image` here, unless a mount or server holds it.
fn open(image: &Path, writable: bool) -> Result<Volume, String> {
    match control::request(image, &serde_json::json!({"op": "stat"}), &mut |_| {}) {
        Err(ControlError::NotServed(_)) => {}
        Ok(_) => {
            let canon = image.canonicalize().unwrap_or_else(|_| image.to_path_buf());
            let mounted = pktfs_support::holder::mounts()
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.source == canon);
            return Err(match mounted {
                Some(m) => format!(
                    "{} is mounted on {}: use the files there (ls, cp, rm) instead",
                    image.display(),
                    m.mountpoint.display()
                ),
                None => format!(
                    "{} is held by a pktfs server: use it over HTTP (curl) instead, \
                     or stop the server first",
                    image.display()
                ),
            });
        }
        Err(e) => return Err(e.to_string()),
    }
    let opts = OpenOptions {
        read_only: !writable,
        ..Default::default()
    };
    crate::cli::open_volume(image, &opts, |note| eprintln!("pktfs: {note}"))
        .map_err(|e| crate::cli::open_error(image, &e))
}

/// The inode at `path`, the error naming the path.
fn resolve(v: &Volume, path: &str) -> Result<u64, String> {
    v.resolve_path(path)
        .map(|a| a.ino)
        .map_err(|e| format!("{path}: {e}"))
}

/// Parent directory and last name of `path` (no name: the root).
fn split(path: &str) -> Result<(&str, &str), String> {
    let t = path.trim_end_matches('/');
    if t.is_empty() {
        return Err(format!("{path}: the root directory has no name"));
    }
    Ok(t.rsplit_once('/').unwrap_or(("", t)))
}

fn close(v: Volume, image: &Path) -> Result<(), String> {
    v.close()
        .map_err(|e| format!("{}: closing: {e}", image.display()))
}

/// Read all of a regular file, a chunk at a time, into `out`.
fn read_file(
    v: &Volume,
    path: &str,
    mut out: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let ino = resolve(v, path)?;
    let a = v.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind != FileType::Regular {
        return Err(format!("{path}: not a regular file"));
    }
    let mut off = 0;
    while off < a.size {
        let b = v
            .read(ino, off, CHUNK.min(a.size - off))
            .map_err(|e| format!("{path}: at byte {off}: {e}"))?;
        if b.is_empty() {
            break;
        }
        out(&b)?;
        off += b.len() as u64;
    }
    Ok(())
}

fn kind_char(k: FileType) -> char {
    match k {
        FileType::Directory => 'd',
        FileType::Symlink => 'l',
        FileType::Regular => '-',
        _ => '?',
    }
}

pub fn ls(a: LsArgs) -> Result<(), String> {
    let v = open(&a.image, false)?;
    let ino = resolve(&v, &a.path)?;
    let at = v.getattr(ino).map_err(|e| format!("{}: {e}", a.path))?;
    let mut rows = Vec::new();
    if at.kind == FileType::Directory {
        v.readdir(ino, 0, |e| {
            rows.push((e.name, e.ino));
            true
        })
        .map_err(|e| format!("{}: {e}", a.path))?;
    } else {
        rows.push((a.path.clone().into_bytes(), ino));
    }
    for (name, ino) in rows {
        let name = String::from_utf8_lossy(&name);
        if !a.long {
            pktfs_support::outln!("{name}");
            continue;
        }
        let e = v.getattr(ino).map_err(|e| format!("{name}: {e}"))?;
        pktfs_support::outln!(
            "{}{:04o} {:>3} {:>5} {:>5} {:>12} {name}",
            kind_char(e.kind),
            e.perm & 0o7777,
            e.nlink,
            e.uid,
            e.gid,
            e.size
        );
    }
    close(v, &a.image)
}

pub fn cat(a: CatArgs) -> Result<(), String> {
    let v = open(&a.image, false)?;
    read_file(&v, &a.path, |b| {
        pktfs_support::stdout::bytes(b);
        Ok(())
    })?;
    close(v, &a.image)
}

pub fn get(a: GetArgs) -> Result<(), String> {
    let v = open(&a.image, false)?;
    let dest = match &a.dest {
        Some(d) if d.is_dir() => d.join(split(&a.path)?.1),
        Some(d) => d.clone(),
        None => PathBuf::from(split(&a.path)?.1),
    };
    // A regular (or new) destination is written under a temporary name
    // beside it and renamed over it only once the whole file is out: a copy
    // that fails (damaged data, a full disk) leaves no partial file and the
    // file that was there untouched. Anything else (/dev/stdout, a FIFO) is
    // written in place.
    let at = |e: std::io::Error| format!("{}: {e}", dest.display());
    let copy_into = |f: &mut std::fs::File| {
        read_file(&v, &a.path, |b| std::io::Write::write_all(f, b).map_err(at))
    };
    if std::fs::metadata(&dest).is_ok_and(|m| !m.is_file()) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&dest)
            .map_err(at)?;
        copy_into(&mut f)?;
        return close(v, &a.image);
    }
    let name = dest
        .file_name()
        .ok_or_else(|| format!("{}: no file name", dest.display()))?;
    let tmp = dest.with_file_name(format!(
        ".{}.pktfs-get-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(at)?;
        copy_into(&mut f)?;
        f.sync_all().map_err(at)?;
        std::fs::rename(&tmp, &dest).map_err(at)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    close(v, &a.image)
}

pub fn put(a: PutArgs) -> Result<(), String> {
    let mut src = std::fs::File::open(&a.src).map_err(|e| format!("{}: {e}", a.src.display()))?;
    let meta = src
        .metadata()
        .map_err(|e| format!("{}: {e}", a.src.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", a.src.display()));
    }
    let base = a
        .src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: no file name", a.src.display()))?;
    let v = open(&a.image, true)?;
    // PATH may name an existing directory: the file goes in it.
    let path = match a.path.as_deref() {
        None => format!("/{base}"),
        Some(p) => match v.resolve_path(p) {
            Ok(at) if at.kind == FileType::Directory => {
                format!("{}/{base}", p.trim_end_matches('/'))
            }
            _ => p.to_string(),
        },
    };
    let (dir, name) = split(&path)?;
    let parent = resolve(&v, dir)?;
    match v.lookup(parent, name.as_bytes()) {
        Ok(old) if old.kind == FileType::Directory => {
            return Err(format!("{path}: is a directory"))
        }
        Ok(_) if !a.force => {
            return Err(format!("{path} exists in the image (--force replaces it)"))
        }
        _ => {}
    }
    // The copy goes into an unnamed file that gets its name (replacing the
    // old file with --force) in one commit at the end: a copy that fails
    // (no space, a read error) leaves the image as it was, old file
    // included, and the unnamed file is freed.
    use std::os::unix::fs::MetadataExt;
    let mut tmp = v
        .tmpfile(meta.mode() & 0o7777, meta.uid(), meta.gid())
        .map_err(|e| format!("{path}: {e}"))?;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut off = 0u64;
    loop {
        let n = src
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", a.src.display()))?;
        if n == 0 {
            break;
        }
        v.write(tmp.ino(), off, &buf[..n])
            .map_err(|e| format!("{path}: at byte {off}: {e}"))?;
        off += n as u64;
    }
    let linked = tmp
        .link(Vec::new(), parent, name.as_bytes(), a.force)
        .map_err(|e| format!("{path}: {e}"))?;
    // Frees the replaced file's space, before the image is closed.
    drop(linked);
    drop(tmp);
    close(v, &a.image)
}

pub fn rm(a: RmArgs) -> Result<(), String> {
    let v = open(&a.image, true)?;
    let (dir, name) = split(&a.path)?;
    let parent = resolve(&v, dir)?;
    let at = v
        .lookup(parent, name.as_bytes())
        .map_err(|e| format!("{}: {e}", a.path))?;
    let r = if at.kind == FileType::Directory {
        v.rmdir(parent, name.as_bytes())
    } else {
        v.unlink(parent, name.as_bytes())
    };
    r.map_err(|e| format!("{}: {e}", a.path))?;
    close(v, &a.image)
}

#[cfg(test)]
mod tests {
    #[test]
    fn split_paths() {
        assert_eq!(super::split("/a/b").unwrap(), ("/a", "b"));
        assert_eq!(super::split("/a/").unwrap(), ("", "a"));
        assert_eq!(super::split("a").unwrap(), ("", "a"));
        assert!(super::split("/").is_err());
        assert!(super::split("").is_err());
    }
}
