//! Both superblock copies: which one to use, and what to rewrite.

use super::*;

/// The superblock fsck reads the image by (None when neither copy is
/// usable, with `out.fatal` saying why), and what to rewrite of the other.
pub(super) fn superblocks(pm: &ExclusivePm<'_>, out: &mut ScanOut) -> Option<Geometry> {
    let len = pm.len();
    let p = Superblock::from_bytes(pm.slice(PRIMARY_OFFSET, 256), PRIMARY_OFFSET, len);
    let b = Superblock::from_bytes(pm.slice(BACKUP_OFFSET, 256), BACKUP_OFFSET, len);
    let sb = pick(p, b, out)?;
    mount_state(&sb, out);
    out.superblock = Some(summary(&sb));
    let g = sb.geometry;
    out.sb = Some(sb);
    Some(g)
}

/// A finding, with the fix that answers it (if any) planned.
fn add(out: &mut ScanOut, mut f: Finding, fix: Option<PlannedFix>) {
    if let Some(fx) = fix {
        f.repair = Some(fx.what.clone());
        f.fix = Some(out.fixes.len());
        out.fixes.push(fx);
    }
    out.findings.push(f);
}

/// The fix that writes `sb` at `offset`.
fn write(offset: u64, sb: &Superblock, what: &str) -> PlannedFix {
    PlannedFix {
        fix: Fix::Superblock {
            offset,
            bytes: Box::new(sb.to_bytes()),
        },
        safe: true,
        ino: None,
        path: None,
        what: what.to_string(),
    }
}

/// A finding a writable mount would repair by itself too.
fn recoverable(sev: Severity, code: &'static str, msg: impl Into<String>) -> Finding {
    let mut f = Finding::new(sev, code, msg);
    f.mount_recovers = true;
    f
}

/// Which copy to trust: the primary when it is valid (the backup rewritten
/// from it when it differs or is bad), else the backup (the primary
/// restored from it), else none.
fn pick(
    p: Result<Superblock, Corrupt>,
    b: Result<Superblock, Corrupt>,
    out: &mut ScanOut,
) -> Option<Superblock> {
    const FROM_PRIMARY: &str = "rewrite the backup superblock from the primary";
    match (p, b) {
        (Ok(p), Ok(b)) => {
            // A writable mount rewrites both copies from the primary.
            if p.geometry != b.geometry {
                let f = recoverable(
                    Severity::Error,
                    "superblock.backup_geometry",
                    "backup superblock's geometry differs from the primary's",
                );
                add(out, f, Some(write(BACKUP_OFFSET, &p, FROM_PRIMARY)));
            } else if p.to_bytes() != b.to_bytes() {
                let f = recoverable(
                    Severity::Info,
                    "superblock.backup_stale",
                    format!(
                        "backup superblock is older (mount count {} vs {}): a crash between the two superblock writes",
                        b.mount_count, p.mount_count
                    ),
                );
                add(out, f, Some(write(BACKUP_OFFSET, &p, FROM_PRIMARY)));
            }
            Some(p)
        }
        (Ok(p), Err(e)) => {
            // A crash while the backup was being rewritten; a writable mount
            // rewrites both copies.
            let f = recoverable(
                Severity::Error,
                "superblock.backup",
                format!("backup superblock is bad: {e}"),
            );
            add(out, f, Some(write(BACKUP_OFFSET, &p, FROM_PRIMARY)));
            Some(p)
        }
        (Err(e), Ok(b)) => {
            if matches!(
                e,
                Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
            ) {
                out.fatal = Some(Fatal {
                    operational: true,
                    message: format!("{e}"),
                });
                return None;
            }
            let f = recoverable(
                Severity::Error,
                "superblock.primary",
                format!("primary superblock is bad ({e}); the backup is valid"),
            );
            let what = "restore the primary superblock from the backup";
            add(out, f, Some(write(PRIMARY_OFFSET, &b, what)));
            Some(b)
        }
        (Err(e), Err(eb)) => {
            neither(&e, &eb, out);
            None
        }
    }
}

/// Neither copy is valid: say whether this is not a pktfs image at all, one
/// of a newer format, one cut short (and how to give it its length back),
/// or a pktfs image whose superblocks are both damaged.
fn neither(e: &Corrupt, eb: &Corrupt, out: &mut ScanOut) {
    let not_pktfs = matches!(e, Corrupt::NotPktfs { .. }) && matches!(eb, Corrupt::NotPktfs { .. });
    let newer = matches!(
        e,
        Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
    );
    if not_pktfs || newer || matches!(e, Corrupt::Truncated { .. }) {
        let message = match e {
            // fsck repairs what the image holds, not its length: say how
            // to get to where it can.
            Corrupt::Truncated { expected, .. } => format!(
                "{e}: give the file its length back (truncate -s {expected} IMAGE; \
                 bytes past the cut are lost), then run fsck.pktfs -y again"
            ),
            _ => format!("{e}"),
        };
        out.fatal = Some(Fatal {
            operational: true,
            message,
        });
    } else {
        out.findings.push(Finding::new(
            Severity::Error,
            "superblock.none",
            format!("no valid superblock: primary: {e}; backup: {eb}"),
        ));
        out.fatal = Some(Fatal {
            operational: false,
            message: "no valid superblock".into(),
        });
    }
}

/// What the mount state says: clean, or left mounted (a crash, or mounted
/// now).
fn mount_state(sb: &Superblock, out: &mut ScanOut) {
    match sb.state {
        STATE_CLEAN => {}
        STATE_MOUNTED => out.findings.push(recoverable(
            Severity::Info,
            "superblock.not_clean",
            "image was not unmounted cleanly (or is mounted)",
        )),
        s => out.findings.push(Finding::new(
            Severity::Warning,
            "superblock.state",
            format!("unknown mount state {s}"),
        )),
    }
}

/// The superblock as the report shows it.
fn summary(sb: &Superblock) -> SuperblockSummary {
    let label_end = sb
        .label
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(sb.label.len());
    SuperblockSummary {
        image_len_bytes: sb.geometry.image_len_bytes,
        buffer_size_bytes: sb.geometry.buffer_size_bytes,
        inode_count: sb.geometry.inode_count,
        record_count: sb.geometry.record_count,
        buffer_count: sb.geometry.buffer_count,
        state: sb.state,
        mount_count: sb.mount_count,
        label: show(&sb.label[..label_end]),
    }
}
