//! fsck.pktfs as a library: check a pktfs image, and repair it.
//!
//! The check is an independent walk of the image with `layout`'s validation
//! (it does not call `Volume::open`): both superblocks and the geometry, the
//! journal (committed slots are overlaid as recovery would replay them),
//! every reachable inode, every chain (record CRC, slice bounds, file
//! offsets, cycles, records claimed twice), every payload CRC32C, the
//! directory tree (reachability, dirent targets and types, `.`/`..` through
//! the parent field, link counts), sizes against extents, shared buffer
//! bytes, and space accounting. It reports every problem, not the first.
//!
//! Repair (`-y`, or `-p` for the safe subset) replays or discards the
//! journal, restores superblocks, keeps damaged file data marked damaged
//! (or drops it with `drop_damaged`), cuts a regular file's data chain at a
//! bad record, links back the records its link still leads to and marks the
//! range lost in between damaged (so it never reads as zeros; see
//! `scan::lost`), truncates other chains at their first bad record, drops
//! bad dirents and xattrs, moves orphans to `/lost+found`, fixes link
//! counts, parents and sizes, then checks again, until the image is clean
//! or nothing more can be done. Free space is DRAM-only in pktfs: there is
//! nothing to rebuild on the media.
//!
//! Whatever bytes the image holds, fsck does not panic, terminates (every
//! walk is bounded by the claimed-record map, repair by a pass limit), and
//! never writes outside the image (every address is derived from a
//! validated geometry).

mod apply;
mod findings;
mod report;
mod scan;

use std::time::Instant;

use pktfs_fs::media::{ExclusivePm, Pm};

pub use report::{
    Change, Counts, DamageState, DamagedRange, Finding, Report, Severity, SuperblockSummary,
};

/// What to do about problems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// `-n`: check only; never write.
    Check,
    /// `-p`: fix what is safe to fix without asking: nothing is dropped.
    /// What would need dropping is reported and left; the exit code is then
    /// 4 (run fsck manually), as e2fsck -p.
    Preen,
    /// `-y`: fix everything fixable.
    Yes,
}

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub mode: Mode,
    /// Show a progress bar on a terminal (stderr) for large images.
    pub progress: bool,
    /// Most repair passes before giving up (each pass rescans).
    pub max_passes: u32,
    /// `--drop-damaged`: a damaged data range becomes a hole (the record is
    /// unlinked), and so does a range lost where a data chain broke (it is
    /// not marked), instead of being kept and marked damaged. Never in `-p`.
    pub drop_damaged: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mode: Mode::Check,
            progress: false,
            max_passes: 8,
            drop_damaged: false,
        }
    }
}

impl Options {
    pub fn check() -> Options {
        Options::default()
    }
    pub fn yes() -> Options {
        Options {
            mode: Mode::Yes,
            ..Options::default()
        }
    }
    pub fn preen() -> Options {
        Options {
            mode: Mode::Preen,
            ..Options::default()
        }
    }
}

/// e2fsck's exit codes.
pub mod exit {
    pub const CLEAN: i32 = 0;
    pub const CORRECTED: i32 = 1;
    pub const UNCORRECTED: i32 = 4;
    pub const OPERATIONAL: i32 = 8;
    /// Usage or syntax error (bad option, missing image).
    pub const USAGE: i32 = 16;
    /// Cancelled by the user (SIGINT, SIGTERM).
    pub const CANCELED: i32 = 32;
}

/// Check `pm` without writing to it (`-n`), whatever `opts.mode` says.
/// Committed journal slots are overlaid as recovery would replay them.
pub fn check(pm: &mut Pm, opts: &Options) -> Report {
    let pm = pm.exclusive();
    let t0 = Instant::now();
    let mut report = Report::new(Mode::Check);
    let s = scan::scan(&pm, true, opts.progress, opts.drop_damaged);
    report.absorb_scan(&s, &[]);
    report.finish(t0);
    report
}

