//! Real S3 clients against `pktfs serve --s3`, as a person runs them:
//! aws-cli (`s3 mb/cp/sync/ls/rm`, multipart above its 8 MiB threshold,
//! `s3api` with CRC32C checksums, a server-side copy of 100 MiB, which
//! aws-cli makes of UploadPartCopy ranges, and a range copy), rclone (copy, sync, a byte-for-byte
//! `check --download`, ls, delete) and boto3 (pktfs/tests/s3/boto3_client.py:
//! every S3 call of the endpoint, presigned URLs, refused signatures and
//! keys); round trips compared byte for byte, and the objects read back
//! from the image itself once the server has stopped. Last, a server
//! killed with SIGKILL in the middle of a multipart upload (two parts in,
//! a third arriving): after the restart nothing of it is visible and the
//! image's free space is what it was before the upload.
//!
//! The clients are missing: under CI a failure, elsewhere a loud SKIPPED
//! line (.ci/run installs them: awscli, boto3 and botocore[crt] from
//! PyPI, rclone from Debian).
//!
//! `PKTFS_S3_CLIENTS=garage` runs the same clients and checks against a
//! Garage instead (its region, its own error codes where it differs from
//! S3): the scripts are checked against an independent server that way.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pktfs_tier::garage::Garage;

use crate::cli_common::{self, announced, mkfs, out_ok, pattern, Proc, PKTFS};
use crate::prereq;

const MIB: usize = 1 << 20;

/// The boto3 script, beside this file.
fn boto3_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3/boto3_client.py")
}

/// Which server the clients talk to.
fn against_garage() -> bool {
    std::env::var("PKTFS_S3_CLIENTS").is_ok_and(|v| v == "garage")
}

/// What the pip line in .ci/run installs.
const PIP_HINT: &str =
    "python3 -m pip install awscli==1.45.11 boto3==1.43.11 'botocore[crt]==1.43.11'; .ci/run does";

