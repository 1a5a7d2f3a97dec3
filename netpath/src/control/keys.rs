//! The S3 access keys of an image, managed through its holder or on an
//! image nobody holds (`pktfs keys`): one set of functions for both, so
//! `pktfs keys add` does the same whichever way it reaches the Volume.
//!
//! Requests: `{"op":"keys_list"}`, `{"op":"keys_add","name":N,
//! "grants":["logs=rw",...],"create_buckets":BOOL}`,
//! `{"op":"keys_show","access_key_id":ID}` (the key and the buckets it
//! owns), `{"op":"keys_grant","access_key_id":ID,"grant":"logs=rw"}` or
//! `...,"revoke":"logs"}`, `{"op":"keys_create_buckets",
//! "access_key_id":ID,"allowed":BOOL}`, `{"op":"keys_rm",
//! "access_key_id":ID}`, `{"op":"keys_rm_all"}`. Only a trusted peer gets here (root, the image
//! file's owner, or the holder's own user: [`super::peer::Trust`], checked
//! before a request is read); each of them could open the image file and
//! read the store anyway. Only `keys_add` answers with a secret, once: the
//! new key's. Every change is logged without its secret.

use pktfs_fs::{FileType, FsError, Volume, S3_OWNER_XATTR};
pub use pktfs_s3::keys::{AccessKey, Grant, KeyStore, KeysError, MAX_KEYS};
use serde_json::{json, Value};

