//! `pktfs keys add|list|show|grant|revoke|rm`: the S3 access keys an image
//! keeps. Asked of
//! the process holding the image (a mount or a server) over its control
//! socket, so a running S3 endpoint sees a change at once; on an image
//! nobody holds, done here. Either way the same functions do it
//! (`pktfs_netpath::control::keys`).

use std::path::{Path, PathBuf};

use pktfs_fs::{OpenOptions, Volume};
use pktfs_netpath::control::keys::{self as admin, Grant, KeyAdminError, KeysError};
use pktfs_netpath::control::{self, ControlError};
use serde_json::{json, Value};

/// What `pktfs keys --help` ends with.
pub const KEYS_HELP: &str = "\
Access keys sign S3 requests (SigV4) to `pktfs serve --s3` and `mount --s3`.
Each key has an id (PK + 18 characters), a secret (40 characters), a name,
grants (BUCKET=rw, BUCKET=r or BUCKET=w, and * for every bucket) and, with
--create-buckets, the right to make buckets, which it then owns: a key
reads and writes its own buckets and reaches others only by grant.
  r: HeadBucket, ListObjects, ListObjectVersions, GetObject, HeadObject,
     ListParts, ListMultipartUploads, GetBucketCors
  w: DeleteBucket, PutObject, DeleteObject(s), the multipart uploads,
     PutBucketCors, DeleteBucketCors; CopyObject needs w on the target and
     r on the source
CreateBucket needs --create-buckets (or w on that name). ListBuckets shows
the buckets a key owns or has any grant on.

The keys are kept in the image (docs/FORMAT.md, \"Access keys\"), hidden from
every client: no xattr call, mount, snapshot or tier copy shows them. Anyone
who can read the image file can read them: keep it mode 600.

On an image a mount or a server holds, the keys are asked of it (only root,
the image file's owner and the holder's own user may); otherwise the image
is opened here.

Examples:
  pktfs keys add /srv/img backup --grant logs=rw
  pktfs keys add /srv/img team-a --create-buckets
  pktfs keys add /srv/img reader --grant '*=r' --json
  pktfs keys list /srv/img
  pktfs keys show /srv/img PK3F7Q2Z0N8C1V5X9B4M
  pktfs keys grant /srv/img PK3F7Q2Z0N8C1V5X9B4M shared=r
  pktfs keys revoke /srv/img PK3F7Q2Z0N8C1V5X9B4M shared
  pktfs keys rm /srv/img PK3F7Q2Z0N8C1V5X9B4M";

#[derive(clap::Args, Debug)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub what: KeysWhat,
}

