//! Helpers for `pktfs up`: free space for a new image's size, and whether
//! an existing image may be trusted.
//!
//! `pktfs up` takes its image from a well-known path in a shared directory
//! (/dev/shm/pktfs-USER.img) that every local user can write into. Another
//! user could plant a file or a symbolic link there before the first `up`,
//! and the mount would then keep its data in a file that user can read or
//! change. So `up` uses only an image its own user owns, that no other
//! user can write, in a directory where no other user can replace it; a new
//! image is created 0600 (by the media layer, for every tool).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bytes available to an unprivileged user on the file system holding
/// `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}

/// "user NAME (uid N)", or "uid N" for a uid without a name.
fn who(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
    {
        Some(u) => format!("user {} (uid {uid})", u.name),
        None => format!("uid {uid}"),
    }
}

/// What [`check_image`] found that does not stop `up`, for a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageNote(pub String);

/// May `up` use the image at `path` (made by someone, at some time)?
/// `Ok(None)`: there is none (up creates it, 0600) or it is fine;
/// `Ok(Some(note))`: usable, with a warning; `Err`: refused, saying why
/// and what to do. `me`: the effective uid.
///
/// Refused: a symbolic link owned by another user (anyone who owns the
/// link can point it elsewhere later); an image file owned by anyone but
/// `me` (planted); an image any user may write (`o+w`); a directory that
/// every user may write without the sticky bit (anyone may replace the
/// image between this check and the open). Warned: an image other users
/// may read (its data is not private).
pub fn check_image(path: &Path, me: u32) -> Result<Option<ImageNote>, String> {
    let p = path.display();
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return check_dir(path, me).map(|()| None)
        }
        Err(e) => return Err(format!("{p}: {e}")),
    };
    if link.file_type().is_symlink() && link.uid() != me && link.uid() != 0 {
        return Err(format!(
            "{p} is a symbolic link owned by {}, not by you: another user may have planted \
             it to point your file system at a file they can read; remove it or pass --image",
            who(link.uid())
        ));
    }
    let m = std::fs::metadata(path).map_err(|e| format!("{p}: {e}"))?;
    let mode = m.permissions().mode() & 0o7777;
    if m.file_type().is_file() && m.uid() != me {
        return Err(format!(
            "{p} is owned by {}, not by you ({}): another user may have planted it to read \
             or change what you store; pktfs up uses only an image you own (remove it, or \
             pass --image with one of yours)",
            who(m.uid()),
            who(me)
        ));
    }
    if mode & 0o002 != 0 {
        return Err(format!(
            "{p} may be written by every user (mode {mode:04o}): any of them could change \
             the file system under you; `chmod 600 {p}` if it is yours and unchanged"
        ));
    }
    check_dir(path, me)?;
    if m.file_type().is_file() && mode & 0o044 != 0 {
        return Ok(Some(ImageNote(format!(
            "{p} may be read by other users (mode {mode:04o}); `chmod 600 {p}` keeps its \
             data private"
        ))));
    }
    Ok(None)
}

/// The image's directory must not let other users replace it: not
/// writable by all unless sticky (like /dev/shm and /tmp), and not a
/// directory another user owns and may write.
fn check_dir(path: &Path, me: u32) -> Result<(), String> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => Path::new("."),
    };
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        // Not there yet: `up` creates it (as this user).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mode = m.permissions().mode();
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "{} may be written by every user and is not sticky (mode {:04o}): another user \
             could replace the image there; keep the image in a directory of yours",
            dir.display(),
            mode & 0o7777
        ));
    }
    if m.uid() != me && m.uid() != 0 && mode & 0o200 != 0 {
        return Err(format!(
            "{} is owned by {}, who could replace the image there; keep the image in a \
             directory of yours",
            dir.display(),
            who(m.uid())
        ));
    }
    Ok(())
}

/// Where `up` keeps its token unless `--token-file` names one:
/// `$XDG_CONFIG_HOME/pktfs/token`, else `~/.config/pktfs/token`. A home
/// directory, not the image's shared /dev/shm: nobody else may create
/// files there.
pub fn default_token_path() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(config.join("pktfs").join("token"))
}

