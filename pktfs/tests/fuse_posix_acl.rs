//! POSIX ACLs and setuid/setgid clearing through a real mount made by the
//! `pktfs` binary, with the tools people use: cp -a / cp -p, rsync -aAX,
//! tar --acls, getfacl / setfacl, writes and truncates as another user.
//! Every scenario also runs on a tmpfs directory in /dev/shm, so the
//! expectation is the kernel's own local-file-system behaviour; a few
//! absolute values are checked as well, so that a change on both sides
//! cannot pass unnoticed.
//!
//! Lives in the pktfs package so cargo builds the binary it runs.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pktfs_fs::{OpenOptions, Volume};

use crate::fuse_common::{format, image_path, is_mountpoint};
use crate::prereq;

const PKTFS: &str = env!("CARGO_BIN_EXE_pktfs");
const MIB: u64 = 1 << 20;

/// What every test here needs: a mount, root (to switch users and own
/// setuid files), the user `tests` (the one pjdfstest uses) and the tools.
macro_rules! need {
    () => {
        require!(
            prereq::fuse(),
            prereq::root(),
            prereq::user("tests"),
            prereq::tool("getfacl"),
            prereq::tool("setfacl"),
            prereq::tool("runuser"),
            prereq::tool("rsync"),
            prereq::tool("tar"),
            prereq::tool("fallocate"),
            prereq::tool("getfattr"),
        )
    };
}

/// An image mounted by `pktfs mount` (the daemon the binary forks).
struct Mnt {
    image: PathBuf,
    dir: tempfile::TempDir,
    opts: String,
}

impl Mnt {
    fn new(tag: &str, extra_opts: &str) -> Mnt {
        let image = image_path(tag);
        format(&image, 64 * MIB);
        let dir = tempfile::Builder::new()
            .prefix("pktfs-acl-")
            .tempdir()
            .unwrap();
        let mut opts = "allow_other".to_string();
        if !extra_opts.is_empty() {
            opts = format!("{opts},{extra_opts}");
        }
        let m = Mnt { image, dir, opts };
        m.mount();
        std::fs::set_permissions(m.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        m
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn mount(&self) {
        let out = Command::new(PKTFS)
            .arg("mount")
            .arg(&self.image)
            .arg(self.path())
            .args(["-o", &self.opts])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pktfs mount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            is_mountpoint(self.path()),
            "mounted when pktfs mount returns"
        );
    }

    /// `umount`, then wait (bounded) until the daemon has let go of the
    /// image, and mount it again: what a reboot keeps.
    fn remount(&self) {
        let st = Command::new("umount").arg(self.path()).status().unwrap();
        assert!(st.success(), "umount");
        let t = Instant::now();
        loop {
            match Volume::open(&self.image, &OpenOptions::default()) {
                Ok(v) => {
                    assert!(v.open_report().was_clean, "the unmount left it clean");
                    v.close().unwrap();
                    break;
                }
                Err(e) => assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "the image never became free after umount: {e}"
                ),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.mount();
    }
}

impl Drop for Mnt {
    fn drop(&mut self) {
        if is_mountpoint(self.path()) {
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A tmpfs directory (in /dev/shm) the other users can reach: the
/// reference every scenario is compared with.
fn tmpfs_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("pktfs-acl-ref-")
        .tempdir_in("/dev/shm")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `sh -c script` as root in `dir`, umask 022; must succeed.
fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("umask 022; {script}"))
        .current_dir(dir)
        .output()
        .unwrap();
    ok_out(script, out)
}

fn ok_out(what: &str, out: Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `sh -c script` as user `tests` in `dir`; whether it succeeded.
fn sh_as_tests(dir: &Path, script: &str) -> bool {
    Command::new("runuser")
        .args(["-u", "tests", "--", "sh", "-c", script])
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success()
}

/// Every path under `root` (relative, sorted) with its permission bits.
fn modes(root: &Path) -> Vec<(String, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u32)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, md.mode() & 0o7777));
            if md.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut v = Vec::new();
    walk(root, root, &mut v);
    v.sort();
    v
}

/// getfacl of every non-symlink under `root`, in path order, with paths
/// relative to it: what two trees must agree on.
fn acls(root: &Path) -> String {
    let paths: Vec<String> = modes(root)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !root.join(p).is_symlink())
        .collect();
    let out = Command::new("getfacl")
        .args(["-p", "--"])
        .args(&paths)
        .current_dir(root)
        .output()
        .unwrap();
    ok_out("getfacl", out)
}