/// aws-cli v1, run as `python3 -m awscli` (the `aws` script pip installs
/// is on PATH only where pip's scripts directory is).
fn aws_cli() -> prereq::Check {
    let ok = Command::new("python3")
        .args(["-c", "import awscli, awscrt"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    prereq::holds(ok, || {
        format!("python3 cannot import awscli and awscrt ({PIP_HINT})")
    })
}

/// boto3, with the CRT (botocore computes CRC32C only with it).
fn boto3() -> prereq::Check {
    let ok = Command::new("python3")
        .args(["-c", "import boto3, awscrt"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    prereq::holds(ok, || {
        format!("python3 cannot import boto3 and awscrt ({PIP_HINT})")
    })
}

fn server_prereq() -> prereq::Check {
    if !against_garage() {
        return Ok(());
    }
    prereq::holds(Garage::binary().is_some(), || {
        "`garage` is not installed (cargo install --locked garage; .ci/run does)".into()
    })
}

fn json(s: &str, what: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {s}"))
}

/// Base64 of a CRC, big-endian, as `x-amz-checksum-crc32c` carries it.
fn b64_crc(v: u32) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = v.to_be_bytes();
    let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
    let mut s: String = [18, 12, 6, 0]
        .iter()
        .map(|sh| A[(n >> sh & 63) as usize] as char)
        .collect();
    let n = u32::from(b[3]) << 16;
    s.push(A[(n >> 18 & 63) as usize] as char);
    s.push(A[(n >> 12 & 63) as usize] as char);
    s.push_str("==");
    s
}

/// Settings of the machine's environment that would change what the
/// clients do: a CA bundle makes rclone refuse to start; a profile, a
/// session token or an endpoint would override the test's own; a proxy
/// would take the requests to 127.0.0.1 elsewhere.
const AWS_ENV_CLEARED: [&str; 12] = [
    "AWS_CA_BUNDLE",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_USE_FIPS_ENDPOINT",
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
];

/// `cmd` without [`AWS_ENV_CLEARED`].
fn clean(mut cmd: Command) -> Command {
    for k in AWS_ENV_CLEARED {
        cmd.env_remove(k);
    }
    cmd
}

/// A running S3 server with a key allowed everything.
struct S3 {
    url: String,
    region: String,
    key_id: String,
    secret: String,
    server: Server,
    /// Scratch space of the test (client files, configs).
    scratch: tempfile::TempDir,
}

enum Server {
    Pktfs {
        proc: Option<Proc>,
        dir: tempfile::TempDir,
        img: PathBuf,
    },
    Garage(Garage),
}

impl S3 {
    /// `pktfs serve` on a fresh image with a key (added offline, before the
    /// server holds the image), or a Garage.
    fn start(image_bytes: u64) -> S3 {
        let scratch = tempfile::tempdir().unwrap();
        if against_garage() {
            let g = Garage::start(1).unwrap();
            // The clients make their buckets themselves.
            garage_cli(&g, &["key", "allow", "--create-bucket", "pktfs-test"]);
            return S3 {
                url: g.endpoint(),
                region: g.region().into(),
                key_id: g.key_id().into(),
                secret: g.secret().into(),
                server: Server::Garage(g),
                scratch,
            };
        }
        let dir = tempfile::Builder::new()
            .prefix("pktfs-s3-clients-")
            .tempdir_in("/dev/shm")
            .unwrap();
        let img = dir.path().join("img");
        mkfs(&img, image_bytes);
        let (key_id, secret) = pktfs_key(&img, "clients", "*=rw");
        let mut s = S3 {
            url: String::new(),
            region: "us-east-1".into(),
            key_id,
            secret,
            server: Server::Pktfs {
                proc: None,
                dir,
                img,
            },
            scratch,
        };
        s.restart();
        s
    }

    fn is_garage(&self) -> bool {
        matches!(self.server, Server::Garage(_))
    }

    /// The image (pktfs).
    fn img(&self) -> &Path {
        match &self.server {
            Server::Pktfs { img, .. } => img,
            Server::Garage(_) => panic!("Garage has no image"),
        }
    }

    fn log(&self) -> PathBuf {
        match &self.server {
            Server::Pktfs { dir, .. } => dir.path().join("serve.log"),
            Server::Garage(g) => g.dir().join("n0/server.log"),
        }
    }

    fn server_said(&self) -> String {
        let s = std::fs::read_to_string(self.log()).unwrap_or_default();
        format!(
            "the server's log ({}):\n{}",
            self.log().display(),
            &s[s.len().saturating_sub(4000)..]
        )
    }

    /// Start `pktfs serve IMG --s3 127.0.0.1:0` (again), on the port it
    /// announces.
    fn restart(&mut self) {
        let log = self.log();
        let Server::Pktfs { proc, img, .. } = &mut self.server else {
            panic!("restart is for pktfs");
        };
        assert!(proc.is_none(), "the server is running");
        let mut p = Proc::spawn(
            Command::new(PKTFS)
                .arg("serve")
                .arg(&*img)
                .args(["--s3", "127.0.0.1:0"])
                .stdout(Stdio::piped())
                .stderr(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&log)
                        .unwrap(),
                ),
        );
        let said = cli_common::try_startup_lines(&mut p).unwrap_or_else(|said| {
            panic!(
                "pktfs serve --s3 ended while starting; it said: {said}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        let addr: SocketAddr = announced(&said, "S3")
            .unwrap_or_else(|| panic!("no `S3 http://...` line in what the server said: {said}"));
        self.url = format!("http://{addr}");
        *proc = Some(p);
    }

    /// SIGINT the server and wait for it (pktfs).
    fn stop(&mut self) {
        if let Server::Pktfs { proc, .. } = &mut self.server {
            cli_common::stop(proc.take().expect("the server is running"));
        }
    }

    /// SIGKILL the server (pktfs).
    fn kill9(&mut self) {
        if let Server::Pktfs { proc, .. } = &mut self.server {
            let mut p = proc.take().expect("the server is running");
            p.kill().unwrap();
            p.wait().unwrap();
        }
    }

    /// The environment every AWS tool reads its key and region from (and
    /// nothing of the machine's user).
    fn aws_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", self.key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
            ("AWS_DEFAULT_REGION", self.region.clone()),
            ("AWS_REGION", self.region.clone()),
            ("AWS_CONFIG_FILE", "/dev/null".into()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ("AWS_RETRY_MODE", "standard".into()),
            // One try: a refused request is seen as it was answered.
            ("AWS_MAX_ATTEMPTS", "1".into()),
        ]
    }

    /// `aws --endpoint-url URL ARGS`.
    fn aws(&self, args: &[&str]) -> Output {
        clean(Command::new("python3"))
            .args(["-m", "awscli", "--endpoint-url", &self.url])
            .args(args)
            .envs(self.aws_env())
            .current_dir(self.scratch.path())
            .output()
            .unwrap()
    }

    /// `aws ...`, which must succeed: its stdout.
    fn aws_ok(&self, args: &[&str]) -> String {
        let o = self.aws(args);
        if !o.status.success() {
            panic!(
                "aws {args:?}: {}\nstdout: {}\nstderr: {}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                self.server_said()
            );
        }
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `python3 boto3_client.py WHAT` on `bucket`.
    fn boto3(&self, what: &str, bucket: &str, extra: &[(&str, &str)]) -> Output {
        clean(Command::new("python3"))
            .arg(boto3_script())
            .arg(what)
            .envs(self.aws_env())
            .env("S3_ENDPOINT", &self.url)
            .env("S3_REGION", &self.region)
            .env("S3_KEY_ID", &self.key_id)
            .env("S3_SECRET", &self.secret)
            .env("S3_BUCKET", bucket)
            .env(
                "S3_FLAVOR",
                if self.is_garage() { "garage" } else { "pktfs" },
            )
            .envs(extra.iter().copied())
            .output()
            .unwrap()
    }

    fn boto3_ok(&self, what: &str, bucket: &str, extra: &[(&str, &str)]) -> String {
        let o = self.boto3(what, bucket, extra);
        if !o.status.success() {
            panic!(
                "boto3_client.py {what}: {}\n{}{}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                self.server_said()
            );
        }
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// CreateBucket through boto3; on Garage through its CLI (a bucket made
    /// through S3 is the key's alone there: no other key can be allowed
    /// on it by name).
    fn make_bucket(&self, bucket: &str) {
        match &self.server {
            Server::Garage(g) => {
                garage_cli(g, &["bucket", "create", bucket]);
                garage_cli(
                    g,
                    &[
                        "bucket",
                        "allow",
                        "--read",
                        "--write",
                        "--owner",
                        bucket,
                        "--key",
                        "pktfs-test",
                    ],
                );
            }
            Server::Pktfs { .. } => {
                self.boto3_ok("mb", bucket, &[]);
            }
        }
    }

    /// A key allowed only to read `bucket` (which exists).
    fn read_only_key(&self, bucket: &str) -> (String, String) {
        match &self.server {
            Server::Garage(g) => {
                let out = garage_cli(g, &["key", "create", "read-only"]);
                let field = |name: &str| {
                    out.lines()
                        .find_map(|l| l.trim().strip_prefix(name))
                        .map(|v| v.trim_start_matches([':', ' ']).trim().to_string())
                        .unwrap_or_else(|| panic!("no {name} in: {out}"))
                };
                let key = (field("Key ID"), field("Secret key"));
                garage_cli(
                    g,
                    &["bucket", "allow", "--read", bucket, "--key", "read-only"],
                );
                key
            }
            // Through the server's control socket: it holds the image.
            Server::Pktfs { img, .. } => pktfs_key(img, "read-only", &format!("{bucket}=r")),
        }
    }

    /// rclone, its remote `s3:` configured by the environment alone.
    fn rclone(&self, args: &[&str]) -> Output {
        clean(Command::new("rclone"))
            .args(args)
            .env("RCLONE_CONFIG", self.scratch.path().join("no-rclone.conf"))
            .env("RCLONE_CONFIG_S3_TYPE", "s3")
            .env("RCLONE_CONFIG_S3_PROVIDER", "Other")
            .env("RCLONE_CONFIG_S3_ENDPOINT", &self.url)
            .env("RCLONE_CONFIG_S3_ACCESS_KEY_ID", &self.key_id)
            .env("RCLONE_CONFIG_S3_SECRET_ACCESS_KEY", &self.secret)
            .env("RCLONE_CONFIG_S3_REGION", &self.region)
            .env("RCLONE_CONFIG_S3_FORCE_PATH_STYLE", "true")
            .current_dir(self.scratch.path())
            .output()
            .unwrap()
    }

    fn rclone_ok(&self, args: &[&str]) -> String {
        let o = self.rclone(args);
        if !o.status.success() {
            panic!(
                "rclone {args:?}: {}\nstdout: {}\nstderr: {}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                self.server_said()
            );
        }
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The object's bytes as the image holds them (pktfs, the server
    /// stopped): `pktfs cat IMG /BUCKET/KEY`.
    fn in_image(&self, bucket: &str, key: &str) -> Vec<u8> {
        let o = Command::new(PKTFS)
            .args([
                "cat",
                self.img().to_str().unwrap(),
                &format!("/{bucket}/{key}"),
            ])
            .output()
            .unwrap();
        out_ok(&o, &format!("pktfs cat /{bucket}/{key}"));
        o.stdout
    }
}

fn garage_cli(g: &Garage, args: &[&str]) -> String {
    let o = Command::new(Garage::binary().unwrap())
        .arg("-c")
        .arg(g.dir().join("n0/garage.toml"))
        .args(args)
        .output()
        .unwrap();
    out_ok(&o, &format!("garage {args:?}"))
}

/// `pktfs keys add IMG NAME --grant GRANT --json`: (id, secret).
fn pktfs_key(img: &Path, name: &str, grant: &str) -> (String, String) {
    let o = Command::new(PKTFS)
        .args(["keys", "add", img.to_str().unwrap(), name, "--grant", grant])
        .arg("--json")
        .output()
        .unwrap();
    let j = json(&out_ok(&o, "pktfs keys add"), "pktfs keys add --json");
    let field = |k: &str| {
        j[k].as_str()
            .unwrap_or_else(|| panic!("no {k} in {j}"))
            .to_string()
    };
    (field("access_key_id"), field("secret_access_key"))
}

/// Files as (path, length, CRC32C), sorted: what two trees are compared
/// by (a failure then prints a short list, not the bytes).
fn summary(files: &[(String, Vec<u8>)]) -> Vec<(String, usize, u32)> {
    let mut v: Vec<(String, usize, u32)> = files
        .iter()
        .map(|(p, d)| (p.clone(), d.len(), crc32c::crc32c(d)))
        .collect();
    v.sort();
    v
}

/// Every file under `root`, by its path relative to it ('/'-separated),
/// summed up ([`summary`]).
fn tree(root: &Path) -> Vec<(String, usize, u32)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    summary(&out)
}

/// A nested tree of files (an empty one among them, but for Garage)
/// under `root`.
fn make_tree(root: &Path, seed: u64) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> = [
        ("top.txt", 1_000),
        // Garage 2.5 answers a PUT of an empty body sent with `Expect:
        // 100-continue` (as botocore sends it) so that the next request on
        // the connection stalls until the client's read timeout.
        ("empty", if against_garage() { 1 } else { 0 }),
        ("a/one.bin", 70_000),
        ("a/two.bin", 4_096),
        ("a/b/three.bin", 300_000),
        ("a/b/c/four.bin", 1),
        ("a/b/c/five.txt", 12_345),
        ("d/six.bin", 2 * MIB + 17),
        ("d/e/f/g/seven.bin", 9_999),
    ]
    .iter()
    .enumerate()
    .map(|(k, (p, n))| (p.to_string(), pattern(*n, seed + k as u64)))
    .collect();
    for (p, data) in &files {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
    files
}

#[test]
fn aws_cli_cp_sync_ls_rm_and_s3api_checksums() {
    require!(aws_cli(), server_prereq());
    let mut s3 = S3::start(256 << 20);
    let dir = s3.scratch.path().to_path_buf();
    let b = "awscli";
    s3.aws_ok(&["s3", "mb", &format!("s3://{b}")]);
    let listed = s3.aws_ok(&["s3", "ls"]);
    assert!(
        listed.lines().any(|l| l.ends_with(&format!(" {b}"))),
        "`aws s3 ls` does not list the bucket: {listed}"
    );

    // cp up and down: a small file, and 20 MiB that aws-cli sends in
    // three parts (its multipart threshold and part size are 8 MiB).
    let small = pattern(100_000, 1);
    let big = pattern(20 * MIB, 2);
    std::fs::write(dir.join("small.bin"), &small).unwrap();
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    s3.aws_ok(&["s3", "cp", "small.bin", &format!("s3://{b}/dir/small.bin")]);
    s3.aws_ok(&["s3", "cp", "big.bin", &format!("s3://{b}/big.bin")]);
    let head = json(
        &s3.aws_ok(&["s3api", "head-object", "--bucket", b, "--key", "big.bin"]),
        "head-object",
    );
    assert_eq!(head["ContentLength"], 20 * MIB, "{head}");
    let etag = head["ETag"].as_str().unwrap_or_default();
    assert!(
        etag.ends_with("-3\""),
        "big.bin's ETag {etag} is not a 3-part upload's"
    );
    s3.aws_ok(&["s3", "cp", &format!("s3://{b}/dir/small.bin"), "small.down"]);
    s3.aws_ok(&["s3", "cp", &format!("s3://{b}/big.bin"), "big.down"]);
    assert!(std::fs::read(dir.join("small.down")).unwrap() == small);
    assert!(
        std::fs::read(dir.join("big.down")).unwrap() == big,
        "the 20 MiB object came back different"
    );

    // sync a nested tree up, and down into another directory.
    let files = make_tree(&dir.join("tree"), 10);
    s3.aws_ok(&["s3", "sync", "tree", &format!("s3://{b}/tree")]);
    s3.aws_ok(&["s3", "sync", &format!("s3://{b}/tree"), "tree.down"]);
    assert_eq!(
        tree(&dir.join("tree.down")),
        summary(&files),
        "the tree synced down differs"
    );
    // A second sync sends only what changed.
    std::fs::write(dir.join("tree/a/two.bin"), pattern(5_000, 99)).unwrap();
    let out = s3.aws_ok(&["s3", "sync", "tree", &format!("s3://{b}/tree")]);
    let uploads: Vec<&str> = out.lines().filter(|l| l.contains("upload:")).collect();
    assert!(
        uploads.len() == 1 && uploads[0].contains("a/two.bin"),
        "the second sync uploaded {uploads:?}"
    );

    // ls: recursive (every key with its size), and by prefix (the
    // "directories" as PRE lines).
    let all = s3.aws_ok(&["s3", "ls", &format!("s3://{b}"), "--recursive"]);
    let mut keys: Vec<(u64, String)> = all
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert!(w.len() >= 4, "an ls line: {l}");
            (w[2].parse().unwrap(), w[3..].join(" "))
        })
        .collect();
    keys.sort_by(|x, y| x.1.cmp(&y.1));
    let mut want: Vec<(u64, String)> = files
        .iter()
        .map(|(p, d)| {
            let n = if p == "a/two.bin" { 5_000 } else { d.len() };
            (n as u64, format!("tree/{p}"))
        })
        .chain([
            (20 * MIB as u64, "big.bin".into()),
            (100_000, "dir/small.bin".into()),
        ])
        .collect();
    want.sort_by(|x, y| x.1.cmp(&y.1));
    assert_eq!(keys, want, "aws s3 ls --recursive:\n{all}");
    let a = s3.aws_ok(&["s3", "ls", &format!("s3://{b}/tree/a/")]);
    let mut lines: Vec<String> = a
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["PRE", p] => format!("PRE {p}"),
                [_, _, n, name] => format!("{name} {n}"),
                _ => panic!("an ls line: {l}"),
            }
        })
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        ["PRE b/", "one.bin 70000", "two.bin 5000"],
        "aws s3 ls s3://{b}/tree/a/:\n{a}"
    );

    // s3api with CRC32C: the server answers the checksum of the bytes
    // (with checksum mode on a GET), and the bytes come back.
    let crc_body = pattern(300_000, 3);
    std::fs::write(dir.join("crc.bin"), &crc_body).unwrap();
    let want_crc = b64_crc(crc32c::crc32c(&crc_body));
    let put = json(
        &s3.aws_ok(&[
            "s3api",
            "put-object",
            "--bucket",
            b,
            "--key",
            "sums/crc.bin",
            "--body",
            "crc.bin",
            "--checksum-algorithm",
            "CRC32C",
        ]),
        "put-object",
    );
    assert_eq!(put["ChecksumCRC32C"], want_crc.as_str(), "{put}");
    let get = json(
        &s3.aws_ok(&[
            "s3api",
            "get-object",
            "--bucket",
            b,
            "--key",
            "sums/crc.bin",
            "--checksum-mode",
            "ENABLED",
            "crc.down",
        ]),
        "get-object",
    );
    assert_eq!(get["ChecksumCRC32C"], want_crc.as_str(), "{get}");
    assert_eq!(get["ContentLength"], 300_000, "{get}");
    assert!(std::fs::read(dir.join("crc.down")).unwrap() == crc_body);
    let head = json(
        &s3.aws_ok(&[
            "s3api",
            "head-object",
            "--bucket",
            b,
            "--key",
            "sums/crc.bin",
            "--checksum-mode",
            "ENABLED",
        ]),
        "head-object",
    );
    assert_eq!(head["ChecksumCRC32C"], want_crc.as_str(), "{head}");
    // A body that does not match the checksum it is sent with is refused,
    // and stores nothing.
    let wrong = b64_crc(crc32c::crc32c(&crc_body) ^ 0x100);
    let o = s3.aws(&[
        "s3api",
        "put-object",
        "--bucket",
        b,
        "--key",
        "sums/wrong.bin",
        "--body",
        "crc.bin",
        "--checksum-crc32c",
        &wrong,
    ]);
    assert!(
        !o.status.success(),
        "a PUT with a wrong CRC32C was taken: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = s3.aws(&[
        "s3api",
        "head-object",
        "--bucket",
        b,
        "--key",
        "sums/wrong.bin",
    ]);
    assert!(!o.status.success(), "the refused object is there");

    // rm one object, then a whole prefix.
    s3.aws_ok(&["s3", "rm", &format!("s3://{b}/dir/small.bin")]);
    let out = s3.aws_ok(&["s3", "rm", &format!("s3://{b}/tree"), "--recursive"]);
    assert_eq!(
        out.lines().filter(|l| l.contains("delete:")).count(),
        files.len(),
        "rm --recursive: {out}"
    );
    let left = s3.aws_ok(&["s3", "ls", &format!("s3://{b}"), "--recursive"]);
    let mut left: Vec<&str> = left
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .collect();
    left.sort();
    assert_eq!(left, ["big.bin", "sums/crc.bin"]);

    // The objects are files of the image.
    if !s3.is_garage() {
        s3.stop();
        assert!(s3.in_image(b, "big.bin") == big, "big.bin in the image");
        assert!(s3.in_image(b, "sums/crc.bin") == crc_body);
    }
}

