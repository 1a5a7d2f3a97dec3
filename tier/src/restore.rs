//! Rebuilding an image from a snapshot (`pktfs restore`).
//!
//! The tree is recreated through the Volume's public calls: directories,
//! files, symlinks, device nodes and FIFOs, hard links, xattrs and ACLs;
//! every regular file that was wholly in the tier at the snapshot gets its
//! remote records back, field for field (`Volume::link_remote`); times and
//! modes are set last, deepest first, so creating children does not move a
//! directory's times (ctime is the time of the restore, as with any
//! copy). Files that still had bytes in PM at the snapshot are
//! not restored (those bytes were never in the bucket): the report names
//! them. No request goes to the store: reads of the restored files fetch
//! through whatever tier the restored image is served with.

use std::collections::HashMap;
use std::path::Path;

use pktfs_fs::{RemoteExtent, SetAttr, TimeSet, Volume, XattrFlags};
use pktfs_layout::FileType;

use crate::snapshot::{self, InodeEntry, ParsedSnapshot, SnapshotError};

/// How to restore.
#[derive(Clone, Debug, Default)]
pub struct RestoreOptions {
    /// Overwrite an existing image file.
    pub force: bool,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RestoreReport {
    pub snapshot: u64,
    pub snapshot_created_ns: u64,
    pub directories: u64,
    pub files: u64,
    pub bytes: u64,
    pub symlinks: u64,
    pub special: u64,
    pub hard_links: u64,
    /// Files not restored: they had bytes outside the tier at the
    /// snapshot. (path, size)
    pub skipped_partial: Vec<(String, u64)>,
}

impl RestoreReport {
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "restored snapshot {}: {} directories, {} files ({} bytes, all in the tier), {} \
             symlinks, {} special files, {} extra hard links",
            self.snapshot,
            self.directories,
            self.files,
            self.bytes,
            self.symlinks,
            self.special,
            self.hard_links
        );
        if !self.skipped_partial.is_empty() {
            s += &format!(
                "\nnot restored ({} files had bytes in PM only when the snapshot was taken):",
                self.skipped_partial.len()
            );
            for (p, size) in &self.skipped_partial {
                s += &format!("\n  {p} ({size} bytes)");
            }
        }
        s
    }
}

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
    #[error("{path}: {msg}")]
    Image { path: String, msg: String },
    #[error("restoring {path}: {source}")]
    Fs {
        path: String,
        source: pktfs_fs::FsError,
    },
}

fn is_acl(name: &[u8]) -> bool {
    name == pktfs_fs::volume::ACL_ACCESS_XATTR.as_bytes()
        || name == pktfs_fs::volume::ACL_DEFAULT_XATTR.as_bytes()
}