#[derive(clap::Subcommand, Debug)]
pub enum KeysWhat {
    /// Make a new access key and print its id and secret (shown this once).
    Add {
        /// The image file.
        image: PathBuf,
        /// A name for the key: who or what uses it (at most 64 bytes).
        name: String,
        /// What the key may do: BUCKET=rw, BUCKET=r or BUCKET=w (* for
        /// every bucket); repeat for more buckets (at most 16).
        #[arg(long = "grant", value_name = "BUCKET=rw|r|w", value_parser = grant_value)]
        grants: Vec<Grant>,
        /// The key may make buckets, which it then owns (reads and writes
        /// without a grant).
        #[arg(long)]
        create_buckets: bool,
        /// Print JSON: access_key_id, secret_access_key, name, grants,
        /// create_buckets, created_unix_s.
        #[arg(long)]
        json: bool,
    },
    /// Show one key (never its secret) and the buckets it owns.
    Show {
        /// The image file.
        image: PathBuf,
        /// The key's id (PK...).
        access_key_id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give a key a grant on a bucket (replacing the one it had there), or
    /// the right to create buckets.
    Grant {
        /// The image file.
        image: PathBuf,
        /// The key's id (PK...).
        access_key_id: String,
        /// BUCKET=rw, BUCKET=r or BUCKET=w (* for every bucket).
        #[arg(value_parser = grant_value, required_unless_present = "create_buckets")]
        grant: Option<Grant>,
        /// Let the key make buckets (which it then owns).
        #[arg(long)]
        create_buckets: bool,
    },
    /// Take a key's grant on a bucket away, or its right to create buckets
    /// (the buckets it owns stay its own).
    Revoke {
        /// The image file.
        image: PathBuf,
        /// The key's id (PK...).
        access_key_id: String,
        /// The bucket (or *) whose grant goes.
        #[arg(required_unless_present = "create_buckets")]
        bucket: Option<String>,
        /// Take away the right to make buckets.
        #[arg(long)]
        create_buckets: bool,
    },
    /// List the access keys: id, name, grants, when made (never secrets).
    List {
        /// The image file.
        image: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove an access key: requests signed with it are refused from now on.
    Rm {
        /// The image file.
        image: PathBuf,
        /// The key's id (PK...), as `pktfs keys list` shows it.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        access_key_id: Option<String>,
        /// Remove every key, also when the store cannot be read any more
        /// (damaged, or written by a newer pktfs).
        #[arg(long)]
        all: bool,
    },
}

// clap names the value, so this error does not repeat it.
fn grant_value(s: &str) -> Result<Grant, String> {
    s.parse::<Grant>().map_err(|e| match e {
        KeysError::BadGrant { why, .. } => why,
        other => other.to_string(),
    })
}

/// Ask the holder of `image`; if nobody holds it, open it here (read-write
/// when `writable`) and run `local`.
fn ask(
    image: &Path,
    req: &Value,
    writable: bool,
    local: impl FnOnce(&Volume) -> Result<Value, KeyAdminError>,
) -> Result<Value, String> {
    match control::request(image, req, &mut |_| {}) {
        Ok(v) => Ok(v),
        Err(ControlError::NotServed(_)) => {
            let opts = OpenOptions {
                read_only: !writable,
                ..Default::default()
            };
            let v = crate::cli::open_volume(image, &opts, |note| eprintln!("pktfs: {note}"))
                .map_err(|e| match e {
                    pktfs_fs::FsError::Media(pktfs_fs::media::MediaError::Locked { .. }) => {
                        format!(
                            "{} is in use by a process that does not answer on its control \
                             socket (an fsck, or an older pktfs); try again when it is done",
                            image.display()
                        )
                    }
                    e => crate::cli::open_error(image, &e),
                })?;
            let r = local(&v).map_err(|e| format!("{}: {e}", image.display()));
            v.close()
                .map_err(|e| format!("{}: closing: {e}", image.display()))?;
            r
        }
        Err(ControlError::Refused(e)) => Err(format!("{}: {e}", image.display())),
        Err(e) => Err(e.to_string()),
    }
}

/// `logs=rw *=r`, or `none`.
fn grants_text(g: &Value) -> String {
    let list: Vec<String> = g
        .as_array()
        .map(|a| {
            a.iter()
                .map(|g| {
                    let rights = match (g["read"].as_bool(), g["write"].as_bool()) {
                        (Some(true), Some(true)) => "rw",
                        (Some(true), _) => "r",
                        (_, Some(true)) => "w",
                        _ => "-",
                    };
                    format!("{}={rights}", g["bucket"].as_str().unwrap_or("?"))
                })
                .collect()
        })
        .unwrap_or_default();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(" ")
    }
}

fn created_text(v: &Value) -> String {
    v.as_i64()
        .and_then(|s| u64::try_from(s).ok())
        .map(|s| {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
            humantime::format_rfc3339_seconds(t).to_string()
        })
        .unwrap_or_else(|| "?".into())
}

/// Anyone who can read the image can read the secrets in it: say so when
/// its mode lets other users read it.
fn note_readable(image: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(image) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o044 != 0 {
            eprintln!(
                "pktfs: note: {} is readable by other users (mode {mode:03o}), and the secret \
                 is kept in it: chmod 600 {}",
                image.display(),
                image.display()
            );
        }
    }
}

/// The key as `show`, `grant` and `revoke` print it.
fn print_key(k: &Value) {
    pktfs_support::outln!(
        "access key id:     {}",
        k["access_key_id"].as_str().unwrap_or("")
    );
    pktfs_support::outln!("name:              {}", k["name"].as_str().unwrap_or(""));
    pktfs_support::outln!("grants:            {}", grants_text(&k["grants"]));
    pktfs_support::outln!(
        "creates buckets:   {}",
        if k["create_buckets"].as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        }
    );
    if let Some(owns) = k["owns"].as_array() {
        let names: Vec<&str> = owns.iter().filter_map(Value::as_str).collect();
        pktfs_support::outln!(
            "owns:              {}",
            if names.is_empty() {
                "no buckets".into()
            } else {
                names.join(" ")
            }
        );
    }
    pktfs_support::outln!("created:           {}", created_text(&k["created_unix_s"]));
}

/// `grant` and `revoke`: one change to one key, through its holder or
/// here.
fn change(image: &Path, id: &str, g: Option<Grant>, create: Option<bool>) -> Result<(), String> {
    let mut k = Value::Null;
    if let Some(g) = g {
        let req = match (g.read || g.write, g.to_string()) {
            (true, s) => json!({"op": "keys_grant", "access_key_id": id, "grant": s}),
            (false, _) => json!({"op": "keys_grant", "access_key_id": id, "revoke": g.bucket}),
        };
        k = ask(image, &req, true, |v| admin::grant(v, id, g.clone()))?;
    }
    if let Some(allowed) = create {
        let req = json!({"op": "keys_create_buckets", "access_key_id": id, "allowed": allowed});
        k = ask(image, &req, true, |v| {
            admin::set_create_buckets(v, id, allowed)
        })?;
    }
    print_key(&k);
    Ok(())
}