/// (length, CRC32C) of some bytes: what two copies are compared by in a
/// failure message (the bytes are compared too).
fn digest(b: &[u8]) -> (usize, u32) {
    (b.len(), crc32c::crc32c(b))
}

/// aws-cli's server-side copy of an object above its 8 MiB multipart
/// threshold is a multipart copy: CreateMultipartUpload, an
/// UploadPartCopy per 8 MiB range of the source (each conditional on the
/// source's ETag, x-amz-copy-source-if-match), CompleteMultipartUpload.
/// The copy of 100 MiB is the source byte for byte (read back through S3
/// and from the image). Then a copy of two ranges made part by part with
/// `s3api upload-part-copy --copy-source-range` is those ranges.
#[test]
fn aws_cli_server_side_copy_is_multipart_and_byte_identical() {
    require!(aws_cli(), server_prereq());
    let mut s3 = S3::start(512 << 20);
    let dir = s3.scratch.path().to_path_buf();
    let b = "awscopy";
    s3.aws_ok(&["s3", "mb", &format!("s3://{b}")]);
    let big = pattern(100 * MIB, 71);
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    s3.aws_ok(&["s3", "cp", "big.bin", &format!("s3://{b}/big")]);
    s3.aws_ok(&[
        "s3",
        "cp",
        &format!("s3://{b}/big"),
        &format!("s3://{b}/big2"),
    ]);
    let head = json(
        &s3.aws_ok(&["s3api", "head-object", "--bucket", b, "--key", "big2"]),
        "head-object",
    );
    assert_eq!(head["ContentLength"], 100 * MIB, "{head}");
    // 100 MiB in aws-cli's 8 MiB parts: 13 of them, so the copy was
    // multipart (UploadPartCopy), not one CopyObject.
    let etag = head["ETag"].as_str().unwrap_or_default();
    assert!(
        etag.ends_with("-13\""),
        "big2's ETag {etag} is not a 13-part copy's"
    );
    s3.aws_ok(&["s3", "cp", &format!("s3://{b}/big2"), "big2.down"]);
    let down = std::fs::read(dir.join("big2.down")).unwrap();
    assert_eq!(digest(&down), digest(&big), "the copy's digest");
    assert!(down == big, "the copy is not the source byte for byte");

    // A copy of two ranges, part by part.
    let (r1, r2) = ((1000, 1000 + 5 * MIB), (90 * MIB, 100 * MIB));
    let created = json(
        &s3.aws_ok(&[
            "s3api",
            "create-multipart-upload",
            "--bucket",
            b,
            "--key",
            "ranged",
        ]),
        "create-multipart-upload",
    );
    let id = created["UploadId"]
        .as_str()
        .expect("an UploadId")
        .to_string();
    let mut parts = Vec::new();
    for (n, (first, end)) in [(1, r1), (2, r2)] {
        let out = json(
            &s3.aws_ok(&[
                "s3api",
                "upload-part-copy",
                "--bucket",
                b,
                "--key",
                "ranged",
                "--upload-id",
                &id,
                "--part-number",
                &n.to_string(),
                "--copy-source",
                &format!("{b}/big"),
                "--copy-source-range",
                &format!("bytes={first}-{}", end - 1),
            ]),
            "upload-part-copy",
        );
        let tag = out["CopyPartResult"]["ETag"]
            .as_str()
            .unwrap_or_else(|| panic!("no CopyPartResult.ETag in {out}"))
            .to_string();
        parts.push(serde_json::json!({"PartNumber": n, "ETag": tag}));
    }
    std::fs::write(
        dir.join("parts.json"),
        serde_json::json!({ "Parts": parts }).to_string(),
    )
    .unwrap();
    s3.aws_ok(&[
        "s3api",
        "complete-multipart-upload",
        "--bucket",
        b,
        "--key",
        "ranged",
        "--upload-id",
        &id,
        "--multipart-upload",
        "file://parts.json",
    ]);
    let mut want = big[r1.0..r1.1].to_vec();
    want.extend_from_slice(&big[r2.0..r2.1]);
    s3.aws_ok(&["s3", "cp", &format!("s3://{b}/ranged"), "ranged.down"]);
    let got = std::fs::read(dir.join("ranged.down")).unwrap();
    assert_eq!(digest(&got), digest(&want), "the ranged copy's digest");
    assert!(got == want, "the ranged copy is not the two ranges");

    if !s3.is_garage() {
        s3.stop();
        assert_eq!(
            digest(&s3.in_image(b, "big2")),
            digest(&big),
            "big2 in the image"
        );
        assert_eq!(
            digest(&s3.in_image(b, "ranged")),
            digest(&want),
            "ranged in the image"
        );
    }
}

