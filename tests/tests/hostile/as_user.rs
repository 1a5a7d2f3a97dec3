//! HTTP requests act as one identity (`Config::as_user`, `--as-user`) and
//! are checked against modes and POSIX ACLs as the kernel checks that user
//! on the mount: another user's 0600 file, a directory without search or
//! write, a sticky directory, named-user and named-group ACL entries and
//! the mask. Refusals are 403 naming the path and what is missing, and
//! store nothing; what the identity creates is its own. On a thread per
//! connection and on the event loops (the upload path differs).

use pktfs_fs::{Cred, FileType, SetAttr, Volume, XattrFlags};

use crate::net_common::{http, server, Conn, Server};

/// The identity the server acts as in these tests (no such local user is
/// needed in process): uid 5000, gid 5000, also in group 6000.
const ME: u32 = 5000;
const MY_OTHER_GROUP: u32 = 6000;
/// Someone else.
const THEM: u32 = 7;

const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NONE: u32 = u32::MAX;

fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(t, p, id) in entries {
        v.extend_from_slice(&t.to_le_bytes());
        v.extend_from_slice(&p.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

fn chmod(v: &Volume, ino: u64, mode: u32) {
    let s = SetAttr {
        mode: Some(mode),
        ..Default::default()
    };
    v.setattr(ino, &s).unwrap();
}

fn file(v: &Volume, dir: u64, name: &str, mode: u32, uid: u32, gid: u32) -> u64 {
    let ino = v.create(dir, name.as_bytes(), mode, uid, gid).unwrap().ino;
    v.write(ino, 0, name.as_bytes()).unwrap();
    ino
}

fn set_acl(v: &Volume, ino: u64, kind: &str, entries: &[(u16, u16, u32)]) {
    let name = format!("system.posix_acl_{kind}");
    v.setxattr(ino, name.as_bytes(), &acl(entries), XattrFlags::default())
        .unwrap();
}

/// The tree every scenario starts from (root 0755, owned by root).
fn populate(v: &Volume) {
    let r = v.root();
    file(v, r, "secret", 0o600, THEM, THEM);
    file(v, r, "mine", 0o600, ME, ME);
    file(v, r, "public", 0o644, THEM, THEM);
    let closed = v.mkdir(r, b"closed", 0o700, THEM, THEM).unwrap().ino;
    file(v, closed, "f", 0o644, THEM, THEM);
    let ro = v.mkdir(r, b"ro", 0o555, THEM, THEM).unwrap().ino;
    file(v, ro, "f", 0o666, ME, ME);
    let tmp = v.mkdir(r, b"tmp", 0o777, THEM, THEM).unwrap().ino;
    chmod(v, tmp, 0o1777);
    file(v, tmp, "theirs", 0o666, 8, 8);
    let open = v.mkdir(r, b"open", 0o777, THEM, THEM).unwrap().ino;
    file(v, open, "theirs", 0o600, 8, 8);
    let sg = v.mkdir(r, b"sg", 0o777, THEM, 77).unwrap().ino;
    chmod(v, sg, 0o2777);
    let def = v.mkdir(r, b"def", 0o777, THEM, THEM).unwrap().ino;
    set_acl(
        v,
        def,
        "default",
        &[
            (USER_OBJ, 7, NONE),
            (USER, 5, 1234),
            (GROUP_OBJ, 5, NONE),
            (MASK, 7, NONE),
            (OTHER, 0, NONE),
        ],
    );
    // A named-user entry granting read, with a mask that lets it through.
    let a = file(v, r, "acl-user", 0o640, THEM, THEM);
    set_acl(
        v,
        a,
        "access",
        &[
            (USER_OBJ, 6, NONE),
            (USER, 4, ME),
            (GROUP_OBJ, 0, NONE),
            (MASK, 4, NONE),
            (OTHER, 0, NONE),
        ],
    );
    // The same entry, but the mask (--x) takes the read away.
    let m = file(v, r, "acl-masked", 0o610, THEM, THEM);
    set_acl(
        v,
        m,
        "access",
        &[
            (USER_OBJ, 6, NONE),
            (USER, 4, ME),
            (GROUP_OBJ, 0, NONE),
            (MASK, 1, NONE),
            (OTHER, 0, NONE),
        ],
    );
    // A named group the identity is in (supplementary).
    let g = file(v, r, "acl-group", 0o640, THEM, THEM);
    set_acl(
        v,
        g,
        "access",
        &[
            (USER_OBJ, 6, NONE),
            (GROUP_OBJ, 0, NONE),
            (GROUP, 4, MY_OTHER_GROUP),
            (MASK, 4, NONE),
            (OTHER, 0, NONE),
        ],
    );
    // Readable but not searchable: names only.
    let list = v.mkdir(r, b"list", 0o744, THEM, THEM).unwrap().ino;
    file(v, list, "entry", 0o644, THEM, THEM);
}

fn start(mode: &str, who: Cred) -> Server {
    let s = server(64 << 20, |c| {
        c.io = mode.parse().unwrap();
        c.as_user = who;
    });
    populate(&s.vol);
    s
}

fn me() -> Cred {
    Cred::new(ME, ME, [MY_OTHER_GROUP])
}

/// `status` for `method path`, and for a 403 a body naming the path and
/// the missing bit.
#[track_caller]
fn expect(s: &Server, method: &str, path: &str, body: &[u8], status: u16, names: &[&str]) {
    let r = http(s.http, method, path, &[], body);
    let text = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(r.status, status, "{method} {path}: {text}");
    for n in names {
        assert!(text.contains(n), "{method} {path}: {n:?} not in {text:?}");
    }
}

fn as_a_user(mode: &str) {
    let s = start(mode, me());
    // Another user's 0600 file: 403 on GET and HEAD; one's own: 200.
    expect(
        &s,
        "GET",
        "/secret",
        b"",
        403,
        &["/secret", "read (r)", "uid 5000"],
    );
    assert_eq!(http(s.http, "HEAD", "/secret", &[], b"").status, 403);
    expect(&s, "GET", "/mine", b"", 200, &["mine"]);
    expect(&s, "GET", "/public", b"", 200, &["public"]);
    // A directory without search: nothing under it, whatever exists.
    expect(
        &s,
        "GET",
        "/closed/f",
        b"",
        403,
        &["search (x)", "on /closed"],
    );
    expect(&s, "GET", "/closed/absent", b"", 403, &["search (x)"]);
    expect(&s, "GET", "/closed", b"", 403, &["read (r)"]);
    expect(
        &s,
        "PUT",
        "/closed/new",
        b"x",
        403,
        &["write and search (wx)", "on /closed"],
    );
    expect(&s, "PUT", "/closed/sub/new", b"x", 403, &["search (x)"]);
    expect(&s, "DELETE", "/closed/f", b"", 403, &["search (x)"]);
    assert!(s.lookup("/closed/new").is_none() && s.lookup("/closed/sub").is_none());
    assert!(s.lookup("/closed/f").is_some());
    // A 0555 directory: no new names, no removal, no replacement (even of
    // a file the identity owns and may write).
    expect(
        &s,
        "PUT",
        "/ro/new",
        b"data",
        403,
        &["/ro/new", "write (w)", "on /ro"],
    );
    expect(
        &s,
        "PUT",
        "/ro/sub/new",
        b"data",
        403,
        &["write (w)", "on /ro"],
    );
    expect(&s, "PUT", "/ro/f", b"data", 403, &["write (w)"]);
    expect(&s, "DELETE", "/ro/f", b"", 403, &["write (w)"]);
    assert!(s.lookup("/ro/new").is_none() && s.lookup("/ro/sub").is_none());
    assert_eq!(s.read("/ro/f").unwrap(), b"f", "not replaced");
    // A missing name in it is 404 first, as unlink(2) says ENOENT.
    expect(&s, "DELETE", "/ro/absent", b"", 404, &[]);
    // A large body is refused before it is read: the answer comes, the
    // connection closes, nothing is stored.
    let mut c = Conn::new(s.http);
    c.send(b"PUT /ro/big HTTP/1.1\r\nHost: t\r\nContent-Length: 1048576\r\n\r\n");
    let r = c.response(false).expect("answered before the body is sent");
    assert_eq!(r.status, 403);
    assert!(
        c.closed_by_server(),
        "the body is not read: the connection ends"
    );
    assert!(s.lookup("/ro/big").is_none());
    // Sticky /tmp: creating is fine, removing or replacing another user's
    // file is not; one's own is.
    expect(&s, "DELETE", "/tmp/theirs", b"", 403, &["/tmp is sticky"]);
    expect(&s, "PUT", "/tmp/theirs", b"mine now", 403, &["sticky"]);
    assert_eq!(s.read("/tmp/theirs").unwrap(), b"theirs");
    expect(&s, "PUT", "/tmp/mine", b"hello", 201, &[]);
    expect(&s, "PUT", "/tmp/mine", b"again", 204, &[]);
    expect(&s, "DELETE", "/tmp/mine", b"", 204, &[]);
    // Not sticky: another user's file in a writable directory may be
    // replaced and removed (its own mode is not asked, as rename(2)).
    expect(&s, "PUT", "/open/theirs", b"replaced", 204, &[]);
    expect(&s, "DELETE", "/open/theirs", b"", 204, &[]);
    // ACLs: a named user entry grants read; the mask takes it away; a
    // named group the identity is in grants read.
    expect(&s, "GET", "/acl-user", b"", 200, &["acl-user"]);
    expect(&s, "GET", "/acl-masked", b"", 403, &["read (r)"]);
    expect(&s, "GET", "/acl-group", b"", 200, &["acl-group"]);
    // A listing needs read; its entries' attributes need search too.
    expect(&s, "GET", "/", b"", 200, &["secret"]);
    let r = http(
        s.http,
        "GET",
        "/list",
        &[("Accept", "application/json")],
        b"",
    );
    assert_eq!(r.status, 200);
    let j: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(j[0]["name"], "entry");
    assert!(j[0]["size"].is_null() && j[0]["etag"].is_null(), "{j}");
    let r = http(s.http, "GET", "/", &[("Accept", "application/json")], b"");
    let j: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert!(j.as_array().unwrap().iter().all(|e| !e["size"].is_null()));
    expect(
        &s,
        "GET",
        "/list/entry",
        b"",
        403,
        &["search (x)", "on /list"],
    );
    // What the identity creates is its own: files and the directories a
    // PUT makes; a setgid directory gives its group; a default ACL is
    // inherited.
    expect(&s, "PUT", "/open/a/b/new.txt", b"n", 201, &[]);
    for p in ["/open/a", "/open/a/b", "/open/a/b/new.txt"] {
        let a = s.lookup(p).unwrap();
        assert_eq!((a.uid, a.gid), (ME, ME), "{p}");
    }
    assert_eq!(s.lookup("/open/a").unwrap().perm, 0o755);
    expect(&s, "PUT", "/sg/f", b"g", 201, &[]);
    let a = s.lookup("/sg/f").unwrap();
    assert_eq!((a.uid, a.gid), (ME, 77));
    expect(&s, "PUT", "/def/f", b"d", 201, &[]);
    expect(&s, "PUT", "/def/d/f", b"d", 201, &[]);
    for p in ["/def/f", "/def/d/f"] {
        let a = s.lookup(p).unwrap();
        let got = s
            .vol
            .getxattr(a.ino, b"system.posix_acl_access")
            .unwrap_or_else(|e| panic!("{p}: no inherited ACL ({e})"));
        assert!(
            pktfs_fs::Acl::parse(&got)
                .unwrap()
                .unwrap()
                .entries()
                .iter()
                .any(|e| e.tag == USER && e.id == 1234),
            "{p}"
        );
        assert_eq!(a.uid, ME);
    }
    assert_eq!(s.lookup("/def/d").unwrap().kind, FileType::Directory);
    s.check();
}

fn as_root(mode: &str) {
    let s = start(mode, Cred::root());
    expect(&s, "GET", "/secret", b"", 200, &["secret"]);
    expect(&s, "GET", "/closed/f", b"", 200, &["f"]);
    expect(&s, "GET", "/acl-masked", b"", 200, &[]);
    expect(&s, "PUT", "/ro/new", b"r", 201, &[]);
    expect(&s, "PUT", "/closed/sub/new", b"r", 201, &[]);
    expect(&s, "DELETE", "/tmp/theirs", b"", 204, &[]);
    let a = s.lookup("/ro/new").unwrap();
    assert_eq!((a.uid, a.gid), (0, 0));
    s.check();
}

#[test]
fn as_a_user_threads() {
    as_a_user("threads");
}

#[test]
fn as_a_user_event_loops() {
    as_a_user("auto");
}

#[test]
fn as_root_everything_is_allowed() {
    as_root("threads");
    as_root("auto");
}