pub fn run(a: KeysArgs) -> Result<(), String> {
    match a.what {
        KeysWhat::Add {
            image,
            name,
            grants,
            create_buckets,
            json,
        } => {
            let req = json!({
                "op": "keys_add",
                "name": name,
                "grants": grants.iter().map(Grant::to_string).collect::<Vec<_>>(),
                "create_buckets": create_buckets,
            });
            let k = ask(&image, &req, true, |v| {
                admin::add(v, &name, &grants, create_buckets)
            })?;
            if grants.is_empty() && !create_buckets {
                eprintln!(
                    "pktfs: note: the key has no grants and may not create buckets, so it may \
                     do nothing; give it some with pktfs keys grant (BUCKET=rw, r, w; * for \
                     every bucket; or --create-buckets)"
                );
            }
            note_readable(&image);
            if json {
                pktfs_support::outln!("{k}");
                return Ok(());
            }
            let id = k["access_key_id"].as_str().unwrap_or("");
            let secret = k["secret_access_key"].as_str().unwrap_or("");
            pktfs_support::outln!("access key id:     {id}");
            pktfs_support::outln!("secret access key: {secret}");
            pktfs_support::outln!("name:              {}", k["name"].as_str().unwrap_or(""));
            pktfs_support::outln!("grants:            {}", grants_text(&k["grants"]));
            if create_buckets {
                pktfs_support::outln!("creates buckets:   yes (and owns them)");
            }
            pktfs_support::outln!(
                "The secret is shown this once (pktfs keys list does not show it). \
                 Use the key with `aws configure`, or:"
            );
            pktfs_support::outln!(
                "  export AWS_ACCESS_KEY_ID={id} AWS_SECRET_ACCESS_KEY='{secret}'"
            );
            pktfs_support::outln!("  aws --endpoint-url http://HOST:PORT s3 ls");
            Ok(())
        }
        KeysWhat::List { image, json } => {
            let l = ask(&image, &json!({"op": "keys_list"}), false, admin::list)?;
            if json {
                pktfs_support::outln!("{l}");
                return Ok(());
            }
            let rows = l.as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                pktfs_support::outln!(
                    "no access keys (pktfs keys add {} NAME --grant BUCKET=rw makes one)",
                    image.display()
                );
                return Ok(());
            }
            pktfs_support::outln!(
                "{:<20}  {:<20}  {:<20}  grants",
                "access key id",
                "created",
                "name"
            );
            for k in &rows {
                pktfs_support::outln!(
                    "{:<20}  {:<20}  {:<20}  {}",
                    k["access_key_id"].as_str().unwrap_or(""),
                    created_text(&k["created_unix_s"]),
                    k["name"].as_str().unwrap_or(""),
                    grants_text(&k["grants"])
                        + if k["create_buckets"].as_bool() == Some(true) {
                            ", creates buckets"
                        } else {
                            ""
                        }
                );
            }
            Ok(())
        }
        KeysWhat::Show {
            image,
            access_key_id: id,
            json,
        } => {
            let req = json!({"op": "keys_show", "access_key_id": id});
            let k = ask(&image, &req, false, |v| admin::show(v, &id))?;
            if json {
                pktfs_support::outln!("{k}");
            } else {
                print_key(&k);
            }
            Ok(())
        }
        KeysWhat::Grant {
            image,
            access_key_id: id,
            grant,
            create_buckets,
        } => change(&image, &id, grant, create_buckets.then_some(true)),
        KeysWhat::Revoke {
            image,
            access_key_id: id,
            bucket,
            create_buckets,
        } => {
            let g = bucket.map(|b| Grant {
                bucket: b,
                read: false,
                write: false,
            });
            change(&image, &id, g, create_buckets.then_some(false))
        }
        KeysWhat::Rm {
            image,
            access_key_id,
            all,
        } => {
            if all {
                let r = ask(
                    &image,
                    &json!({"op": "keys_rm_all"}),
                    true,
                    admin::remove_all,
                )?;
                match r["removed"].as_u64() {
                    Some(n) => pktfs_support::outln!("removed {n} access keys"),
                    None => pktfs_support::outln!("removed the access key store"),
                }
                return Ok(());
            }
            let id = access_key_id.unwrap_or_default();
            let req = json!({"op": "keys_rm", "access_key_id": id});
            let k = ask(&image, &req, true, |v| admin::remove(v, &id))?;
            pktfs_support::outln!(
                "removed access key {} ({})",
                k["access_key_id"].as_str().unwrap_or(&id),
                k["name"].as_str().unwrap_or("")
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_read_as_people_write_them() {
        let g = json!([{"bucket": "logs", "read": true, "write": true},
                       {"bucket": "*", "read": true, "write": false},
                       {"bucket": "in", "read": false, "write": true}]);
        assert_eq!(grants_text(&g), "logs=rw *=r in=w");
        assert_eq!(grants_text(&json!([])), "none");
        assert_eq!(created_text(&json!(0)), "1970-01-01T00:00:00Z");
        assert_eq!(created_text(&json!(-1)), "?");
        assert!(grant_value("logs=rw").is_ok());
        let e = grant_value("logs").unwrap_err();
        assert!(e.contains("BUCKET=rw"), "{e}");
    }
}
