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

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Bytes available to an unprivileged user on the file system holding
/// `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}

/// The name of this process's effective user (from the user database,
/// not $USER, which the caller's environment may set to anything).
pub fn effective_user_name() -> Option<String> {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid).ok().flatten().map(|u| u.name)
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
        assert!(note.0.contains("0644") && note.0.contains("chmod 600"), "{note:?}");
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
}
