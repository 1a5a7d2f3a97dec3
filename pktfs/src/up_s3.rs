//! `pktfs up`'s S3 access key: one per user, kept in an AWS config file of
//! theirs and brought to every image `up` serves, so the aws-cli lines the
//! banner prints work as printed, on this image and on the next.
//!
//! Why a config file in the AWS format rather than a key printed once: the
//! SDKs and aws-cli read it as it is (`AWS_CONFIG_FILE`, a profile), the
//! secret never appears in a terminal or a shell history, and `up` run
//! again (or on another image) finds the same key instead of piling up new
//! ones in the image's store. The file is checked as the HTTP token's is:
//! owned by the user and private (0600, in a 0700 directory), else refused.
//!
//! The key has `*=rw`: it is the image owner's own, as the HTTP token is.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use pktfs_fs::Volume;
use pktfs_netpath::control::keys::{self as admin, AccessKey, Grant};

/// The profile the file holds and the banner's lines name.
pub const PROFILE: &str = "pktfs";

/// The key `up` serves S3 with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpKey {
    pub id: String,
    /// The AWS config file that holds it.
    pub file: PathBuf,
    /// What `up` did: made the key now, brought it to this image, or found
    /// it here.
    pub how: How,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Made,
    Brought,
    Found,
}

/// `$XDG_CONFIG_HOME/pktfs/aws-config`, else `~/.config/pktfs/aws-config`.
pub fn default_path() -> Option<PathBuf> {
    crate::quickstart::default_token_path().map(|t| t.with_file_name("aws-config"))
}

