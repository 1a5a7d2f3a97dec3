//! The conventions every `pktfs` subcommand keeps, through the real
//! binary: one size syntax, host names wherever an address is, the same
//! --persist/--verify everywhere, every argument documented with its
//! default, errors that name a thing once, quiet ends on a closed pipe,
//! and no image left behind by an `up` that cannot listen.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};

use pktfs_fs::{FormatOptions, OpenOptions, Volume};

use crate::cli_common::*;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(PKTFS).args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A formatted image of `bytes` in a fresh directory.
fn image(bytes: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    Volume::format(
        &p,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    (dir, p)
}

const SUBCOMMANDS: [&str; 7] = ["mount", "serve", "send", "chain", "stat", "up", "scrub"];

#[test]
fn every_argument_is_documented_with_its_default() {
    let all: Vec<Vec<&str>> = SUBCOMMANDS
        .iter()
        .chain(&[
            "recv", "restore", "machine", "ls", "cat", "get", "put", "rm",
        ])
        .map(|s| vec![*s])
        .chain(["out", "recall", "collect"].map(|s| vec!["tier", s]))
        .chain(["add", "list", "rm"].map(|s| vec!["keys", s]))
        .collect();
    for cmd in &all {
        let sub = cmd.join(" ");
        let mut args = cmd.clone();
        args.push("--help");
        let out = run(&args);
        assert!(out.status.success(), "{sub} --help");
        let help = text(&out.stdout);
        let mut section = "";
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.starts_with(' ') && line.ends_with(':') {
                section = line;
                continue;
            }
            let t = line.trim_start();
            if !matches!(section, "Arguments:" | "Options:")
                || !(t.starts_with('-') || t.starts_with('<'))
            {
                continue;
            }
            // "  <IMAGE>  The image file" / "  --json  Print JSON": a name,
            // two or more spaces, a description; or, when clap puts help
            // on the next line (long option names), that line indented
            // deeper than the name.
            let inline = t
                .split_once("  ")
                .is_some_and(|(_, d)| !d.trim().is_empty());
            let indent = line.len() - t.len();
            let next_line = lines.get(i + 1).is_some_and(|n| {
                let nt = n.trim_start();
                n.len() - nt.len() > indent && !nt.is_empty()
            });
            assert!(
                inline || next_line,
                "pktfs {sub} --help: {line:?} has no description"
            );
        }
    }
    let serve = text(&run(&["serve", "--help"]).stdout);
    assert!(serve.contains("127.0.0.1:8080"), "{serve}");
    assert!(
        serve.contains("--persist <MODE>") && serve.contains("[default: auto]"),
        "{serve}"
    );
    let up = text(&run(&["up", "--help"]).stdout);
    assert!(
        up.contains("[default: 127.0.0.1:8080]") && up.contains("--verify <WHEN>"),
        "{up}"
    );
    for sub in ["mount", "up", "scrub"] {
        let h = text(&run(&[sub, "--help"]).stdout);
        assert!(
            h.contains("4GiB") && h.contains("powers of 1024"),
            "{sub}: {h}"
        );
    }
    let mount = text(&run(&["mount", "--help"]).stdout);
    assert!(
        mount.contains("--persist <MODE>") && mount.contains("-o persist=MODE"),
        "{mount}"
    );
}