#[test]
fn rclone_copy_sync_check_ls_delete() {
    require!(prereq::tool("rclone"), server_prereq());
    let mut s3 = S3::start(256 << 20);
    let dir = s3.scratch.path().to_path_buf();
    let mut files = make_tree(&dir.join("src"), 20);
    // Above the cutoff given below: rclone sends it in parts.
    let big = pattern(12 * MIB + 5, 29);
    std::fs::write(dir.join("src/big.bin"), &big).unwrap();
    files.push(("big.bin".into(), big.clone()));
    files.sort();
    let multipart = ["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"];

    s3.rclone_ok(&["mkdir", "s3:rclone"]);
    let mut args = vec!["copy", "src", "s3:rclone/copy"];
    args.extend_from_slice(&multipart);
    s3.rclone_ok(&args);
    s3.rclone_ok(&["check", "src", "s3:rclone/copy", "--download"]);
    s3.rclone_ok(&["copy", "s3:rclone/copy", "down"]);
    assert_eq!(tree(&dir.join("down")), summary(&files), "rclone copy down");

    // ls: every object with its size.
    let ls = s3.rclone_ok(&["ls", "s3:rclone"]);
    let mut got: Vec<(usize, String)> = ls
        .lines()
        .map(|l| {
            let (n, p) = l.trim().split_once(' ').expect("an ls line");
            (n.parse().unwrap(), p.to_string())
        })
        .collect();
    got.sort_by(|x, y| x.1.cmp(&y.1));
    let want: Vec<(usize, String)> = files
        .iter()
        .map(|(p, d)| (d.len(), format!("copy/{p}")))
        .collect();
    assert_eq!(got, want, "rclone ls:\n{ls}");

    // check --download compares bytes: one byte changed locally (same
    // size) is found.
    let mut changed = big.clone();
    let mid = changed.len() / 2;
    changed[mid] ^= 1;
    std::fs::write(dir.join("src/big.bin"), &changed).unwrap();
    let o = s3.rclone(&["check", "src", "s3:rclone/copy", "--download"]);
    assert!(
        !o.status.success(),
        "rclone check --download missed a changed byte"
    );

    // sync: the changed file sent, a removed one deleted, a new one added.
    std::fs::remove_file(dir.join("src/a/b/three.bin")).unwrap();
    std::fs::write(dir.join("src/new.txt"), b"new").unwrap();
    let mut args = vec!["sync", "src", "s3:rclone/copy"];
    args.extend_from_slice(&multipart);
    s3.rclone_ok(&args);
    s3.rclone_ok(&["check", "src", "s3:rclone/copy", "--download"]);
    s3.rclone_ok(&["sync", "s3:rclone/copy", "down"]);
    assert_eq!(
        tree(&dir.join("down")),
        tree(&dir.join("src")),
        "rclone sync down"
    );

    // delete: a filter's worth, then the rest.
    s3.rclone_ok(&["delete", "s3:rclone/copy", "--include", "*.txt"]);
    let ls = s3.rclone_ok(&["ls", "s3:rclone"]);
    assert!(
        !ls.contains(".txt") && ls.contains("copy/big.bin"),
        "after deleting *.txt:\n{ls}"
    );
    if !s3.is_garage() {
        s3.stop();
        let got = s3.in_image("rclone", "copy/big.bin");
        assert!(got == changed, "the synced big.bin is not the image's");
        s3.restart();
    }
    s3.rclone_ok(&["delete", "s3:rclone"]);
    let ls = s3.rclone_ok(&["ls", "s3:rclone"]);
    assert!(ls.trim().is_empty(), "after deleting everything:\n{ls}");
}