/// Check and repair `pm` as `opts.mode` allows (`Check` = [`check`]).
pub fn repair(pm: &mut Pm, opts: &Options) -> Report {
    if opts.mode == Mode::Check {
        return check(pm, opts);
    }
    let mut pm = pm.exclusive();
    let t0 = Instant::now();
    let mut report = Report::new(opts.mode);
    if pm.is_read_only() {
        report.operational_error =
            Some("the image is open read-only; cannot repair (use -n)".into());
        report.passes = 0; // nothing was scanned
        report.finish(t0);
        return report;
    }
    if let Some(bits) = unknown_ro_compat(&pm) {
        report.operational_error = Some(format!(
            "the image uses features this build can only read (ro_compat bits {bits:#x}); \
             cannot repair it (check with -n, or upgrade pktfs)"
        ));
        report.passes = 0; // nothing was scanned
        report.finish(t0);
        return report;
    }
    let safe_only = opts.mode == Mode::Preen;
    let mut passes = 0;
    // The geometry the image epoch was moved with: repairs do not keep the
    // inodes' change counters, so direct readers must know one ran
    // (`pktfs_layout::live`): odd before the first write, even at the end.
    let mut epoch: Option<pktfs_layout::Geometry> = None;
    loop {
        passes += 1;
        let s = scan::scan(&pm, true, opts.progress && passes == 1, opts.drop_damaged);
        if s.fatal.is_some() || passes > opts.max_passes.max(1) {
            report.absorb_scan(&s, &[]);
            if passes > opts.max_passes.max(1) && s.fatal.is_none() && !s.fixes.is_empty() {
                report
                    .notes
                    .push(format!("gave up after {} repair passes", opts.max_passes));
            }
            break;
        }
        // Pending journal slots are replayed (or discarded) before anything
        // else: the rest of the scan saw the image as it will be after that.
        let journal_only = s.fixes.iter().any(|f| f.fix.is_journal());
        // An inferred geometry is not preen's to act on, not even to replay
        // the journal with.
        if safe_only && (s.geometry_inferred || !journal_only && s.fixes.iter().any(|f| !f.safe)) {
            // Preen stops at the first problem that needs something dropped
            // (as e2fsck -p): fixing the safe ones around it would act on a
            // tree that the manual repair is about to change (a link count
            // that counts a dirent -y will drop, say).
            report.absorb_scan(&s, &[]);
            break;
        }
        let chosen: Vec<usize> = s
            .fixes
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                (!safe_only || f.safe)
                    && (!journal_only || f.fix.is_journal() || f.fix.is_superblock())
            })
            .map(|(i, _)| i)
            .collect();
        if chosen.is_empty() {
            report.absorb_scan(&s, &[]);
            break;
        }
        if epoch.is_none() {
            if let Some(g) = s.geometry {
                pktfs_fs::volume::epoch_begin(pm.pm(), &g);
                epoch = Some(g);
            }
        }
        let changes = apply::apply(&mut pm, &s, &chosen);
        if journal_only {
            // Only the journal findings of this pass are settled; the rest
            // are found again (or not) on the replayed image.
            report.absorb_journal_pass(&s, &chosen);
        } else {
            report.absorb_scan(&s, &chosen);
        }
        report.changes.extend(changes);
    }
    report.passes = passes;
    if let Some(g) = epoch {
        pktfs_fs::volume::epoch_end(pm.pm(), &g, 1..=g.inode_count);
    }
    if safe_only
        && report
            .unfixed(Severity::Error)
            .iter()
            .any(|f| f.repair.is_some())
    {
        // e2fsck -p's "UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY".
        report.notes.push(
            "preen left what it cannot repair without dropping something: run fsck.pktfs manually (-n to see, -y to repair)".into(),
        );
    }
    if !report.changes.is_empty() {
        report.notes.push(
            "free space needs no rebuilding: it is DRAM-only in pktfs, rebuilt at mount from what is reachable".into(),
        );
    }
    report.finish(t0);
    report
}

/// `check` or `repair`, by mode.
/// Read-only-compatible feature bits of a valid superblock (the primary,
/// else the backup) that this build does not know: repairing would write
/// an image whose rules it does not fully know.
fn unknown_ro_compat(pm: &ExclusivePm<'_>) -> Option<u32> {
    use pktfs_layout::superblock::{
        Superblock, BACKUP_OFFSET, PRIMARY_OFFSET, RO_COMPAT_SUPPORTED,
    };
    [PRIMARY_OFFSET, BACKUP_OFFSET]
        .into_iter()
        .filter(|&off| off + 256 <= pm.len())
        .find_map(|off| Superblock::from_bytes(pm.slice(off, 256), off, pm.len()).ok())
        .map(|sb| sb.ro_compat & !RO_COMPAT_SUPPORTED.bits())
        .filter(|&bits| bits != 0)
}

pub fn run(pm: &mut Pm, opts: &Options) -> Report {
    match opts.mode {
        Mode::Check => check(pm, opts),
        _ => repair(pm, opts),
    }
}