/// `up`'s token file at `path`, made when missing: 32 random bytes as hex,
/// the file 0600 in a directory made 0700. True when it was made now.
/// An existing one is used only if `me` owns it and no other user may
/// read or write it: a token others can read lets them act as you.
pub fn ensure_token_file(path: &Path, me: u32) -> Result<bool, String> {
    let p = path.display();
    if check_private_file(path, me, "token file", "they could act as you over HTTP")? {
        return Ok(false);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut raw = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut raw))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{p}: {e}"))?;
    std::io::Write::write_all(&mut f, format!("{hex}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{p}: {e}"))?;
    Ok(true)
}

/// Is there a file at `path` that only `me` may read and write (true), or
/// none (false)? Anything else is refused, saying why and what to do: a
/// secret in a file another user owns or may read is no secret from
/// them. `what`: the file's role ("token file"); `risk`: what another user
/// could do with it.
pub fn check_private_file(path: &Path, me: u32, what: &str, risk: &str) -> Result<bool, String> {
    let p = path.display();
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{p}: {e}")),
    };
    if !m.file_type().is_file() {
        return Err(format!("{p}: the {what} is not a regular file"));
    }
    if m.uid() != me {
        return Err(format!(
            "{p} is owned by {}, not by you: a secret another user chose is no secret from \
             them; remove it (or name another file)",
            who(m.uid())
        ));
    }
    let mode = m.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{p} may be read or written by other users (mode {mode:04o}): {risk}; `chmod 600 {p}`"
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn a_missing_image_in_a_private_directory_is_fine() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check_image(&d.path().join("x.img"), me()), Ok(None));
    }

    #[test]
    fn an_own_private_image_is_fine_and_a_readable_one_is_warned() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.img");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(check_image(&p, me()), Ok(None));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let note = check_image(&p, me()).unwrap().expect("a warning");
        assert!(
            note.0.contains("0644") && note.0.contains("chmod 600"),
            "{note:?}"
        );
    }

    #[test]
    fn a_world_writable_image_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.img");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = check_image(&p, me()).unwrap_err();
        assert!(e.contains("every user") && e.contains("0666"), "{e}");
    }

    #[test]
    fn an_image_of_another_uid_is_refused_naming_the_owner() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.img");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        // As if this process were another user: the file's owner is not "me".
        let other = me().wrapping_add(4242);
        let e = check_image(&p, other).unwrap_err();
        assert!(e.contains(&format!("uid {}", me())), "{e}");
        assert!(e.contains("not by you"), "{e}");
    }

    #[test]
    fn a_world_writable_directory_without_the_sticky_bit_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_image(&d.path().join("x.img"), me()).unwrap_err();
        assert!(e.contains("not sticky"), "{e}");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(check_image(&d.path().join("x.img"), me()), Ok(None));
    }

    #[test]
    fn a_token_file_is_made_private_and_then_reused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cfg/pktfs/token");
        assert_eq!(ensure_token_file(&p, me()), Ok(true));
        let t = std::fs::read_to_string(&p).unwrap();
        assert_eq!(t.trim().len(), 64, "{t:?}");
        assert!(t.trim().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let dir = std::fs::metadata(p.parent().unwrap()).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        assert_eq!(ensure_token_file(&p, me()), Ok(false));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), t, "kept");
        // A second one is another secret.
        let q = d.path().join("other");
        ensure_token_file(&q, me()).unwrap();
        assert_ne!(std::fs::read_to_string(&q).unwrap(), t);
    }

    #[test]
    fn a_token_file_others_may_read_or_own_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("token");
        std::fs::write(&p, "abc\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ensure_token_file(&p, me()).unwrap_err();
        assert!(e.contains("0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = ensure_token_file(&p, me().wrapping_add(4242)).unwrap_err();
        assert!(e.contains("not by you"), "{e}");
    }
}