/// Why a key operation failed: each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum KeyAdminError {
    #[error("{0}")]
    Keys(#[from] KeysError),
    #[error("the image's access key store: {0}")]
    Fs(#[from] FsError),
    #[error("no random bytes from the OS for a new key: {0}")]
    Random(String),
    #[error("bad request: {0}")]
    Request(String),
}

/// How many times `add` draws new random bytes when a new id is taken (it
/// never is, short of a broken RNG).
const ADD_TRIES: usize = 3;

/// The image's key store (empty when it has none).
pub fn load(vol: &Volume) -> Result<KeyStore, KeyAdminError> {
    decode(vol.s3_keys_blob()?.as_deref())
}

fn decode(blob: Option<&[u8]>) -> Result<KeyStore, KeyAdminError> {
    Ok(match blob {
        Some(b) => KeyStore::decode(b)?,
        None => KeyStore::new(),
    })
}

fn grants_json(grants: &[Grant]) -> Value {
    grants
        .iter()
        .map(|g| json!({"bucket": g.bucket, "read": g.read, "write": g.write}))
        .collect()
}

/// A key as `pktfs keys list` shows it: never its secret.
fn public_json(k: &AccessKey) -> Value {
    json!({
        "access_key_id": k.id,
        "name": k.name,
        "grants": grants_json(&k.grants),
        "create_buckets": k.create_buckets,
        "created_unix_s": k.created_unix_s,
    })
}

/// Every key, oldest first, without secrets.
pub fn list(vol: &Volume) -> Result<Value, KeyAdminError> {
    Ok(load(vol)?.keys().iter().map(public_json).collect())
}

fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Make a key (one that may create buckets, which it then owns, when
/// `create_buckets`), store it (durable on return) and answer it with its
/// secret: `{"access_key_id","secret_access_key","name","grants",
/// "create_buckets","created_unix_s"}`.
pub fn add(
    vol: &Volume,
    name: &str,
    grants: &[Grant],
    create_buckets: bool,
) -> Result<Value, KeyAdminError> {
    let mut made: Option<AccessKey> = None;
    vol.update_s3_keys_blob(|now| {
        let mut store = decode(now)?;
        let mut tries = 0;
        let key = loop {
            let mut random = [0u8; 64];
            getrandom::fill(&mut random).map_err(|e| KeyAdminError::Random(e.to_string()))?;
            match store.add(name, grants.to_vec(), &random, now_unix_s()) {
                Err(KeysError::IdTaken(_)) if tries + 1 < ADD_TRIES => tries += 1,
                r => break r?.id.clone(),
            }
        };
        let key = store.set_create_buckets(&key, create_buckets)?.clone();
        made = Some(key);
        Ok::<_, KeyAdminError>(Some(store.encode()))
    })?;
    let k = made.ok_or_else(|| KeyAdminError::Request("no key was made".into()))?;
    let mut v = public_json(&k);
    v["secret_access_key"] = json!(k.secret);
    Ok(v)
}

/// Have `key` in the image (durable on return), with its id and secret as
/// they are: false when it was there already with the same secret, true
/// when it was added now. Another key of the same id is refused
/// ([`KeysError::IdTaken`]) and nothing changes.
pub fn bring(vol: &Volume, key: &AccessKey) -> Result<bool, KeyAdminError> {
    if load(vol)?
        .get(&key.id)
        .is_some_and(|k| k.secret == key.secret)
    {
        return Ok(false);
    }
    vol.update_s3_keys_blob(|now| {
        let mut store = decode(now)?;
        store.import(key.clone())?;
        Ok::<_, KeyAdminError>(Some(store.encode()))
    })?;
    tracing::info!(
        "access key {} ({:?}) brought to this image",
        key.id,
        key.name
    );
    Ok(true)
}

/// The key `access_key_id` without its secret, and `"owns"`: the buckets
/// it owns (the top-level directories whose S3 owner it is).
pub fn show(vol: &Volume, access_key_id: &str) -> Result<Value, KeyAdminError> {
    let store = load(vol)?;
    let k = store
        .get(access_key_id)
        .ok_or_else(|| KeysError::NoSuchKey(access_key_id.to_string()))?;
    let mut v = public_json(k);
    v["owns"] = json!(owned_buckets(vol, access_key_id)?);
    Ok(v)
}

/// The top-level directories whose S3 owner is `access_key_id`, by name.
pub fn owned_buckets(vol: &Volume, access_key_id: &str) -> Result<Vec<String>, KeyAdminError> {
    let mut out = Vec::new();
    for e in vol.list_dir(vol.root())? {
        if e.kind != FileType::Directory {
            continue;
        }
        let owner = vol.system_xattr(e.ino, S3_OWNER_XATTR)?;
        if owner.as_deref() == Some(access_key_id.as_bytes()) {
            out.push(String::from_utf8_lossy(&e.name).into_owned());
        }
    }
    Ok(out)
}

/// Change one key (durable on return) and answer it as it now is, without
/// its secret.
fn change(
    vol: &Volume,
    access_key_id: &str,
    f: impl FnOnce(&mut KeyStore) -> Result<(), KeysError>,
) -> Result<Value, KeyAdminError> {
    let mut now: Option<AccessKey> = None;
    vol.update_s3_keys_blob(|blob| {
        let mut store = decode(blob)?;
        f(&mut store)?;
        now = store.get(access_key_id).cloned();
        Ok::<_, KeyAdminError>(Some(store.encode()))
    })?;
    let k = now.ok_or_else(|| KeysError::NoSuchKey(access_key_id.to_string()))?;
    Ok(public_json(&k))
}

/// Give a key a grant on a bucket (or `*`), replacing the one it had
/// there; a grant of neither read nor write takes it away.
pub fn grant(vol: &Volume, access_key_id: &str, g: Grant) -> Result<Value, KeyAdminError> {
    change(vol, access_key_id, |s| {
        s.set_grant(access_key_id, g).map(|_| ())
    })
}

/// Let a key create buckets, or not (the buckets it owns stay its own).
pub fn set_create_buckets(
    vol: &Volume,
    access_key_id: &str,
    allowed: bool,
) -> Result<Value, KeyAdminError> {
    change(vol, access_key_id, |s| {
        s.set_create_buckets(access_key_id, allowed).map(|_| ())
    })
}

/// Remove one key (durable on return); answers it without its secret.
pub fn remove(vol: &Volume, access_key_id: &str) -> Result<Value, KeyAdminError> {
    let mut gone: Option<AccessKey> = None;
    vol.update_s3_keys_blob(|now| {
        let mut store = decode(now)?;
        gone = Some(store.remove(access_key_id)?);
        // The last key gone: no store at all, as before the first.
        Ok::<_, KeyAdminError>((!store.is_empty()).then(|| store.encode()))
    })?;
    let k = gone.ok_or_else(|| KeyAdminError::Request("no key was removed".into()))?;
    Ok(public_json(&k))
}

/// Remove every key, whatever the store holds: also the way out of a
/// store that no longer decodes (damaged, or of an unknown version).
/// Answers how many keys were known to be removed (`null`: the store did
/// not decode).
pub fn remove_all(vol: &Volume) -> Result<Value, KeyAdminError> {
    let known = match vol.s3_keys_blob() {
        Ok(b) => decode(b.as_deref()).ok().map(|s| s.len()),
        Err(_) => None,
    };
    vol.set_s3_keys_blob(None)?;
    Ok(json!({ "removed": known }))
}

/// Answer a `keys_*` control request from `who` (a process, as the log
/// names it); changes are logged, without secrets.
pub(crate) fn serve_op(vol: &Volume, req: &Value, who: &str) -> Result<Value, String> {
    let op = req["op"].as_str();
    let r = match op {
        Some("keys_list") => list(vol),
        Some("keys_add") => {
            parse_add(req).and_then(|(name, grants, create)| add(vol, &name, &grants, create))
        }
        Some("keys_show") => key_id(req).and_then(|id| show(vol, id)),
        Some("keys_grant") => key_id(req).and_then(|id| grant(vol, id, parse_grant(req)?)),
        Some("keys_create_buckets") => key_id(req).and_then(|id| match req["allowed"].as_bool() {
            Some(a) => set_create_buckets(vol, id, a),
            None => Err(KeyAdminError::Request(
                "keys_create_buckets needs \"allowed\": true or false".into(),
            )),
        }),
        Some("keys_rm") => match req["access_key_id"].as_str() {
            Some(id) => remove(vol, id),
            None => Err(KeyAdminError::Request(
                "keys_rm needs an \"access_key_id\"".into(),
            )),
        },
        Some("keys_rm_all") => remove_all(vol),
        op => Err(KeyAdminError::Request(format!("unknown keys op {op:?}"))),
    };
    match (&r, op) {
        (Ok(k), Some("keys_add")) => tracing::info!(
            "access key {} ({}) added by {who}",
            k["access_key_id"].as_str().unwrap_or("?"),
            k["name"]
        ),
        (Ok(k), Some("keys_rm")) => tracing::info!(
            "access key {} ({}) removed by {who}",
            k["access_key_id"].as_str().unwrap_or("?"),
            k["name"]
        ),
        (Ok(k), Some("keys_grant" | "keys_create_buckets")) => tracing::info!(
            "access key {} ({}) changed by {who}: grants {}, create buckets {}",
            k["access_key_id"].as_str().unwrap_or("?"),
            k["name"],
            k["grants"],
            k["create_buckets"]
        ),
        (Ok(_), Some("keys_rm_all")) => tracing::info!("every access key removed by {who}"),
        _ => {}
    }
    r.map_err(|e| e.to_string())
}

fn key_id(req: &Value) -> Result<&str, KeyAdminError> {
    req["access_key_id"].as_str().ok_or_else(|| {
        KeyAdminError::Request(format!(
            "{} needs an \"access_key_id\"",
            req["op"].as_str().unwrap_or("the request")
        ))
    })
}

/// `"grant": "logs=rw"`, or `"revoke": "logs"` (a grant of nothing).
fn parse_grant(req: &Value) -> Result<Grant, KeyAdminError> {
    match (req["grant"].as_str(), req["revoke"].as_str()) {
        (Some(g), None) => Ok(g.parse::<Grant>()?),
        (None, Some(b)) => Ok(Grant {
            bucket: b.to_string(),
            read: false,
            write: false,
        }),
        _ => Err(KeyAdminError::Request(
            "keys_grant needs one of \"grant\": \"BUCKET=rw|r|w\" or \"revoke\": \"BUCKET\"".into(),
        )),
    }
}

fn parse_add(req: &Value) -> Result<(String, Vec<Grant>, bool), KeyAdminError> {
    let name = req["name"]
        .as_str()
        .ok_or_else(|| KeyAdminError::Request("keys_add needs a \"name\"".into()))?;
    let grants = match &req["grants"] {
        Value::Null => Vec::new(),
        Value::Array(a) => a
            .iter()
            .map(|g| {
                g.as_str()
                    .ok_or_else(|| {
                        KeyAdminError::Request("a grant is a string, e.g. \"logs=rw\"".into())
                    })
                    .and_then(|s| Ok(s.parse::<Grant>()?))
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(KeyAdminError::Request(
                "\"grants\" is a list of strings, e.g. [\"logs=rw\"]".into(),
            ))
        }
    };
    let create = match &req["create_buckets"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => {
            return Err(KeyAdminError::Request(
                "\"create_buckets\" is true or false".into(),
            ))
        }
    };
    Ok((name.to_string(), grants, create))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(v: &Volume, req: &Value) -> Result<Value, String> {
        serve_op(v, req, "a test")
    }

    fn vol() -> Volume {
        Volume::in_memory(pktfs_layout::GeometryParams::for_size(8 << 20)).unwrap()
    }

    #[test]
    fn add_list_remove_through_requests() {
        let v = vol();
        assert_eq!(ask(&v, &json!({"op": "keys_list"})).unwrap(), json!([]));
        let k = ask(
            &v,
            &json!({"op": "keys_add", "name": "ci", "grants": ["logs=rw", "*=r"]}),
        )
        .unwrap();
        let id = k["access_key_id"].as_str().unwrap().to_string();
        let secret = k["secret_access_key"].as_str().unwrap().to_string();
        assert_eq!(secret.len(), 40);
        assert_eq!(
            k["grants"],
            json!([{"bucket": "logs", "read": true, "write": true},
                   {"bucket": "*", "read": true, "write": false}])
        );
        let l = ask(&v, &json!({"op": "keys_list"})).unwrap();
        assert_eq!(l.as_array().unwrap().len(), 1);
        assert_eq!(l[0]["access_key_id"], json!(id));
        assert!(!l.to_string().contains(&secret), "list shows a secret: {l}");
        assert_eq!(load(&v).unwrap().get(&id).unwrap().secret, secret);
        let r = ask(&v, &json!({"op": "keys_rm", "access_key_id": id})).unwrap();
        assert_eq!(r["name"], "ci");
        assert_eq!(
            v.s3_keys_blob().unwrap(),
            None,
            "the last key leaves no store"
        );
        let e = ask(&v, &json!({"op": "keys_rm", "access_key_id": id})).unwrap_err();
        assert!(e.contains("no access key"), "{e}");
    }

    #[test]
    fn bad_requests_are_clear_errors() {
        let v = vol();
        for (req, want) in [
            (json!({"op": "keys_add"}), "needs a \"name\""),
            (
                json!({"op": "keys_add", "name": "x", "grants": "logs=rw"}),
                "list of strings",
            ),
            (
                json!({"op": "keys_add", "name": "x", "grants": [1]}),
                "a grant is a string",
            ),
            (
                json!({"op": "keys_add", "name": "x", "grants": ["logs"]}),
                "bad grant",
            ),
            (
                json!({"op": "keys_add", "name": "", "grants": []}),
                "bad key name",
            ),
            (json!({"op": "keys_rm"}), "needs an \"access_key_id\""),
            (json!({"op": "keys_frob"}), "unknown keys op"),
        ] {
            let e = ask(&v, &req).unwrap_err();
            assert!(e.contains(want), "{req}: {e}");
        }
        assert_eq!(
            v.s3_keys_blob().unwrap(),
            None,
            "a refused add stores nothing"
        );
    }

    #[test]
    fn grant_revoke_create_buckets_and_show_with_what_it_owns() {
        let v = vol();
        let k = ask(
            &v,
            &json!({"op": "keys_add", "name": "team", "create_buckets": true}),
        )
        .unwrap();
        assert_eq!(k["create_buckets"], json!(true));
        let id = k["access_key_id"].as_str().unwrap().to_string();
        // A bucket it made (its directory born with the owner) and one
        // made otherwise.
        let root = v.root();
        v.mkdir_with_system_xattr(root, b"mine", 0o755, 0, 0, S3_OWNER_XATTR, id.as_bytes())
            .unwrap();
        v.mkdir(root, b"other", 0o755, 0, 0).unwrap();
        let s = ask(&v, &json!({"op": "keys_show", "access_key_id": id})).unwrap();
        assert_eq!(s["owns"], json!(["mine"]));
        assert!(s.get("secret_access_key").is_none(), "{s}");
        let g = ask(
            &v,
            &json!({"op": "keys_grant", "access_key_id": id, "grant": "other=r"}),
        )
        .unwrap();
        assert_eq!(
            g["grants"],
            json!([{"bucket": "other", "read": true, "write": false}])
        );
        let g = ask(
            &v,
            &json!({"op": "keys_grant", "access_key_id": id, "revoke": "other"}),
        )
        .unwrap();
        assert_eq!(g["grants"], json!([]));
        let c = ask(
            &v,
            &json!({"op": "keys_create_buckets", "access_key_id": id, "allowed": false}),
        )
        .unwrap();
        assert_eq!(c["create_buckets"], json!(false));
        assert!(!load(&v).unwrap().get(&id).unwrap().create_buckets);
        for (req, want) in [
            (json!({"op": "keys_show"}), "needs an \"access_key_id\""),
            (
                json!({"op": "keys_grant", "access_key_id": id}),
                "one of \"grant\"",
            ),
            (
                json!({"op": "keys_grant", "access_key_id": id, "grant": "x"}),
                "BUCKET=rw",
            ),
            (
                json!({"op": "keys_create_buckets", "access_key_id": id}),
                "\"allowed\"",
            ),
            (
                json!({"op": "keys_show", "access_key_id": "PKNOSUCHKEY000000000"}),
                "no access key",
            ),
            (
                json!({"op": "keys_add", "name": "n", "create_buckets": "yes"}),
                "true or false",
            ),
        ] {
            let e = ask(&v, &req).unwrap_err();
            assert!(e.contains(want), "{req}: {e}");
        }
    }

    #[test]
    fn a_store_that_does_not_decode_is_named_and_can_be_cleared() {
        let v = vol();
        v.set_s3_keys_blob(Some(b"{\"version\":9,\"keys\":[]}"))
            .unwrap();
        let e = ask(&v, &json!({"op": "keys_list"})).unwrap_err();
        assert!(e.contains("version 9"), "{e}");
        let e = ask(&v, &json!({"op": "keys_add", "name": "n"})).unwrap_err();
        assert!(e.contains("version 9"), "{e}");
        let r = ask(&v, &json!({"op": "keys_rm_all"})).unwrap();
        assert_eq!(r["removed"], Value::Null);
        assert_eq!(ask(&v, &json!({"op": "keys_list"})).unwrap(), json!([]));
    }

    #[test]
    fn a_full_store_refuses_one_more() {
        let v = vol();
        for k in 0..pktfs_s3::keys::MAX_KEYS {
            add(&v, &format!("k{k}"), &[], false).unwrap();
        }
        let e = add(&v, "one more", &[], false).unwrap_err();
        assert!(e.to_string().contains("pktfs keys rm"), "{e}");
        assert_eq!(load(&v).unwrap().len(), pktfs_s3::keys::MAX_KEYS);
    }
}
