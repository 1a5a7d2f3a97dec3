//! Images on disk: `mkfs` and `pktfs up` create them 0600 (an image holds
//! every byte of every file); `pktfs up`, whose default image sits in the
//! shared /dev/shm, refuses one another user planted there (a file or a
//! symbolic link), one that every user may write, and one in a directory
//! others may replace it in, naming why; and changes none of them.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::cli_common::{free_port, mkfs, try_startup_lines, Proc, PKTFS};
use crate::prereq;

/// $USER for `up` here.
const USER: &str = "hostile-image-test";

/// `pktfs up` run as `uid:gid` with a private HOME, stdout and stderr piped.
fn up_as(uid: u32, gid: u32, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(PKTFS);
    c.arg("up")
        .args(["--no-mount", "--size", "16M"])
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", home)
        // The default image is /dev/shm/pktfs-$USER.img: a name of this
        // test's own keeps a person's default image out of its way.
        .env("USER", USER)
        .uid(uid)
        .gid(gid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run `cmd` expecting it to refuse to start; its stderr.
fn refused(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !o.status.success(),
        "started anyway: {}{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    err
}

fn ids(name: &str) -> (u32, u32) {
    let line = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .find(|l| l.split(':').next() == Some(name))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no user {name}"));
    let f: Vec<&str> = line.split(':').collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// A home directory the user may use, removed at the end.
fn home_for(uid: u32, gid: u32) -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(h.path(), Some(uid), Some(gid)).unwrap();
    h
}

/// Stop `up` as a terminal's Ctrl-C does.
fn ctrl_c(p: &Proc) {
    let pid = nix::unistd::Pid::from_raw(p.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
}

struct Removed(PathBuf);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn mkfs_creates_the_image_0600() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.img");
    // Whatever the umask would allow.
    mkfs(&p, 16 << 20);
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
}

/// One test, in order: the cases share the well-known path of `nobody`'s
/// default image.
#[test]
fn up_uses_only_an_image_its_user_owns() {
    require!(
        prereq::root(),
        prereq::user("nobody"),
        prereq::user("tests")
    );
    let (nobody, nogroup) = ids("nobody");
    let (tests, tests_gid) = ids("tests");
    let home = home_for(nobody, nogroup);
    let default = PathBuf::from(format!("/dev/shm/pktfs-{USER}.img"));
    let _cleanup = Removed(default.clone());
    let _ = std::fs::remove_file(&default);

    // 1. Nothing there: created 0600, owned by the user who ran `up`.
    let listen = free_port().to_string();
    let mut c = up_as(nobody, nogroup, home.path(), &["--listen", &listen]);
    let mut p = Proc::spawn(&mut c);
    let said = try_startup_lines(&mut p).unwrap_or_else(|s| panic!("up failed: {s}"));
    assert!(
        said.contains(&format!("created {}", default.display())),
        "{said}"
    );
    let m = std::fs::metadata(&default).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    assert_eq!(m.uid(), nobody);
    // And a token of the user's own, private, that every request needs.
    let token = home.path().join(".config/pktfs/token");
    let t = std::fs::metadata(&token).unwrap();
    assert_eq!((t.permissions().mode() & 0o777, t.uid()), (0o600, nobody));
    let addr: std::net::SocketAddr = listen.parse().unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    ctrl_c(&p);
    assert!(p.wait().unwrap().success());

    // 2. Readable by others (an image from an older pktfs): used, warned.
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o644)).unwrap();
    let listen = free_port().to_string();
    let mut p = Proc::spawn(&mut up_as(
        nobody,
        nogroup,
        home.path(),
        &["--listen", &listen],
    ));
    let said = try_startup_lines(&mut p).unwrap_or_else(|s| panic!("up failed: {s}"));
    assert!(
        said.contains(&format!("using {}", default.display())),
        "{said}"
    );
    ctrl_c(&p);
    let out = p.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("may be read by other users"), "{err}");

    // `up` as nobody is refused for `why`, and `default` is left as it was.
    let refused_unchanged = |why: &str| {
        let before = std::fs::read(&default).unwrap();
        let listen = free_port().to_string();
        let err = refused(&mut up_as(
            nobody,
            nogroup,
            home.path(),
            &["--listen", &listen],
        ));
        assert!(err.contains(why), "{err}");
        assert!(
            std::fs::read(&default).unwrap() == before,
            "the image changed"
        );
    };

    // 3. Writable by every user.
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o666)).unwrap();
    refused_unchanged("may be written by every user");
    std::fs::remove_file(&default).unwrap();

    // 4. Planted by another user (`tests`), readable or not: refused,
    // naming the owner.
    mkfs(&default, 16 << 20);
    std::os::unix::fs::chown(&default, Some(tests), Some(tests_gid)).unwrap();
    std::fs::set_permissions(&default, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused_unchanged("owned by user tests");
    std::fs::remove_file(&default).unwrap();

    // 5. A symbolic link planted by `tests`, pointing at a file of
    // nobody's: refused as a link (its owner could repoint it later).
    let target = home.path().join("mine.img");
    mkfs(&target, 16 << 20);
    std::os::unix::fs::chown(&target, Some(nobody), Some(nogroup)).unwrap();
    std::os::unix::fs::symlink(&target, &default).unwrap();
    std::os::unix::fs::lchown(&default, Some(tests), Some(tests_gid)).unwrap();
    refused_unchanged("symbolic link owned by user tests");
    std::fs::remove_file(&default).unwrap();

    // 6. --image in a directory every user may write, not sticky: refused.
    let open_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open_dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let img = open_dir.path().join("x.img");
    let listen = free_port().to_string();
    let err = refused(&mut up_as(
        nobody,
        nogroup,
        home.path(),
        &["--listen", &listen, "--image", img.to_str().unwrap()],
    ));
    assert!(err.contains("not sticky"), "{err}");
    assert!(!img.exists(), "an image was made anyway");
}