fn perm(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn copies_keep_modes_and_acls() {
    need!();
    let m = Mnt::new("acl-copy", "");
    let reference = tmpfs_dir();
    let src = reference.path().join("src");
    std::fs::create_dir(&src).unwrap();
    sh(
        &src,
        "printf a > f644 && chmod 644 f644
         printf b > x755 && chmod 755 x755
         printf c > p700 && chmod 700 p700
         printf d > s4755 && chmod 4755 s4755
         printf e > g2755 && chmod 2755 g2755
         mkdir d755 d700 && chmod 700 d700 && printf f > d755/inner && chmod 600 d755/inner
         printf g > acl && chmod 640 acl && setfacl -m u:tests:rw,g:tests:r acl
         mkdir def && printf h > def/old && setfacl -d -m u:tests:rwx,o::- def
         ln -s f644 link",
    );
    let want_modes = modes(&src);
    let want_acls = acls(&src);
    assert!(want_acls.contains("user:tests:rw-"), "{want_acls}");
    assert!(want_acls.contains("default:user:tests:rwx"), "{want_acls}");

    let mnt = m.path();
    let s = src.display();
    sh(mnt, &format!("cp -a {s} cp-a"));
    sh(mnt, &format!("cp -p -r {s} cp-p"));
    sh(mnt, &format!("rsync -aAX {s}/ rsync/"));
    let tarball = reference.path().join("src.tar");
    sh(
        reference.path(),
        &format!("tar --acls --xattrs -cpf {} -C {s} .", tarball.display()),
    );
    sh(
        mnt,
        &format!("mkdir tar && tar --acls -xpf {} -C tar", tarball.display()),
    );
    // cp -p of single files into an existing directory, too.
    sh(
        mnt,
        &format!("mkdir cp-p-files && cp -p {s}/f644 {s}/x755 {s}/s4755 {s}/acl cp-p-files/"),
    );
    for copy in ["cp-a", "cp-p", "rsync", "tar"] {
        let c = mnt.join(copy);
        assert_eq!(modes(&c), want_modes, "{copy}: modes differ from tmpfs");
        assert_eq!(acls(&c), want_acls, "{copy}: ACLs differ from tmpfs");
    }
    let files = mnt.join("cp-p-files");
    assert_eq!(perm(&files.join("f644")), 0o644);
    assert_eq!(perm(&files.join("x755")), 0o755);
    assert_eq!(perm(&files.join("s4755")), 0o4755);
    assert_eq!(
        perm(&files.join("acl")),
        0o660,
        "the mask shows in the group bits"
    );

    // What the copies hold survives an unmount.
    m.remount();
    for copy in ["cp-a", "rsync", "tar"] {
        let c = mnt.join(copy);
        assert_eq!(modes(&c), want_modes, "{copy} after remount");
        assert_eq!(acls(&c), want_acls, "{copy} after remount");
    }
}

/// setfacl / getfacl / chmod steps, run in `dir`: their output.
fn acl_steps(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut step = |script: &str| out.push(sh(dir, script));
    step("printf 'secret\\n' > f && chmod 0600 f && setfacl -m u:tests:rw f && getfacl -c f && stat -c %a f");
    step("chmod 0750 f && getfacl -c f && stat -c %a f");
    step("setfacl -m m::r f && getfacl -c f && stat -c %a f");
    step("setfacl -x u:tests f && getfacl -c f && stat -c %a f");
    step("setfacl -b f && getfacl -c f && stat -c %a f && getfattr -m - -d f");
    // The owner, not in the file's group, sets an ACL on a setgid file:
    // setgid goes, as with chmod.
    step("printf x > sg && chown tests:root sg && chmod 2775 sg && runuser -u tests -- setfacl -m u:nobody:r sg && stat -c %a sg && getfacl -c sg");
    step("printf x > sg2 && chmod 2775 sg2 && setfacl -m u:nobody:r sg2 && stat -c %a sg2");
    // Removing ACLs that are not there succeeds, as on a local file system.
    step("mkdir k && touch k/f && setfacl -k k && setfattr -x system.posix_acl_access k/f && setfattr -x system.posix_acl_default k && setfacl -b k/f && echo removed");
    out
}

#[test]
fn setfacl_getfacl_round_trip_enforced_and_kept() {
    need!();
    let m = Mnt::new("acl-rt", "");
    let reference = tmpfs_dir();
    let mnt = m.path();
    let got = acl_steps(mnt);
    assert_eq!(got, acl_steps(reference.path()), "pktfs and tmpfs disagree");
    assert!(got[0].contains("user:tests:rw-") && got[0].contains("mask::rw-"));
    assert!(
        got[0].ends_with("660\n"),
        "the mask shows in stat: {}",
        got[0]
    );

    // Enforcement: the ACL grants what the mode does not, and stops
    // granting it when it goes.
    sh(mnt, "printf 'secret\\n' > e && chmod 0600 e");
    assert!(
        !sh_as_tests(mnt, "cat e"),
        "0600 root file readable by tests"
    );
    sh(mnt, "setfacl -m u:tests:rw e");
    assert!(sh_as_tests(mnt, "cat e >/dev/null && printf more >> e"));
    assert_eq!(std::fs::read(mnt.join("e")).unwrap(), b"secret\nmore");
    sh(mnt, "setfacl -m u:tests:r e");
    assert!(sh_as_tests(mnt, "cat e >/dev/null"));
    assert!(!sh_as_tests(mnt, "printf x >> e"), "write with u:tests:r");
    sh(mnt, "setfacl -x u:tests e");
    assert!(
        !sh_as_tests(mnt, "cat e"),
        "read after the entry is removed"
    );

    // A directory the ACL opens to tests.
    sh(mnt, "mkdir -m 0700 priv && setfacl -m u:tests:rwx priv");
    assert!(sh_as_tests(mnt, "touch priv/mine && ls priv >/dev/null"));

    // Kept across an unmount, and still enforced.
    sh(mnt, "setfacl -m u:tests:r,g:tests:rw e");
    let before = sh(mnt, "getfacl -c e priv && stat -c %a e priv");
    m.remount();
    assert_eq!(sh(mnt, "getfacl -c e priv && stat -c %a e priv"), before);
    assert!(sh_as_tests(mnt, "cat e >/dev/null && ls priv >/dev/null"));
    assert!(!sh_as_tests(mnt, "printf x >> e"));
}

/// Creation in a directory with a default ACL, and without one, in `dir`.
fn inherit_steps(dir: &Path) -> String {
    sh(
        dir,
        "mkdir dd && setfacl -d -m u:tests:rwx,g::r-x,o::- dd
         touch dd/f && mkdir dd/sub && mkfifo dd/p && ln -s f dd/l
         mkdir -m 0750 dd/sub/deeper && touch dd/sub/deeper/g
         printf x > dd/via_redirect
         (umask 027 && touch nf && mkdir nd && mkfifo np)
         (umask 077 && touch dd/masked_by_acl_not_umask)",
    );
    let mut s = String::new();
    for (p, m) in modes(dir) {
        s += &format!("{m:o} {p}\n");
    }
    s + &acls(dir)
}

#[test]
fn default_acls_are_inherited_and_replace_the_umask() {
    need!();
    let m = Mnt::new("acl-inherit", "");
    let reference = tmpfs_dir();
    let got = inherit_steps(m.path());
    assert_eq!(
        got,
        inherit_steps(reference.path()),
        "pktfs and tmpfs disagree"
    );
    let mnt = m.path();
    assert_eq!(perm(&mnt.join("dd/f")), 0o660);
    assert_eq!(perm(&mnt.join("dd/sub")), 0o770);
    assert_eq!(perm(&mnt.join("dd/masked_by_acl_not_umask")), 0o660);
    assert_eq!(perm(&mnt.join("nf")), 0o640, "umask without a default ACL");
    assert_eq!(perm(&mnt.join("nd")), 0o750);
    let sub = sh(mnt, "getfacl -c dd/sub/deeper");
    assert!(sub.contains("default:user:tests:rwx"), "{sub}");
    // tests, named in the inherited ACL, may write the new file.
    assert!(sh_as_tests(mnt, "printf y >> dd/f"));
    m.remount();
    assert_eq!(
        sh(mnt, "getfacl -c dd/f dd/sub/deeper/g && stat -c %a dd/f"),
        sh(
            reference.path(),
            "getfacl -c dd/f dd/sub/deeper/g && stat -c %a dd/f"
        )
    );
}

/// The setuid/setgid cases: (name, mode, what happens). Each starts from a
/// file owned by root:root, so `tests` is neither owner nor in the group.
const KILLPRIV: &[(&str, u32, &str)] = &[
    ("write_other", 0o6777, "as tests: printf y >> F"),
    ("write_other_no_gx", 0o6766, "as tests: printf y >> F"),
    ("write_root", 0o6777, "printf y >> F"),
    (
        "write_direct",
        0o6777,
        "as tests: dd if=/dev/zero of=F bs=4096 count=1 conv=notrunc oflag=direct status=none",
    ),
    ("truncate_other", 0o6777, "as tests: truncate -s 1 F"),
    ("open_trunc_other", 0o6777, "as tests: : > F"),
    ("truncate_root", 0o6777, "truncate -s 1 F"),
    ("fallocate_other", 0o6777, "as tests: fallocate -l 1M F"),
    ("chown", 0o6777, "chown tests F"),
    ("chgrp", 0o6775, "chgrp tests F"),
    ("chown_same", 0o6777, "chown root:root F"),
    ("chown_no_gx", 0o6766, "chown tests F"),
    // `1<>` opens without O_TRUNC or O_APPEND; cat (coreutils 9) then
    // copies with copy_file_range.
    ("copy_range_other", 0o6777, "as tests: cat source 1<> F"),
];

fn killpriv_steps(dir: &Path) -> Vec<(String, u32)> {
    std::fs::write(dir.join("source"), b"source").unwrap();
    let mut out = Vec::new();
    for &(name, mode, what) in KILLPRIV {
        let f = dir.join(name);
        std::fs::write(&f, b"data\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(perm(&f), mode, "{name}: chmod");
        let fname = f.display().to_string();
        if let Some(s) = what.strip_prefix("as tests: ") {
            assert!(sh_as_tests(dir, &s.replace('F', &fname)), "{name}: {s}");
        } else {
            sh(dir, &what.replace('F', &fname));
        }
        out.push((name.to_string(), perm(&f)));
    }
    out
}

fn killpriv_matches_tmpfs(opts: &str) {
    let m = Mnt::new("acl-killpriv", opts);
    let reference = tmpfs_dir();
    let got = killpriv_steps(m.path());
    let want = killpriv_steps(reference.path());
    let of = |n: &str| got.iter().find(|(k, _)| k == n).unwrap().1;
    // Through the page cache the kernel's FUSE client clears the bits
    // itself (fuse_setattr, without handle_killpriv), and it keeps a setgid
    // bit without group-execute whoever writes, where tmpfs clears it for
    // a writer outside the file's group. The direct-I/O variant checks
    // that case, where pktfs decides.
    let kernel_fuse_rule = opts.contains("no_direct_io");
    let comparable = |v: &[(String, u32)]| -> Vec<(String, u32)> {
        v.iter()
            .filter(|(n, _)| !(kernel_fuse_rule && n == "write_other_no_gx"))
            .cloned()
            .collect()
    };
    assert_eq!(
        comparable(&got),
        comparable(&want),
        "pktfs ({opts}) and tmpfs disagree"
    );
    // The kernel's rule, spelled out.
    assert_eq!(
        of("write_other"),
        0o777,
        "a write by another user clears both"
    );
    if kernel_fuse_rule {
        assert_eq!(of("write_other_no_gx"), 0o2766);
    } else {
        assert_eq!(
            of("write_other_no_gx"),
            0o766,
            "setgid without g+x: cleared for a non-member"
        );
    }
    assert_eq!(of("write_root"), 0o6777, "CAP_FSETID keeps them");
    assert_eq!(of("truncate_other"), 0o777);
    assert_eq!(of("truncate_root"), 0o6777);
    assert_eq!(of("chown"), 0o777, "chown clears them, even by root");
    assert_eq!(of("copy_range_other"), 0o777);
    // And the mode on the media is the one the kernel showed.
    m.remount();
    for (name, mode) in &got {
        assert_eq!(perm(&m.path().join(name)), *mode, "{name} after remount");
    }
}

#[test]
fn setuid_setgid_cleared_like_a_local_fs_direct_io() {
    need!();
    killpriv_matches_tmpfs("");
}

#[test]
fn setuid_setgid_cleared_like_a_local_fs_page_cache() {
    need!();
    killpriv_matches_tmpfs("no_direct_io");
}

#[test]
fn malformed_acls_are_refused_through_the_mount() {
    need!();
    let m = Mnt::new("acl-bad", "");
    let reference = tmpfs_dir();
    let set = |dir: &Path, v: &[u8]| {
        let f = dir.join("f");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
        let r = rustix::fs::setxattr(
            &f,
            "system.posix_acl_access",
            v,
            rustix::fs::XattrFlags::empty(),
        );
        (r, perm(&f))
    };
    for (bad, want) in [
        // Half an entry; an owner entry only; a tag no ACL has.
        (&b"\x02\x00\x00\x00\x01\x00"[..], rustix::io::Errno::INVAL),
        (
            b"\x02\x00\x00\x00\x01\x00\x06\x00\xff\xff\xff\xff",
            rustix::io::Errno::INVAL,
        ),
        (
            b"\x02\x00\x00\x00\x01\x00\x06\x00\xff\xff\xff\xff\x40\x00\x06\x00\xff\xff\xff\xff",
            rustix::io::Errno::INVAL,
        ),
        // Not version 2: the kernel answers EOPNOTSUPP, as for tmpfs.
        (b"garbage", rustix::io::Errno::OPNOTSUPP),
    ] {
        let got = set(m.path(), bad);
        assert_eq!(
            got,
            set(reference.path(), bad),
            "{bad:?}: pktfs and tmpfs differ"
        );
        assert_eq!(got, (Err(want), 0o640), "{bad:?}");
    }
    assert_eq!(
        std::fs::read(m.path().join("f")).unwrap(),
        b"x",
        "the mount still serves"
    );
}

/// What `Volume::permits` (the HTTP server's check, acting as a user)
/// must agree with: files and directories with assorted owners, modes and
/// ACLs (named users, named groups, the owning group, masks, an empty
/// mask, default ACLs inherited), made through the mount as root.
const PERMITS_SETUP: &str = "mkdir t && chmod 755 t && cd t
    for m in 000 001 010 100 600 604 640 644 660 666 700 711 744 755 070 007 4755; do
        printf x > f$m && chmod $m f$m
        mkdir d$m && chmod $m d$m
    done
    printf x > own_tests && chown tests:tests own_tests && chmod 604 own_tests
    printf x > grp_tests && chgrp tests grp_tests && chmod 604 grp_tests
    printf x > grp_tests_rw && chgrp tests grp_tests_rw && chmod 660 grp_tests_rw
    printf x > grp_nogroup && chgrp nogroup grp_nogroup && chmod 050 grp_nogroup
    mkdir dt && chown tests dt && chmod 700 dt
    printf x > acl_u && chmod 640 acl_u && setfacl -m u:tests:rw acl_u
    printf x > acl_u_mask && setfacl -m u:tests:rwx,m::r acl_u_mask
    printf x > acl_u_none && chmod 644 acl_u_none && setfacl -m u:nobody:- acl_u_none
    printf x > acl_mask0 && chmod 604 acl_mask0 && setfacl -m u:tests:rw,m::- acl_mask0
    printf x > acl_g && chmod 600 acl_g && setfacl -m g:tests:r,g:nogroup:w acl_g
    printf x > acl_gobj && chgrp tests acl_gobj && setfacl -m g::x,g:nogroup:rw,o::r acl_gobj
    printf x > acl_gdeny && chmod 606 acl_gdeny && setfacl -m g:nogroup:x acl_gdeny
    printf x > acl_owner && chown tests acl_owner && setfacl -m u::-,u:tests:rwx,o::rwx acl_owner
    mkdir dacl && chmod 700 dacl && setfacl -m u:nobody:rx,g:tests:wx dacl
    mkdir def && chmod 777 def && setfacl -d -m u:tests:rwx,g:nogroup:rx,o::rx def
    touch def/f && mkdir def/sub && touch def/sub/g && mkdir def/sub/h
    printf x > def/x && chmod 751 def/x";

/// uid, gid and groups of `user`, from `id`.
fn cred_of(user: &str) -> pktfs_fs::Cred {
    let id = |flag: &str| -> Vec<u32> {
        let out = Command::new("id").args([flag, user]).output().unwrap();
        ok_out("id", out)
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect()
    };
    pktfs_fs::Cred::new(id("-u")[0], id("-g")[0], id("-G"))
}

/// For each path, "rwx" as the kernel answers access(2) (`test -r/-w/-x`,
/// coreutils: faccessat with AT_EACCESS) for `user`, run with its groups
/// by runuser: one line of three 0/1 per path.
fn kernel_access(dir: &Path, user: &str, paths: &[String]) -> Vec<[bool; 3]> {
    let script = r#"for p in "$@"; do
        for b in r w x; do
            if env test -$b "$p"; then printf 1; else printf 0; fi
        done
        echo
    done"#;
    let out = Command::new("runuser")
        .args(["-u", user, "--", "sh", "-c", script, "sh"])
        .args(paths)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = ok_out("runuser test", out);
    let rows: Vec<[bool; 3]> = text
        .lines()
        .map(|l| {
            let b = l.as_bytes();
            [b[0] == b'1', b[1] == b'1', b[2] == b'1']
        })
        .collect();
    assert_eq!(rows.len(), paths.len(), "{text}");
    rows
}

#[test]
fn volume_permits_agrees_with_the_kernel() {
    require!(
        prereq::fuse(),
        prereq::root(),
        prereq::user("tests"),
        prereq::user("nobody"),
        prereq::tool("runuser"),
        prereq::tool("setfacl"),
    );
    let m = Mnt::new("acl-permits", "");
    let mnt = m.path();
    sh(mnt, PERMITS_SETUP);
    let t = mnt.join("t");
    let paths: Vec<String> = modes(&t).into_iter().map(|(p, _)| p).collect();
    assert!(paths.len() > 40, "{paths:?}");
    let users = ["root", "tests", "nobody"];
    let kernel: Vec<Vec<[bool; 3]>> = users.iter().map(|u| kernel_access(&t, u, &paths)).collect();
    // The Volume's answers, on the same image once the mount let go.
    let st = Command::new("umount").arg(mnt).status().unwrap();
    assert!(st.success(), "umount");
    let started = Instant::now();
    let vol = loop {
        match Volume::open(&m.image, &OpenOptions::default()) {
            Ok(v) => break v,
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(20),
                "the image never became free after umount: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ino_of = |rel: &str| {
        let mut ino = vol.lookup(vol.root(), b"t").unwrap().ino;
        for part in rel.split('/') {
            ino = vol.lookup(ino, part.as_bytes()).unwrap().ino;
        }
        ino
    };
    let bits = [
        pktfs_fs::Access::READ,
        pktfs_fs::Access::WRITE,
        pktfs_fs::Access::EXEC,
    ];
    let mut disagree = Vec::new();
    let mut granted = [[0usize; 2]; 3];
    for (u, user) in users.iter().enumerate() {
        let who = cred_of(user);
        for (k, p) in paths.iter().enumerate() {
            let ino = ino_of(p);
            for (b, want) in bits.iter().enumerate() {
                let ours = vol.permits(ino, &who, *want).unwrap();
                let theirs = kernel[u][k][b];
                granted[u][usize::from(theirs)] += 1;
                if ours != theirs {
                    disagree.push(format!(
                        "{user} {} {p}: kernel {theirs}, Volume::permits {ours}",
                        want.letters()
                    ));
                }
            }
        }
    }
    vol.close().unwrap();
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    // The table decides something for everyone: each user is refused
    // some and granted some (root: execute of a file without x bits).
    for (u, g) in granted.iter().enumerate() {
        assert!(g[0] > 0 && g[1] > 0, "{}: {g:?}", users[u]);
    }
    // A few absolute answers, so that both sides going wrong together
    // cannot pass: the kernel skips the ACL when the mask is empty (other
    // applies to a named user), a named group that matches without
    // granting refuses, root executes only with an x bit.
    let k = |u: usize, p: &str| kernel[u][paths.iter().position(|x| x == p).unwrap()];
    assert_eq!(
        k(1, "acl_mask0"),
        [true, false, false],
        "tests on acl_mask0"
    );
    assert_eq!(
        k(2, "acl_gdeny"),
        [false, false, true],
        "nobody on acl_gdeny"
    );
    assert_eq!(k(0, "f600"), [true, true, false], "root on f600");
    assert_eq!(k(0, "f001"), [true, true, true], "root on f001");
    assert_eq!(k(1, "acl_u"), [true, true, false], "tests on acl_u");
    assert_eq!(
        k(2, "def/f"),
        [true, false, false],
        "nobody on def/f (inherited)"
    );
}