#[test]
fn boto3_every_call_presigned_urls_and_refused_keys() {
    require!(boto3(), server_prereq());
    let s3 = S3::start(256 << 20);
    let b = "boto3";
    s3.make_bucket(b);
    let (ro_id, ro_secret) = s3.read_only_key(b);
    let out = s3.boto3_ok(
        "all",
        b,
        &[("S3_RO_KEY_ID", &ro_id), ("S3_RO_SECRET", &ro_secret)],
    );
    // Every check ran (a check the script skipped is a failure here).
    let ok = out.lines().filter(|l| l.starts_with("ok ")).count();
    assert_eq!(ok, 16, "boto3_client.py all:\n{out}");
}

/// `pktfs stat IMG --json` (through the server's control socket when one
/// holds the image): the free counts.
fn free_space(img: &Path) -> [(String, u64); 3] {
    let o = Command::new(PKTFS)
        .args(["stat", img.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let j = json(&out_ok(&o, "pktfs stat --json"), "pktfs stat --json");
    ["buffers_free", "records_free", "inodes_free"].map(|k| {
        let v = j[k].as_u64().unwrap_or_else(|| panic!("no {k} in {j}"));
        (k.to_string(), v)
    })
}

#[test]
fn sigkill_mid_multipart_leaves_nothing_and_no_space() {
    require!(boto3(), server_prereq());
    if against_garage() {
        // Garage keeps unfinished uploads across a restart, as S3 does.
        let _ = writeln!(
            std::io::stderr(),
            "s3_clients: the SIGKILL test is for pktfs alone (PKTFS_S3_CLIENTS=garage)"
        );
        return;
    }
    let mut s3 = S3::start(256 << 20);
    let b = "killed";
    s3.make_bucket(b);
    s3.stop();
    s3.restart();
    let before = free_space(s3.img());

    // Two parts of 5 MiB in, a presigned URL for the third.
    let key = [("S3_KEY", "big/unfinished.bin")];
    let out = s3.boto3_ok("partial-multipart", b, &key);
    let url = out
        .lines()
        .find_map(|l| l.strip_prefix("part3-url "))
        .unwrap_or_else(|| panic!("no part3-url in: {out}"));
    let during = free_space(s3.img());
    let buffer_bytes = {
        let o = Command::new(PKTFS)
            .args(["stat", s3.img().to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        json(&out_ok(&o, "pktfs stat"), "stat")["buffer_size"]
            .as_u64()
            .unwrap()
    };
    assert!(
        before[0].1 - during[0].1 >= (10 * MIB as u64) / buffer_bytes,
        "the two parts hold no space: free buffers {} before, {} with the parts in",
        before[0].1,
        during[0].1
    );

    // The third part arriving: its head and 2 MiB of its 5 MiB body sent
    // when the server is killed.
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, path) = rest.split_at(rest.find('/').expect("a path"));
    let mut c = TcpStream::connect(host).unwrap();
    write!(
        c,
        "PUT {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n",
        5 * MIB
    )
    .unwrap();
    c.write_all(&pattern(2 * MIB, 77)).unwrap();
    // Until the server has taken what was sent (the socket's send queue
    // drained), at most 5 s.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) && unsent(&c) > 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    s3.kill9();
    drop(c);

    s3.restart();
    let after = free_space(s3.img());
    eprintln!("free before the upload {before:?}, with two parts in {during:?}, after the kill and restart {after:?}");
    assert_eq!(
        after, before,
        "free space after the restart differs from before the upload"
    );
    let out = s3.boto3_ok("after-kill", b, &key);
    assert!(out.contains("ok after the kill"), "{out}");
}

/// Bytes written to `s` that the peer's kernel has not yet taken: the
/// socket's send queue.
fn unsent(s: &TcpStream) -> usize {
    let port = s.local_addr().map(|a| a.port()).unwrap_or(0);
    tx_queue(port).unwrap_or(0)
}

/// The tx_queue of the loopback TCP socket bound to local `port`, from
/// /proc/net/tcp.
fn tx_queue(port: u16) -> Option<usize> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let want = format!(":{port:04X}");
    text.lines().skip(1).find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        if !w.get(1)?.ends_with(&want) {
            return None;
        }
        let (tx, _) = w.get(4)?.split_once(':')?;
        usize::from_str_radix(tx, 16).ok()
    })
}