/// Have the key of the file at `path` in `vol`'s store, making both when
/// the file is missing. `me`: the effective uid; `user`: who the key is
/// for, in its name; `region`: what the file tells aws-cli to sign for.
pub fn ensure(
    vol: &Volume,
    path: &Path,
    me: u32,
    user: &str,
    region: &str,
) -> Result<UpKey, String> {
    let p = path.display();
    let exists = crate::quickstart::check_private_file(
        path,
        me,
        "S3 key file",
        "they could act as you over S3",
    )?;
    let name = format!("pktfs up ({user})");
    if !exists {
        let made = admin::add(vol, &name, &[all_buckets()], true).map_err(|e| e.to_string())?;
        let (id, secret) = (
            made["access_key_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            made["secret_access_key"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        if let Err(e) = write_file(path, &id, &secret, user, region) {
            // No key left behind that nobody has the secret of.
            let _ = admin::remove(vol, &id);
            return Err(e);
        }
        return Ok(UpKey {
            id,
            file: path.to_path_buf(),
            how: How::Made,
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{p}: {e}"))?;
    let (id, secret) = parse(&text).map_err(|why| {
        format!(
            "{p}: {why}; it is not the file `pktfs up` writes: remove it and `up` makes a new key"
        )
    })?;
    if let Some(k) = admin::load(vol).map_err(|e| e.to_string())?.get(&id) {
        if k.secret != secret {
            return Err(format!(
                "this image has an access key {id} with another secret than {p}'s: remove one \
                 of them (`pktfs keys rm IMAGE {id}`, or the file)"
            ));
        }
    }
    let key = AccessKey {
        id: id.clone(),
        secret,
        name,
        grants: vec![all_buckets()],
        create_buckets: true,
        created_unix_s: now_unix_s(),
    };
    let how = match admin::bring(vol, &key).map_err(|e| format!("{p}: {e}"))? {
        true => How::Brought,
        false => How::Found,
    };
    Ok(UpKey {
        id,
        file: path.to_path_buf(),
        how,
    })
}

/// The banner's S3 lines, each working as pasted into a shell (after the
/// first, which points aws-cli at the key's file).
pub fn try_lines(key: &UpKey, addr: std::net::SocketAddr) -> Vec<(String, &'static str)> {
    let aws = format!("aws --profile {PROFILE} --endpoint-url http://{addr}");
    vec![
        (
            format!("export AWS_CONFIG_FILE={}", key.file.display()),
            "aws-cli and the SDKs read the S3 key there",
        ),
        (
            format!("{aws} s3 mb s3://demo"),
            "a bucket: a top-level directory",
        ),
        (
            format!("{aws} s3 cp somefile s3://demo/"),
            "stored (200 once it is durable)",
        ),
        (format!("{aws} s3 ls s3://demo/"), "list"),
    ]
}

fn all_buckets() -> Grant {
    "*=rw".parse().expect("a valid grant")
}

fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The id and secret of `[profile pktfs]`.
fn parse(text: &str) -> Result<(String, String), String> {
    let mut section = "";
    let (mut id, mut secret) = (None, None);
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.trim();
            continue;
        }
        if section != format!("profile {PROFILE}") {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            match k.trim() {
                "aws_access_key_id" => id = Some(v.trim().to_string()),
                "aws_secret_access_key" => secret = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    match (id, secret) {
        (Some(i), Some(s)) => Ok((i, s)),
        _ => Err(format!(
            "no aws_access_key_id and aws_secret_access_key in [profile {PROFILE}]"
        )),
    }
}

fn write_file(path: &Path, id: &str, secret: &str, user: &str, region: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = format!(
        "# The S3 access key `pktfs up` serves with, made for {user} and brought to every\n\
         # image `up` serves. Use it as\n\
         #   AWS_CONFIG_FILE={} aws --profile {PROFILE} --endpoint-url http://ADDR s3 ls\n\
         [profile {PROFILE}]\n\
         aws_access_key_id = {id}\n\
         aws_secret_access_key = {secret}\n\
         region = {region}\n",
        path.display()
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktfs_fs::{FormatOptions, OpenOptions};
    use std::os::unix::fs::PermissionsExt;

    fn volume(dir: &Path, name: &str) -> Volume {
        let img = dir.join(name);
        Volume::format(
            &img,
            &FormatOptions {
                params: pktfs_layout::GeometryParams::for_size(64 << 20),
                label: None,
            },
            &mut |_, _| {},
        )
        .unwrap();
        Volume::open(&img, &OpenOptions::default()).unwrap()
    }

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn one_key_made_then_found_then_brought_to_another_image() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("cfg/pktfs/aws-config");
        let a = volume(d.path(), "a.img");
        let made = ensure(&a, &file, me(), "alice", "us-east-1").unwrap();
        assert_eq!(made.how, How::Made);
        let text = std::fs::read_to_string(&file).unwrap();
        let (id, secret) = parse(&text).unwrap();
        assert_eq!(id, made.id);
        assert!(text.contains("region = us-east-1"), "{text}");
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let k = admin::load(&a).unwrap().get(&id).cloned().unwrap();
        assert_eq!(k.secret, secret);
        assert_eq!(
            k.grants,
            vec![all_buckets()],
            "every bucket, read and write"
        );
        // Again: the same key, nothing added.
        let again = ensure(&a, &file, me(), "alice", "us-east-1").unwrap();
        assert_eq!((again.id.as_str(), again.how), (id.as_str(), How::Found));
        assert_eq!(admin::load(&a).unwrap().len(), 1);
        // Another image gets the same key.
        let b = volume(d.path(), "b.img");
        let brought = ensure(&b, &file, me(), "alice", "us-east-1").unwrap();
        assert_eq!(
            (brought.id.as_str(), brought.how),
            (id.as_str(), How::Brought)
        );
        assert_eq!(admin::load(&b).unwrap().get(&id).unwrap().secret, secret);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "file unchanged"
        );
    }

    #[test]
    fn a_file_others_may_read_a_foreign_or_broken_one_and_a_clash_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let a = volume(d.path(), "a.img");
        let file = d.path().join("aws-config");
        ensure(&a, &file, me(), "alice", "us-east-1").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ensure(&a, &file, me(), "alice", "us-east-1").unwrap_err();
        assert!(e.contains("0644") && e.contains("over S3"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = ensure(&a, &file, me().wrapping_add(4242), "alice", "us-east-1").unwrap_err();
        assert!(e.contains("not by you"), "{e}");
        // The same id with another secret in the image: refused, nothing changed.
        let text = std::fs::read_to_string(&file).unwrap();
        let (id, secret) = parse(&text).unwrap();
        let other: String = secret.chars().rev().collect();
        std::fs::write(&file, text.replace(&secret, &other)).unwrap();
        let e = ensure(&a, &file, me(), "alice", "us-east-1").unwrap_err();
        assert!(e.contains(&id) && e.contains("another secret"), "{e}");
        assert_eq!(admin::load(&a).unwrap().get(&id).unwrap().secret, secret);
        // A file without the profile, or with a malformed key.
        std::fs::write(&file, "[default]\naws_access_key_id = x\n").unwrap();
        let e = ensure(&a, &file, me(), "alice", "us-east-1").unwrap_err();
        assert!(e.contains("remove it"), "{e}");
        std::fs::write(
            &file,
            "[profile pktfs]\naws_access_key_id = nope\naws_secret_access_key = short\n",
        )
        .unwrap();
        let b = volume(d.path(), "b.img");
        let e = ensure(&b, &file, me(), "alice", "us-east-1").unwrap_err();
        assert!(e.contains("not an access key id"), "{e}");
        assert!(admin::load(&b).unwrap().is_empty(), "nothing stored");
    }
}