#[test]
fn bad_values_are_usage_errors_naming_the_value_once() {
    for (args, what) in [
        (&["up", "--size", "4Q"][..], "4Q"),
        (&["scrub", "--rate", "lots", "x"], "lots"),
        (&["serve", "x", "--listen", "localhost"], "localhost"),
        (
            &["serve", "x", "--listen", "no-such-host.invalid:80"],
            "no-such-host.invalid:80",
        ),
        (&["serve", "x", "--persist", "fast"], "fast"),
        (&["mount", "x", "y", "--verify", "sometimes"], "sometimes"),
        (&["serve", "x", "--busy-poll-us", "5000000"], "5000000"),
        (&["serve", "x", "--busy-poll-us", "lots"], "lots"),
    ] {
        let out = run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.matches(what).count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let err = text(&run(&["serve", "x", "--listen", "no-such-host.invalid:80"]).stderr);
    assert!(err.contains("does not resolve"), "{err}");
}

/// `up --size 64MiB` and `--persist`/`--verify` on serve and up; a host
/// name as the listen address.
#[test]
fn sizes_host_names_and_durability_options() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("up.img");
    let port = free_port().port();
    let (child, first) = start(
        Command::new(PKTFS)
            .args(["up", "--no-mount", "--size", "64MiB", "--persist", "msync"])
            .args([
                "--verify",
                "always",
                "--listen",
                &format!("localhost:{port}"),
            ])
            .arg("--image")
            .arg(&img)
            // `up` makes its token under $HOME: this test's own.
            .env("HOME", dir.path())
            .env_remove("XDG_CONFIG_HOME"),
    );
    assert!(first.contains("(64 MiB, msync persistence)"), "{first}");
    wait_listening(format!("127.0.0.1:{port}").parse().unwrap());
    interrupt(child);
    assert_eq!(std::fs::metadata(&img).unwrap().len(), 64 << 20);

    let port = free_port().port();
    let (child, first) = start(
        Command::new(PKTFS)
            .arg("serve")
            .arg(&img)
            .args(["--persist", "msync", "--verify", "off"])
            .args(["--listen", &format!("localhost:{port}")]),
    );
    assert!(first.contains("(msync persistence)"), "{first}");
    wait_listening(format!("127.0.0.1:{port}").parse().unwrap());
    interrupt(child);
}

/// Whether /proc/cpuinfo lists `flag` for this CPU.
fn cpu_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == flag))
}

/// `--persist clflushopt` / `clflush`: the clwb mode with that write-back
/// instruction. Served where the CPU has it (the mode is printed by its
/// name, and what was stored is there after the server stops); refused
/// with the instruction's name, before the image is touched, where it
/// does not. An unknown mode's error lists the names.
#[test]
fn a_forced_write_back_instruction_is_used_or_refused() {
    use std::io::{Read, Write};
    for insn in ["clflushopt", "clflush"] {
        let (_dir, img) = image(32 << 20);
        let before = std::fs::read(&img).unwrap();
        let port = free_port().port();
        let mut cmd = Command::new(PKTFS);
        cmd.arg("serve")
            .arg(&img)
            .args(["--persist", insn])
            .args(["--listen", &format!("127.0.0.1:{port}")]);
        if !cpu_has(insn) {
            let out = cmd.output().unwrap();
            assert!(!out.status.success());
            let err = text(&out.stderr);
            assert!(err.contains(&format!("no {insn} instruction")), "{err}");
            assert_eq!(
                std::fs::read(&img).unwrap(),
                before,
                "the image was changed"
            );
            continue;
        }
        let (child, first) = start(&mut cmd);
        assert!(first.contains(&format!("({insn} persistence)")), "{first}");
        let addr = format!("127.0.0.1:{port}").parse().unwrap();
        wait_listening(addr);
        let body: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "PUT /f HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        s.write_all(&body).unwrap();
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).unwrap();
        assert!(resp.starts_with(b"HTTP/1.1 201"), "{}", text(&resp));
        interrupt(child);
        let v = Volume::open(&img, &OpenOptions::default()).unwrap();
        let a = v.lookup(v.root(), b"f").unwrap();
        assert_eq!(v.read(a.ino, 0, body.len() as u64 + 1).unwrap(), body);
        v.close().unwrap();
    }
    let err = text(&run(&["serve", "x", "--persist", "clwbx"]).stderr);
    assert!(err.contains("clflushopt") && err.contains("eadr"), "{err}");
}

