//! `pktfs keys add|list|rm` as a person runs it: on an image nobody holds,
//! and through the control socket of a server or a mount holding it; the
//! keys survive a restart; they are out of reach of every client (a FUSE
//! mount's xattr calls, even as root; a tier snapshot) and of another
//! local user; bad input and a damaged store are clear errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli_common::{mkfs, pktfs, serve, stop, PKTFS};
use crate::fuse_common::{getx, image_path, is_mountpoint, listx};
use crate::prereq;

const MIB: u64 = 1 << 20;

/// A fresh image (on /dev/shm when there is one, so other users can reach
/// its path), removed on drop.
struct Image(PathBuf);

impl Image {
    fn new(tag: &str) -> Image {
        let p = image_path(&format!("keys-{tag}"));
        mkfs(&p, 32 * MIB);
        Image(p)
    }
    fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

#[track_caller]
fn json(o: &Output) -> Value {
    serde_json::from_str(&ok(o)).unwrap()
}

/// `pktfs keys add IMG NAME --grant ... --json`: (id, secret).
#[track_caller]
fn add(img: &str, name: &str, grants: &[&str]) -> (String, String) {
    let mut args = vec!["keys", "add", img, name, "--json"];
    for g in grants {
        args.extend(["--grant", g]);
    }
    let k = json(&pktfs(&args));
    assert_eq!(k["name"], name);
    (
        k["access_key_id"].as_str().unwrap().to_string(),
        k["secret_access_key"].as_str().unwrap().to_string(),
    )
}

#[track_caller]
fn list(img: &str) -> Vec<Value> {
    json(&pktfs(&["keys", "list", img, "--json"]))
        .as_array()
        .unwrap()
        .clone()
}

fn ids(l: &[Value]) -> Vec<&str> {
    l.iter()
        .map(|k| k["access_key_id"].as_str().unwrap())
        .collect()
}

/// The store as the image holds it (the image not in use).
fn stored(img: &Path) -> pktfs_netpath::control::keys::KeyStore {
    let v = pktfs_fs::Volume::open(img, &pktfs_fs::OpenOptions::default()).unwrap();
    let s = pktfs_netpath::control::keys::load(&v).unwrap();
    v.close().unwrap();
    s
}

#[test]
fn add_list_rm_on_an_image_nobody_holds() {
    let img = Image::new("offline");
    assert!(list(img.s()).is_empty());
    let o = pktfs(&["keys", "list", img.s()]);
    assert!(ok(&o).contains("no access keys"), "{}", text(&o.stdout));

    // Text output: the id and secret on their own labelled lines, and how
    // to use them.
    let o = pktfs(&["keys", "add", img.s(), "backup job", "--grant", "logs=rw"]);
    let out = ok(&o);
    let field = |label: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} line in: {out}"))
            .trim()
            .to_string()
    };
    let id = field("access key id:");
    let secret = field("secret access key:");
    assert!(id.starts_with("PK") && id.len() == 20, "{id}");
    assert_eq!(secret.len(), 40, "{secret}");
    assert!(
        out.contains("aws configure") && out.contains("AWS_SECRET_ACCESS_KEY"),
        "{out}"
    );

    let (id2, secret2) = add(img.s(), "reader", &["*=r", "drop=w"]);
    assert_ne!(id, id2);
    assert_ne!(secret, secret2);

    let l = list(img.s());
    assert_eq!(ids(&l), [id.as_str(), id2.as_str()]);
    assert_eq!(l[0]["name"], "backup job");
    assert_eq!(
        l[1]["grants"],
        serde_json::json!([{"bucket": "*", "read": true, "write": false},
                           {"bucket": "drop", "read": false, "write": true}])
    );
    // Never a secret in a listing, text or JSON.
    let t = ok(&pktfs(&["keys", "list", img.s()]));
    let j = ok(&pktfs(&["keys", "list", img.s(), "--json"]));
    for s in [&secret, &secret2] {
        assert!(
            !t.contains(s.as_str()) && !j.contains(s.as_str()),
            "{t}\n{j}"
        );
    }
    assert!(
        t.contains(&id) && t.contains("logs=rw") && t.contains("*=r drop=w"),
        "{t}"
    );

    // The secrets are what the image keeps.
    let s = stored(&img.0);
    assert_eq!(s.get(&id).unwrap().secret, secret);
    assert_eq!(s.get(&id2).unwrap().secret, secret2);

    let o = pktfs(&["keys", "rm", img.s(), &id]);
    assert!(ok(&o).contains(&id), "{}", text(&o.stdout));
    assert_eq!(ids(&list(img.s())), [id2.as_str()]);
    // The image is clean and fsck-clean after all that.
    let v = pktfs_fs::Volume::open(&img.0, &pktfs_fs::OpenOptions::default()).unwrap();
    assert!(v.open_report().was_clean);
    v.close().unwrap();
    let mut pm = pktfs_fs::media::Pm::open(
        &img.0,
        &pktfs_fs::media::MapOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    let rep = pktfs_fsck::check(&mut pm, &pktfs_fsck::Options::check());
    assert!(rep.clean(), "{}", rep.to_text());
}

