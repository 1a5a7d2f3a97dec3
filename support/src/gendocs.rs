//! Man pages and shell completions made from a tool's clap definition, so
//! they say what `--help` says. Each binary has a hidden way to run it
//! (`pktfs gen-docs DIR`, `mkfs.pktfs --gen-docs DIR`, `fsck.pktfs
//! --gen-docs DIR`); scripts/install.sh installs what they write:
//!
//! - `DIR/man8/NAME.8`, and `NAME-SUB.8` for each subcommand;
//! - `DIR/bash/NAME`, `DIR/zsh/_NAME`, `DIR/fish/NAME.fish`.
//!
//! In the library the three binaries share (each is its own crate).

use std::path::Path;

use clap_complete::Shell;

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn man(cmd: clap::Command, file: &str, dir: &Path) -> Result<(), String> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("8")
        .render(&mut buf)
        .map_err(|e| format!("rendering {file}: {e}"))?;
    write(&dir.join("man8").join(format!("{file}.8")), &buf)
}

/// `TOOL --gen-docs DIR`, alone, for the tools whose command line is one
/// command with a required IMAGE (clap would ask for the image first).
pub fn requested() -> Option<std::path::PathBuf> {
    let mut a = std::env::args_os().skip(1);
    match (a.next(), a.next(), a.next()) {
        (Some(flag), Some(dir), None) if flag == "--gen-docs" => Some(dir.into()),
        _ => None,
    }
}

/// Write the man pages and completions of `cmd` under `dir`.
pub fn generate(mut cmd: clap::Command, dir: &Path) -> Result<(), String> {
    cmd.build();
    let name = cmd.get_name().to_string();
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        // clap takes a command's name as &'static str (without its
        // "string" feature); this runs once per subcommand in a short-lived
        // process, so the leak is bounded.
        let file: &'static str = format!("{name}-{}", sub.get_name()).leak();
        man(sub.clone().name(file), file, dir)?;
    }
    man(cmd.clone(), &name, dir)?;
    for (shell, sub, file) in [
        (Shell::Bash, "bash", name.clone()),
        (Shell::Zsh, "zsh", format!("_{name}")),
        (Shell::Fish, "fish", format!("{name}.fish")),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, name.clone(), &mut buf);
        write(&dir.join(sub).join(file), &buf)?;
    }
    Ok(())
}
