//! The preload shim with real programs on a real mount: each runs with and
//! without `LD_PRELOAD=libpktfs_preload.so` and must print the same bytes
//! and exit the same way, and the shim's own report (PKTFS_PRELOAD_STATS)
//! must show that it served the reads, so a shim that quietly passed
//! everything to the kernel would fail here too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fuse_common::Mounted;
use crate::prereq;

/// libpktfs_preload.so as cargo built it for these tests (a
/// dev-dependency of this package).
fn shim() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("target/<profile>/deps");
    for d in [deps, deps.parent().expect("target/<profile>")] {
        let so = d.join("libpktfs_preload.so");
        if so.is_file() {
            return so;
        }
    }
    panic!("libpktfs_preload.so is not next to {}", exe.display());
}

/// What one run of a program under the shim reported.
#[derive(Debug, Default)]
struct Served {
    opened: u64,
    direct_reads: u64,
    direct_bytes: u64,
}

fn served(stats: &Path) -> Served {
    let text = std::fs::read_to_string(stats).unwrap_or_default();
    let mut s = Served::default();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a stats line");
        s.opened += v["opened"].as_u64().unwrap();
        s.direct_reads += v["direct_reads"].as_u64().unwrap();
        s.direct_bytes += v["direct_bytes"].as_u64().unwrap();
    }
    s
}

/// Run `cmd` in `dir` without and with the shim; both outputs, and what
/// the shim served.
fn both(dir: &Path, cmd: &[&str]) -> (Output, Output, Served) {
    let stats = tempfile::NamedTempFile::new().unwrap();
    let run = |shim_on: bool| {
        let mut c = Command::new(cmd[0]);
        c.args(&cmd[1..]).current_dir(dir);
        if shim_on {
            c.env("LD_PRELOAD", shim())
                .env("PKTFS_PRELOAD_STATS", stats.path());
        }
        c.output()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
    };
    let plain = run(false);
    let shimmed = run(true);
    (plain, shimmed, served(stats.path()))
}

fn same(cmd: &[&str], a: &Output, b: &Output) {
    assert_eq!(a.status.code(), b.status.code(), "{cmd:?}: exit status");
    assert!(a.stdout == b.stdout, "{cmd:?}: standard output differs");
    assert_eq!(
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr),
        "{cmd:?}: standard error"
    );
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A mount with a few files: big binary, text, a sparse one, a tree.
fn mounted(tag: &str) -> Mounted {
    let m = Mounted::new(tag, 256 << 20);
    std::fs::write(m.p("big"), pattern(3_000_000, 1)).unwrap();
    let text: String = (0..20_000)
        .map(|i| format!("line {i} {}\n", if i % 7 == 0 { "needle" } else { "hay" }))
        .collect();
    std::fs::write(m.p("text"), text).unwrap();
    let f = std::fs::File::create(m.p("sparse")).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(b"island", 1_000_000).unwrap();
    f.set_len(3_000_000).unwrap();
    std::fs::create_dir_all(m.p("tree/a/b")).unwrap();
    for (k, p) in ["tree/one", "tree/a/two", "tree/a/b/three"]
        .iter()
        .enumerate()
    {
        std::fs::write(m.p(p), pattern(100_000 * (k + 1), k as u64 + 7)).unwrap();
    }
    m
}

#[test]
fn coreutils_python_and_tar_print_the_same_bytes_read_directly() {
    require!(
        prereq::fuse(),
        prereq::tool("python3"),
        prereq::tool("tar"),
        prereq::tool("grep"),
        prereq::tool("sha256sum")
    );
    let m = mounted("shim-progs");
    let script = m
        .path()
        .join("..")
        .join(format!("hash-{}.py", std::process::id()));
    std::fs::write(
        &script,
        "import hashlib,sys\nfor p in sys.argv[1:]:\n    print(hashlib.sha256(open(p,'rb').read()).hexdigest(), p)\n",
    )
    .unwrap();
    let py = script.to_str().unwrap().to_string();
    // (program, whether the shim serves its reads): sha256sum reads
    // through stdio, whose open and read calls stay inside the C library
    // where no preloaded library can see them; it must still print the
    // same (docs/DIRECT.md, "What the shim serves").
    let cases: Vec<(Vec<&str>, bool)> = vec![
        (vec!["cat", "big", "text", "sparse"], true),
        (vec!["grep", "-c", "needle", "text"], true),
        (vec!["python3", &py, "big", "sparse", "tree/a/two"], true),
        (vec!["tar", "cf", "-", "tree", "big"], true),
        (vec!["sha256sum", "big", "text", "sparse"], false),
    ];
    for (cmd, direct) in &cases {
        let (plain, shimmed, s) = both(m.path(), cmd);
        assert!(
            plain.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&plain.stderr)
        );
        same(cmd, &plain, &shimmed);
        if *direct {
            assert!(
                s.opened >= 1 && s.direct_reads >= 1 && s.direct_bytes > 0,
                "{cmd:?}: the shim served nothing ({s:?})"
            );
        }
    }
    let _ = std::fs::remove_file(&script);
}