/// Restore `snap` into `vol`, a freshly formatted, empty image.
pub fn restore_into(vol: &Volume, snap: &ParsedSnapshot) -> Result<RestoreReport, RestoreError> {
    let mut rep = RestoreReport {
        snapshot: snap.seq,
        snapshot_created_ns: snap.created_ns,
        ..Default::default()
    };
    let by_ino: HashMap<u64, &InodeEntry> = snap.inodes.iter().map(|i| (i.ino, i)).collect();
    // Old inode number -> new, and a path for messages.
    let mut new: HashMap<u64, u64> = HashMap::new();
    let mut paths: HashMap<u64, String> = HashMap::new();
    new.insert(snap.root, vol.root());
    paths.insert(snap.root, String::new());
    let fs_err = |path: &str| {
        let path = path.to_string();
        move |source| RestoreError::Fs { path, source }
    };
    let mut made: Vec<(u64, u64)> = vec![(snap.root, vol.root())];
    for n in &snap.names {
        let Some(&parent) = new.get(&n.parent) else {
            continue; // its directory was not restored
        };
        let path = format!(
            "{}/{}",
            paths.get(&n.parent).map(String::as_str).unwrap_or(""),
            String::from_utf8_lossy(&n.name)
        );
        let Some(i) = by_ino.get(&n.ino) else {
            continue;
        };
        if let Some(&existing) = new.get(&n.ino) {
            vol.link(existing, parent, &n.name).map_err(fs_err(&path))?;
            rep.hard_links += 1;
            continue;
        }
        if i.kind == FileType::Regular && !i.complete {
            if !rep.skipped_partial.iter().any(|(p, _)| *p == path) {
                rep.skipped_partial.push((path, i.size));
            }
            continue;
        }
        let a = match i.kind {
            FileType::Directory => {
                rep.directories += 1;
                vol.mkdir(parent, &n.name, 0o700, i.uid, i.gid)
            }
            FileType::Regular => {
                rep.files += 1;
                rep.bytes += i.size;
                vol.create(parent, &n.name, 0o600, i.uid, i.gid)
            }
            FileType::Symlink => {
                rep.symlinks += 1;
                vol.symlink(parent, &n.name, &i.target, i.uid, i.gid)
            }
            k => {
                rep.special += 1;
                vol.mknod(parent, &n.name, k, 0o600, i.uid, i.gid, i.rdev)
            }
        }
        .map_err(fs_err(&path))?;
        // ACLs wait for the last pass: a default ACL set now would be
        // inherited by the children created next, which had their own.
        for (name, value) in i.xattrs.iter().filter(|(n, _)| !is_acl(n)) {
            vol.restore_xattr(a.ino, name, value)
                .map_err(fs_err(&path))?;
        }
        if i.kind == FileType::Regular {
            let ext: Vec<RemoteExtent> = i
                .extents
                .iter()
                .map(|e| RemoteExtent {
                    file_off: e.file_off,
                    obj: e.obj,
                    obj_off: e.obj_off,
                    len: e.len,
                    crc32c: e.crc32c,
                    seq: e.seq,
                    timestamp_ns: e.timestamp_ns,
                    flags: if e.from_network {
                        pktfs_layout::record::FLAG_RX
                    } else {
                        0
                    } | if e.kernel_time {
                        pktfs_layout::record::FLAG_KERNEL_TIME
                    } else {
                        0
                    },
                })
                .collect();
            if !ext.is_empty() {
                vol.link_remote(a.ino, &ext).map_err(fs_err(&path))?;
            }
            if vol.getattr(a.ino).map_err(fs_err(&path))?.size != i.size {
                vol.setattr(
                    a.ino,
                    &SetAttr {
                        size: Some(i.size),
                        ..Default::default()
                    },
                )
                .map_err(fs_err(&path))?;
            }
        }
        new.insert(n.ino, a.ino);
        paths.insert(n.ino, path);
        made.push((n.ino, a.ino));
    }
    // Modes, owners and times last, children before their directories.
    for (old, ino) in made.iter().rev() {
        let Some(i) = by_ino.get(old) else { continue };
        let path = paths.get(old).cloned().unwrap_or_default();
        if i.kind != FileType::Symlink {
            vol.setattr(
                *ino,
                &SetAttr {
                    mode: Some(i.perm),
                    uid: Some(i.uid),
                    gid: Some(i.gid),
                    ..Default::default()
                },
            )
            .map_err(fs_err(&path))?;
        }
        // The ACL is the mode's and an xattr's: set again after the mode.
        for (name, value) in i
            .xattrs
            .iter()
            .filter(|(n, _)| n.starts_with(b"system.posix_acl"))
        {
            vol.setxattr(*ino, name, value, XattrFlags::default())
                .map_err(fs_err(&path))?;
        }
        // ctime is the restore's (as with any copy): a directory's times
        // may also be carried by its dirents (FLAG_DIR_TIME), which win
        // over a slot ctime older than them, so a ctime set into the past
        // would not hold.
        vol.setattr(
            *ino,
            &SetAttr {
                atime: Some(TimeSet::Ns(i.atime_ns)),
                mtime: Some(TimeSet::Ns(i.mtime_ns)),
                ..Default::default()
            },
        )
        .map_err(fs_err(&path))?;
    }
    Ok(rep)
}