/// An image held by a server: an offline command's refusal names the
/// image once.
#[test]
fn errors_name_the_image_once() {
    let (_dir, img) = image(16 << 20);
    let addr = free_port();
    let (child, _) = start(
        Command::new(PKTFS)
            .arg("serve")
            .arg(&img)
            .args(["--listen", &addr.to_string()]),
    );
    wait_listening(addr);
    // (`send` and `recv` no longer refuse a held image: they pass the
    // socket to the holder. The offline commands still refuse it.)
    let out = Command::new(PKTFS)
        .arg("cat")
        .arg(&img)
        .arg("/x")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.matches(img.to_str().unwrap()).count(), 1, "{err}");
    assert!(
        err.starts_with("pktfs: ") && !err.contains("pktfs: pktfs"),
        "{err}"
    );
    // Another image on the same address: the address named, once.
    let (_dir2, img2) = image(16 << 20);
    let out = Command::new(PKTFS)
        .arg("serve")
        .arg(&img2)
        .args(["--listen", &addr.to_string()])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.matches(&addr.to_string()).count(), 1, "{err}");
    interrupt(child);
}

/// `pktfs chain IMAGE FILE | head -1`: the command ends quietly when the
/// reader goes away (141, as `seq 1e9 | head` reports), no panic.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    let (_dir, img) = image(32 << 20);
    {
        let v = Volume::open(&img, &OpenOptions::default()).unwrap();
        let f = v.create(v.root(), b"many", 0o644, 0, 0).unwrap();
        // Every other 100 bytes: records that cannot merge.
        for i in 0..3000u64 {
            v.write(f.ino, i * 200, &[7u8; 100]).unwrap();
        }
        v.close().unwrap();
    }
    for args in [&["chain"][..], &["chain", "--json"]] {
        let mut child = Command::new(PKTFS)
            .args(args)
            .arg(&img)
            .arg("/many")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap(); // and the reader is dropped: the pipe is closed
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert!(
            !err.contains("panicked") && err.is_empty(),
            "{args:?}: {err}"
        );
        assert!(
            matches!(out.status.code(), Some(0 | 141)),
            "{args:?}: {}",
            out.status
        );
    }
}

/// `pktfs up` on a port in use: the address is named and no image is
/// left behind.
#[test]
fn up_on_a_busy_port_leaves_nothing_behind() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fresh.img");
    let out = Command::new(PKTFS)
        .args([
            "up",
            "--no-mount",
            "--size",
            "16M",
            "--listen",
            &addr.to_string(),
        ])
        .arg("--image")
        .arg(&img)
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")), "{err}");
    assert!(!img.exists(), "an image was left behind");
}

/// The man pages and completions scripts/install.sh installs, made from
/// the same definitions as --help.
#[test]
fn man_pages_and_completions() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(PKTFS)
        .arg("gen-docs")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let man8 = dir.path().join("man8");
    for sub in SUBCOMMANDS {
        let page = std::fs::read_to_string(man8.join(format!("pktfs-{sub}.8"))).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH"),
            "{sub}: not a man page"
        );
        assert!(page.contains(&format!("pktfs\\-{sub}")), "{sub}: {page}");
    }
    let mount = std::fs::read_to_string(man8.join("pktfs-mount.8")).unwrap();
    assert!(mount.contains("persist"), "{mount}");
    assert!(
        !man8.join("pktfs-gen-docs.8").exists(),
        "the hidden command has no page"
    );
    let top = std::fs::read_to_string(man8.join("pktfs.8")).unwrap();
    assert!(!top.contains("gen\\-docs"), "hidden from the page: {top}");
    for f in ["bash/pktfs", "zsh/_pktfs", "fish/pktfs.fish"] {
        let c = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(c.contains("scrub") && c.contains("persist"), "{f}: {c}");
    }
    if let Some(bash) = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
    {
        let ok = Command::new(bash)
            .arg("-n")
            .arg(dir.path().join("bash/pktfs"))
            .status()
            .unwrap();
        assert!(ok.success(), "the bash completion parses");
    }
}