#[test]
fn fio_verifies_under_the_shim() {
    require!(prereq::fuse(), prereq::tool("fio"));
    let m = Mounted::new("shim-fio", 256 << 20);
    let common = [
        "--name=v",
        "--filename=data",
        "--size=32M",
        "--bs=4k",
        "--ioengine=psync",
        "--verify=crc32c",
        "--randrepeat=1",
        "--thread",
    ];
    // Written through the mount, with fio's checksums in every block...
    let mut w = Command::new("fio");
    w.args(common)
        .args(["--rw=randwrite", "--do_verify=0"])
        .current_dir(m.path());
    let o = w.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // ...then checked by fio reading under the shim.
    let mut cmd = vec!["fio"];
    cmd.extend(common);
    cmd.extend(["--rw=randread", "--verify_only"]);
    let (plain, shimmed, s) = both(m.path(), &cmd);
    for o in [&plain, &shimmed] {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "fio: {out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("err= 0"), "fio reported errors: {out}");
        assert!(!out.contains("verify: bad"), "fio found bad blocks: {out}");
    }
    assert!(
        s.direct_reads >= 8192 && s.direct_bytes >= 32 << 20,
        "fio's reads were not served directly ({s:?})"
    );
}

/// What a program sees of a descriptor: offsets across dup, fork and
/// dup2, SEEK_END, fstat, short reads, readv/preadv, stdio closing a
/// descriptor behind the shim's back and the number coming back, mmap.
const SEMANTICS: &str = r#"
import os, sys, zlib, mmap
p, q = sys.argv[1], sys.argv[2]
out = []
def say(*a): out.append(repr(a))
crc = zlib.crc32
fd = os.open(p, os.O_RDONLY)
st = os.fstat(fd)
say('fstat', st.st_size, st.st_mode, st.st_nlink, st.st_uid, st.st_gid, st.st_ino,
    st.st_dev, st.st_blksize, st.st_blocks, st.st_mtime_ns, st.st_ctime_ns)
say('read0', os.read(fd, 0), os.lseek(fd, 0, os.SEEK_CUR))
say('read', crc(os.read(fd, 70000)), os.lseek(fd, 0, os.SEEK_CUR))
say('end', os.lseek(fd, 0, os.SEEK_END), os.lseek(fd, -10, os.SEEK_END), crc(os.read(fd, 100)))
say('past', os.lseek(fd, 1000, os.SEEK_END), os.read(fd, 10))
say('pread', crc(os.pread(fd, 5000, 12345)), os.pread(fd, 10, st.st_size + 5))
bufs = [bytearray(100), bytearray(7000), bytearray(3)]
os.lseek(fd, 99, os.SEEK_SET)
say('readv', os.readv(fd, bufs), [crc(b) for b in bufs], os.lseek(fd, 0, os.SEEK_CUR))
say('preadv', os.preadv(fd, bufs, st.st_size - 50), [crc(b) for b in bufs])
d = os.dup(fd)
os.lseek(fd, 1000, os.SEEK_SET)
say('dup', crc(os.read(d, 10)), os.lseek(fd, 0, os.SEEK_CUR))
os.lseek(fd, 2000, os.SEEK_SET)
pid = os.fork()
if pid == 0:
    os.read(fd, 333)
    os._exit(0)
os.waitpid(pid, 0)
say('after the child read', os.lseek(fd, 0, os.SEEK_CUR), crc(os.read(fd, 17)))
f2 = os.open(q, os.O_RDONLY)
os.dup2(f2, fd)
os.lseek(fd, 0, os.SEEK_SET)
say('dup2', crc(os.read(fd, 4096)), os.fstat(fd).st_size)
g = os.open(p, os.O_RDONLY)
f = os.fdopen(g, 'rb', buffering=0)
say('stdio', crc(f.read(5000)))
f.close()
h = os.open(q, os.O_RDONLY)
say('number reused', h == g, crc(os.read(h, 5000)))
m = mmap.mmap(h, 0, prot=mmap.PROT_READ)
say('mmap', crc(m[100:9000]))
m.close()
total = 0
os.lseek(h, 0, os.SEEK_SET)
while True:
    b = os.read(h, 7777)
    if not b: break
    total = crc(b, total)