/// Format a new image at `image` (the snapshot's image size unless
/// `size_bytes`), restore `snap_bytes` into it, close it cleanly.
///
/// A regular file (or a path with nothing there) is built beside `image`
/// (`.NAME.pktfs-restore-PID`, same directory) and renamed over it only
/// once the restore is complete and closed: a restore that fails part way
/// (a `--size` too small for the tree, a full file system) removes its
/// own file and leaves whatever was at `image` as it was. An existing
/// image is locked (as a mount or server would) for the whole restore, so
/// one in use is refused rather than replaced underneath its user. A
/// device (/dev/dax) cannot be renamed over: it is formatted in place,
/// and only `force` allows that when it already holds an image.
pub fn restore_image(
    image: &Path,
    size_bytes: Option<u64>,
    snap_bytes: &[u8],
    opts: &RestoreOptions,
) -> Result<RestoreReport, RestoreError> {
    // Everything is checked before the image file is touched.
    let snap = snapshot::parse(snap_bytes)?;
    let shown = image.display().to_string();
    let img_err = |msg: String| RestoreError::Image {
        path: shown.clone(),
        msg,
    };
    let meta = std::fs::metadata(image).ok();
    let in_place = meta.as_ref().is_some_and(|m| !m.is_file() && !m.is_dir());
    let occupied = meta
        .as_ref()
        .is_some_and(|m| m.len() > 0 || (in_place && holds_an_image(image)));
    if meta.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(img_err(
            "is a directory; name the image file to create".into(),
        ));
    }
    if occupied && !opts.force {
        return Err(img_err("exists; give --force to overwrite it".into()));
    }
    let size = size_bytes.unwrap_or(snap.image_len_bytes);
    let params = pktfs_layout::GeometryParams::for_size(size);
    if in_place {
        return build(image, params, &snap);
    }
    // A symlink is followed: the file it names is the one replaced.
    let target = match &meta {
        Some(_) => std::fs::canonicalize(image).map_err(|e| img_err(e.to_string()))?,
        None => image.to_path_buf(),
    };
    // Held until the rename: no mount or server can open the old image
    // meanwhile, and one that has it open already refuses the restore.
    let _old = match &meta {
        Some(_) => Some(lock_existing(&target).map_err(&img_err)?),
        None => None,
    };
    let name = target
        .file_name()
        .ok_or_else(|| img_err("no file name".into()))?;
    let tmp = target.with_file_name(format!(
        ".{}.pktfs-restore-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let kept = || match occupied {
        true => format!("; {shown} is as it was"),
        false => String::new(),
    };
    let built = build(&tmp, params, &snap).and_then(|rep| {
        if let Some(m) = &meta {
            // The new image keeps the old one's permissions.
            let _ = std::fs::set_permissions(&tmp, m.permissions());
        }
        std::fs::rename(&tmp, &target).map_err(|e| RestoreError::Image {
            path: tmp.display().to_string(),
            msg: format!("renaming it over {}: {e}", target.display()),
        })?;
        // The rename itself made durable.
        if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(rep)
    });
    built.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        match e {
            RestoreError::Image { path, msg } => RestoreError::Image {
                path,
                msg: msg + &kept(),
            },
            RestoreError::Fs { path, source } => RestoreError::Image {
                path: shown.clone(),
                msg: format!("restoring {path}: {source}{}", kept()),
            },
            e => e,
        }
    })
}

/// Format `path`, restore `snap` into it and close it.
fn build(
    path: &Path,
    params: pktfs_layout::GeometryParams,
    snap: &ParsedSnapshot,
) -> Result<RestoreReport, RestoreError> {
    let img_err = |msg: String| RestoreError::Image {
        path: path.display().to_string(),
        msg,
    };
    pktfs_fs::Volume::format(
        path,
        &pktfs_fs::FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .map_err(|e| img_err(format!("cannot create the image: {e}")))?;
    let vol = pktfs_fs::Volume::open(path, &pktfs_fs::OpenOptions::default())
        .map_err(|e| img_err(format!("cannot open the new image: {e}")))?;
    let rep = restore_into(&vol, snap)?;
    vol.close()
        .map_err(|e| img_err(format!("closing the image: {e}")))?;
    Ok(rep)
}

/// The existing image at `path`, locked as a writable open would lock it
/// (and for as long as the returned file lives).
fn lock_existing(path: &Path) -> Result<std::fs::File, String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(pktfs_fs::media::MediaError::Locked {
            path: path.to_path_buf(),
        }
        .to_string()),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("locking it: {e}")),
    }
}

/// Whether a device already starts with a pktfs superblock (either
/// copy): overwriting it needs `force`.
fn holds_an_image(path: &Path) -> bool {
    use std::io::Read;
    let mut head = vec![0u8; 8192];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| {
            pktfs_layout::superblock::has_magic(&head[..])
                || pktfs_layout::superblock::has_magic(
                    &head[pktfs_layout::superblock::BACKUP_OFFSET as usize..],
                )
        })
}