#[test]
fn bad_input_is_a_clear_error_and_changes_nothing() {
    let img = Image::new("bad");
    let (id, _) = add(img.s(), "kept", &["logs=rw"]);
    for (args, status, want) in [
        (vec!["add", img.s(), "x", "--grant", "logs"], 2, "BUCKET=rw"),
        (
            vec!["add", img.s(), "x", "--grant", "Logs=rw"],
            2,
            "lowercase",
        ),
        (
            vec!["add", img.s(), "x", "--grant", "logs=rwx"],
            2,
            "rw, r or w",
        ),
        (
            vec!["add", img.s(), "", "--grant", "logs=r"],
            1,
            "needs a name",
        ),
        (
            vec![
                "add",
                img.s(),
                "x",
                "--grant",
                "logs=r",
                "--grant",
                "logs=w",
            ],
            1,
            "granted twice",
        ),
        (
            vec!["rm", img.s(), "PKNOSUCHKEY000000000"],
            1,
            "no access key PKNOSUCHKEY",
        ),
        (vec!["rm", img.s()], 2, "ACCESS_KEY_ID"),
        (vec!["list", "/nonexistent/image"], 1, "/nonexistent/image"),
    ] {
        let o = pktfs(&[&["keys"][..], &args].concat());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(status), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert_eq!(ids(&list(img.s())), [id.as_str()]);
}

#[test]
fn a_full_store_is_refused_with_what_to_do() {
    let img = Image::new("full");
    // Fill it through the library (40 processes would be slow), then the
    // command refuses one more.
    let v = pktfs_fs::Volume::open(&img.0, &pktfs_fs::OpenOptions::default()).unwrap();
    for k in 0..pktfs_s3_max_keys() {
        pktfs_netpath::control::keys::add(&v, &format!("k{k}"), &[], false).unwrap();
    }
    v.close().unwrap();
    let o = pktfs(&["keys", "add", img.s(), "one more", "--grant", "logs=r"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("pktfs keys rm"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(list(img.s()).len(), pktfs_s3_max_keys());
}

fn pktfs_s3_max_keys() -> usize {
    pktfs_netpath::control::keys::MAX_KEYS
}

#[test]
fn a_damaged_store_is_an_error_and_rm_all_clears_it() {
    let img = Image::new("damaged");
    let v = pktfs_fs::Volume::open(&img.0, &pktfs_fs::OpenOptions::default()).unwrap();
    v.set_s3_keys_blob(Some(b"{\"version\":1,\"keys\":[{\"id\":\"x\""))
        .unwrap();
    v.close().unwrap();
    for args in [
        vec!["keys", "list", img.s()],
        vec!["keys", "add", img.s(), "n", "--grant", "logs=r"],
    ] {
        let o = pktfs(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("access key store") && err.contains("damaged"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // Over the bound: refused as such.
    let v = pktfs_fs::Volume::open(&img.0, &pktfs_fs::OpenOptions::default()).unwrap();
    v.set_s3_keys_blob(Some(&vec![b' '; 65536])).unwrap();
    v.close().unwrap();
    let o = pktfs(&["keys", "list", img.s()]);
    assert!(text(&o.stderr).contains("damaged"), "{}", text(&o.stderr));
    let o = pktfs(&["keys", "rm", img.s(), "--all"]);
    assert!(ok(&o).contains("removed"), "{}", text(&o.stdout));
    assert!(list(img.s()).is_empty());
    add(img.s(), "fresh", &["logs=rw"]);
    assert_eq!(list(img.s()).len(), 1);
}

/// A served image: every command goes to the server (the image is locked
/// by it, so a local open could not have done it), the changes are durable
/// when the command returns, and they survive the server's restart.
#[test]
fn add_list_rm_through_a_server_and_after_its_restart() {
    let img = Image::new("served");
    let (id0, secret0) = add(img.s(), "before", &["logs=rw"]);
    let (srv, _addr) = serve(&img.0, Stdio::null());
    assert_eq!(ids(&list(img.s())), [id0.as_str()]);
    let (id1, secret1) = add(img.s(), "while served", &["*=r"]);
    let (id2, _) = add(img.s(), "gone soon", &["tmp=w"]);
    ok(&pktfs(&["keys", "rm", img.s(), &id2]));
    assert_eq!(ids(&list(img.s())), [id0.as_str(), id1.as_str()]);
    let o = pktfs(&["keys", "rm", img.s(), &id2]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("no access key"),
        "{}",
        text(&o.stderr)
    );
    // SIGKILL: nothing is closed cleanly, yet every change is there.
    let mut srv = srv;
    srv.kill().unwrap();
    srv.wait().unwrap();
    let s = stored(&img.0);
    assert_eq!(s.len(), 2);
    assert_eq!(s.get(&id0).unwrap().secret, secret0);
    assert_eq!(s.get(&id1).unwrap().secret, secret1);
    assert!(s.get(&id2).is_none());
    // And a server started again sees them.
    let (srv, _) = serve(&img.0, Stdio::null());
    assert_eq!(ids(&list(img.s())), [id0.as_str(), id1.as_str()]);
    stop(srv);
}

/// Another local user asking a server that runs as root: refused by the
/// holder before it reads the request, and told nothing about the keys.
#[test]
fn another_user_is_refused_and_learns_nothing() {
    require!(
        prereq::root(),
        prereq::tool("runuser"),
        prereq::user("nobody")
    );
    let probe = Command::new("runuser")
        .args(["-u", "nobody", "--", PKTFS, "--version"])
        .output()
        .unwrap();
    require!(prereq::holds(probe.status.success(), || format!(
        "user `nobody` cannot run {PKTFS} (every directory above it must be searchable by \
         others: chmod o+x)"
    )));
    let img = Image::new("stranger");
    let (id, secret) = add(img.s(), "private name", &["logs=rw"]);
    let (srv, _) = serve(&img.0, Stdio::null());
    for args in [
        vec!["keys", "list", img.s(), "--json"],
        vec!["keys", "add", img.s(), "intruder", "--grant", "*=rw"],
        vec!["keys", "rm", img.s(), id.as_str()],
        vec!["keys", "rm", img.s(), "--all"],
    ] {
        let o = Command::new("runuser")
            .args(["-u", "nobody", "--", PKTFS])
            .args(&args)
            .output()
            .unwrap();
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {out} {err}");
        assert!(
            err.contains("may not control this image"),
            "{args:?}: {err}"
        );
        for secret_thing in [id.as_str(), secret.as_str(), "private name"] {
            assert!(
                !out.contains(secret_thing) && !err.contains(secret_thing),
                "{args:?} showed {secret_thing}: {out} {err}"
            );
        }
    }
    assert_eq!(ids(&list(img.s())), [id.as_str()]);
    stop(srv);
    assert_eq!(stored(&img.0).len(), 1);
}

fn mount_daemons(image: &Path) -> usize {
    let want = image.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.contains(&&b"--daemon-child"[..]) && args.contains(&want.as_bytes())
            })
        })
        .count()
}

/// Through a FUSE mount (root, so every permission check passes): the
/// keys are managed through the mount's control socket, and no xattr call
/// on the root directory sees, changes or removes them.
#[test]
fn a_mount_shows_no_xattr_of_the_keys_even_to_root() {
    require!(prereq::fuse(), prereq::root());
    let img = Image::new("mount");
    let mnt = tempfile::Builder::new()
        .prefix("pktfs-keys-")
        .tempdir()
        .unwrap();
    let mp = mnt.path();
    let o = Command::new(PKTFS)
        .args(["mount", img.s()])
        .arg(mp)
        .output()
        .unwrap();
    ok(&o);
    assert!(is_mountpoint(mp));
    let (id, secret) = add(img.s(), "via the mount", &["logs=rw"]);
    assert_eq!(ids(&list(img.s())), [id.as_str()]);
    rustix::fs::setxattr(mp, "user.visible", b"v", rustix::fs::XattrFlags::empty()).unwrap();

    let names = listx(mp).unwrap();
    assert_eq!(names, b"user.visible\0", "{}", text(&names));
    for name in ["pktfs.s3.keys", "pktfs.anything", "trusted.pktfs.s3.keys"] {
        let e = getx(mp, name).unwrap_err();
        assert_eq!(e, rustix::io::Errno::NODATA, "getxattr {name}");
        let e = rustix::fs::removexattr(mp, name).unwrap_err();
        assert_eq!(e, rustix::io::Errno::NODATA, "removexattr {name}");
    }
    for flags in [
        rustix::fs::XattrFlags::empty(),
        rustix::fs::XattrFlags::CREATE,
        rustix::fs::XattrFlags::REPLACE,
    ] {
        let e = rustix::fs::setxattr(mp, "pktfs.s3.keys", b"{}", flags).unwrap_err();
        assert_eq!(e, rustix::io::Errno::NOTSUP, "setxattr {flags:?}");
    }
    // Nothing under the mount holds the secret either.
    let o = Command::new("grep")
        .args(["-rlF", &secret])
        .arg(mp)
        .output()
        .unwrap();
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));

    let st = Command::new("umount").arg(mp).status().unwrap();
    assert!(st.success());
    let t = Instant::now();
    while mount_daemons(&img.0) > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the daemon did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = stored(&img.0);
    assert_eq!(s.get(&id).unwrap().secret, secret);
}

/// A tier snapshot (what is uploaded to the object store) captures the
/// root's xattrs through the client API: the keys are not in it.
#[test]
fn a_tier_snapshot_does_not_carry_the_secrets() {
    let img = Image::new("snapshot");
    let (_, secret) = add(img.s(), "snapshot", &["logs=rw"]);
    let v = pktfs_fs::Volume::open(&img.0, &pktfs_fs::OpenOptions::default()).unwrap();
    v.setxattr(
        v.root(),
        b"user.kept",
        b"yes",
        pktfs_fs::XattrFlags::default(),
    )
    .unwrap();
    let snap = pktfs_tier::snapshot::capture(&v, 1).unwrap();
    v.close().unwrap();
    let hit = snap
        .bytes
        .windows(secret.len())
        .any(|w| w == secret.as_bytes());
    assert!(!hit, "the secret is in the snapshot");
    let parsed = pktfs_tier::snapshot::parse(&snap.bytes).unwrap();
    let root = parsed.inodes.iter().find(|i| i.ino == parsed.root).unwrap();
    let names: Vec<&[u8]> = root.xattrs.iter().map(|(n, _)| n.as_slice()).collect();
    assert_eq!(names, [&b"user.kept"[..]]);
}