say('to the end', total, os.lseek(h, 0, os.SEEK_CUR))
print('\n'.join(out))
"#;

#[test]
fn what_a_program_sees_of_its_descriptors_is_the_same() {
    require!(prereq::fuse(), prereq::tool("python3"));
    let m = mounted("shim-sem");
    let script = m
        .path()
        .join("..")
        .join(format!("sem-{}.py", std::process::id()));
    std::fs::write(&script, SEMANTICS).unwrap();
    let cmd = ["python3", script.to_str().unwrap(), "big", "tree/a/b/three"];
    let (plain, shimmed, s) = both(m.path(), &cmd);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    same(&cmd, &plain, &shimmed);
    assert!(s.direct_reads >= 10, "the shim served too little ({s:?})");
    let _ = std::fs::remove_file(&script);
}

#[test]
fn damage_fails_the_same_way() {
    require!(prereq::fuse());
    let mut m = mounted("shim-dmg");
    let ino = m.vol().lookup(m.vol().root(), b"big").unwrap().ino;
    let rec = m.vol().chain(ino).unwrap()[3];
    let pos = m.vol().geometry().buffer_pos(rec.buffer, rec.buf_off).0 + 5;
    m.unmount();
    // One flipped byte in the image file, behind every pktfs process.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&m.image)
            .unwrap();
        let mut b = [0u8];
        f.read_exact_at(&mut b, pos).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], pos).unwrap();
    }
    m.mount();
    for cmd in [["cat", "big"], ["sha256sum", "big"]] {
        let (plain, shimmed, _) = both(m.path(), &cmd);
        assert!(!plain.status.success(), "{cmd:?} read damaged bytes");
        assert!(
            String::from_utf8_lossy(&plain.stderr).contains("Input/output error"),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&plain.stderr)
        );
        same(&cmd, &plain, &shimmed);
    }
}

#[test]
fn a_user_who_may_not_read_the_image_reads_through_the_kernel() {
    require!(
        prereq::fuse(),
        prereq::root(),
        prereq::user("nobody"),
        prereq::tool("runuser")
    );
    let opts = pktfs_fuse::MountOptions {
        allow_other: true,
        ..Default::default()
    };
    let m = Mounted::with_options("shim-perm", 64 << 20, opts);
    std::fs::write(m.p("open"), pattern(500_000, 5)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(m.p("open"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // The image is root's, 0600: nobody may map it.
    assert_eq!(
        std::fs::metadata(&m.image).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let stats = tempfile::Builder::new().tempfile_in("/tmp").unwrap();
    std::fs::set_permissions(stats.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let as_nobody = |shim_on: bool| {
        let mut c = Command::new("runuser");
        c.args(["-u", "nobody", "--"]);
        if shim_on {
            c.args(["env"])
                .arg(format!("LD_PRELOAD={}", shim().display()))
                .arg(format!("PKTFS_PRELOAD_STATS={}", stats.path().display()));
        }
        c.arg("sha256sum").arg(m.p("open"));
        c.output().unwrap()
    };
    let plain = as_nobody(false);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let shimmed = as_nobody(true);
    same(&["sha256sum", "open"], &plain, &shimmed);
    let s = served(stats.path());
    assert_eq!(s.opened, 0, "nobody mapped root's 0600 image ({s:?})");
}

#[test]
fn a_file_mapped_shared_and_written_is_read_through_the_kernel() {
    require!(prereq::fuse(), prereq::tool("python3"));
    let m = mounted("shim-mmap");
    let script = m
        .path()
        .join("..")
        .join(format!("mmapw-{}.py", std::process::id()));
    std::fs::write(
        &script,
        "import os,mmap,zlib\nfd=os.open('big',os.O_RDWR)\nm=mmap.mmap(fd,0)\nm[10:20]=b'0123456789'\n\
         r=os.open('big',os.O_RDONLY)\nprint(os.pread(r,30,0).hex())\nm.close()\n",
    )
    .unwrap();
    let cmd = ["python3", script.to_str().unwrap()];
    let (plain, shimmed, _) = both(m.path(), &cmd);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    same(&cmd, &plain, &shimmed);
    let _ = std::fs::remove_file(&script);
}

#[test]
fn off_means_off() {
    require!(prereq::fuse());
    let m = mounted("shim-off");
    let stats = tempfile::NamedTempFile::new().unwrap();
    let o = Command::new("cat")
        .arg("big")
        .current_dir(m.path())
        .env("LD_PRELOAD", shim())
        .env("PKTFS_PRELOAD", "off")
        .env("PKTFS_PRELOAD_STATS", stats.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(o.stdout, pattern(3_000_000, 1));
    assert_eq!(served(stats.path()).opened, 0);
}
