//! mkfs.pktfs: create (or re-create, with --force) a pktfs image.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use pktfs_fs::media::space::human_bytes as human;
use pktfs_fs::{FormatOptions, Volume};
use pktfs_layout::{Geometry, GeometryParams};
use pktfs_support::gendocs;
use pktfs_support::size::{parse_size, parse_size_u32, SIZE_FORMS};

#[derive(Parser, Debug)]
#[command(
    name = "mkfs.pktfs",
    version,
    about = "Create a pktfs image (a file, a file on /dev/shm, or a DAX device)",
    after_help = SIZE_FORMS
)]
struct Args {
    /// Image file to create or format.
    image: PathBuf,
    /// Image size, e.g. 64M, 4G, 4GiB (default: the existing file's size,
    /// else 4G).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    size: Option<u64>,
    /// Packet buffer size: a power of two from 512 to 1M, e.g. 2048, 4K,
    /// 64K (see docs/SIZING.md).
    #[arg(long, value_name = "SIZE", default_value = "2048", value_parser = parse_size_u32)]
    buffer_size: u32,
    /// Number of inodes (default: one per 16 KiB).
    #[arg(long)]
    inodes: Option<u32>,
    /// Number of packet-metadata records (default: one per buffer plus two per inode).
    #[arg(long)]
    records: Option<u64>,
    /// Volume label (up to 31 bytes; a longer one is refused).
    #[arg(long, value_parser = parse_label)]
    label: Option<String>,
    /// Format even if the file holds a pktfs image or other data.
    #[arg(short, long)]
    force: bool,
    /// Print only errors.
    #[arg(short, long)]
    quiet: bool,
}

/// The longest label the superblock holds (32 bytes, NUL-terminated).
const MAX_LABEL: usize = 31;

fn parse_label(s: &str) -> Result<String, String> {
    if s.len() > MAX_LABEL {
        // clap names the value; say only what is wrong with it.
        return Err(format!(
            "{} bytes long; a label is at most {MAX_LABEL} bytes",
            s.len()
        ));
    }
    if s.contains('\0') {
        return Err("a label cannot contain a NUL byte".into());
    }
    Ok(s.to_string())
}

/// Why the existing contents forbid formatting without --force, if they do.
fn existing_contents(path: &Path) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    // Before reading it: a FIFO would wait for a writer.
    pktfs_fs::media::check_path_kind(path).map_err(|e| e.to_string())?;
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut head = vec![0u8; 1 << 16];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    head.truncate(n);
    if pktfs_layout::superblock::has_magic(&head) {
        let what = match pktfs_layout::Superblock::from_bytes(&head, 0, meta.len()) {
            Ok(sb) => format!(
                "a pktfs image ({} bytes, {} inodes, mounted {} times)",
                sb.geometry.image_len_bytes, sb.geometry.inode_count, sb.mount_count
            ),
            Err(_) => "what looks like a (damaged) pktfs image".to_string(),
        };
        return Ok(Some(what));
    }
    if head.iter().any(|&b| b != 0) {
        return Ok(Some(format!("{} bytes of other data", meta.len())));
    }
    Ok(None)
}

fn print_geometry(g: &Geometry) {
    pktfs_support::outln!(
        "image          {} ({} bytes)",
        human(g.image_len_bytes),
        g.image_len_bytes
    );
    pktfs_support::outln!(
        "packet buffers {} x {} B = {} at offset {}",
        g.buffer_count,
        g.buffer_size_bytes,
        human(g.buffer_region_bytes()),
        g.buffer_offset
    );
    pktfs_support::outln!(
        "records        {} x 64 B = {} at offset {}",
        g.record_count,
        human((g.record_count + 1) * 64),
        g.record_offset
    );
    pktfs_support::outln!(
        "inodes         {} x 192 B = {} at offset {}",
        g.inode_count,
        human((g.inode_count as u64 + 1) * 192),
        g.inode_offset
    );
    pktfs_support::outln!(
        "journal        {} slots x {} B at offset {}",
        g.journal_slots,
        g.journal_slot_bytes,
        g.journal_offset
    );
}

fn run(a: Args) -> Result<(), String> {
    if let Some(why) = existing_contents(&a.image)? {
        if !a.force {
            return Err(format!(
                "{} already holds {why}; refusing to format it (use --force to destroy its contents)",
                a.image.display()
            ));
        }
    }
    let existing_len = std::fs::metadata(&a.image).map(|m| m.len()).unwrap_or(0);
    let size = a.size.unwrap_or(if existing_len > 0 {
        existing_len
    } else {
        4 << 30
    });
    let params = GeometryParams {
        image_len_bytes: size,
        buffer_size_bytes: a.buffer_size,
        inode_count: a.inodes,
        record_count: a.records,
    };
    // Check the geometry before touching the file.
    Geometry::compute(&params).map_err(|e| format!("cannot lay out {}: {e}", a.image.display()))?;
    let bar = if !a.quiet && std::io::stderr().is_terminal() {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "formatting {bar:40} {bytes}/{total_bytes} ({eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(b)
    } else {
        None
    };
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let g = Volume::format(
        &a.image,
        &FormatOptions {
            params,
            label: a.label.clone(),
        },
        &mut progress,
    )
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !a.quiet {
        pktfs_support::outln!("formatted {}", a.image.display());
        print_geometry(&g);
    }
    Ok(())
}

fn main() -> ExitCode {
    let r = match gendocs::requested() {
        Some(dir) => gendocs::generate(Args::command(), &dir),
        None => run(Args::parse()),
    };
    pktfs_support::finish(
        "mkfs.pktfs",
        r.map_err(pktfs_support::CliError::Failed),
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels() {
        assert!(super::parse_label("pm0").is_ok());
        assert!(super::parse_label(&"x".repeat(31)).is_ok());
        let e = super::parse_label(&"x".repeat(32)).unwrap_err();
        assert!(e.contains("at most 31 bytes"), "{e}");
    }
}
