//! What fsck found and did: findings per file, changes per file, counts,
//! and the e2fsck exit code. Serialisable for `--json`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use serde::Serialize;

pub use crate::findings::{
    Change, Counts, DamageState, DamagedRange, Finding, Severity, SuperblockSummary,
};
use crate::scan::ScanOut;
use crate::{exit, Mode};

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub mode: Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superblock: Option<SuperblockSummary>,
    pub findings: Vec<Finding>,
    /// Damaged byte ranges of regular files, per file and range.
    pub damaged: Vec<DamagedRange>,
    pub changes: Vec<Change>,
    pub counts: Counts,
    /// Scan passes run; 0 when the image could not be checked at all.
    pub passes: u32,
    pub elapsed_ms: f64,
    /// fsck could not do its job (not a pktfs image, unreadable, read-only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operational_error: Option<String>,
    pub notes: Vec<String>,
    pub exit_code: i32,
}

impl Report {
    pub(crate) fn new(mode: Mode) -> Report {
        Report {
            mode,
            image: None,
            superblock: None,
            findings: Vec::new(),
            damaged: Vec::new(),
            changes: Vec::new(),
            counts: Counts::default(),
            passes: 1,
            elapsed_ms: 0.0,
            operational_error: None,
            notes: Vec::new(),
            exit_code: 0,
        }
    }

    /// An operational error stopped fsck before it counted anything (not
    /// an image, cannot open, cannot repair a read-only image).
    pub fn checked_nothing(&self) -> bool {
        self.operational_error.is_some() && self.counts == Counts::default()
    }

    /// A report for an image that could not be checked at all.
    pub fn operational(mode: Mode, msg: String) -> Report {
        let mut r = Report::new(mode);
        r.operational_error = Some(msg);
        r.passes = 0; // no pass ran
        r.exit_code = exit::OPERATIONAL;
        r
    }

    fn add(&mut self, mut f: Finding, fixed: bool) {
        f.fixed = fixed;
        if let Some(old) = self.findings.iter_mut().find(|o| o.key() == f.key()) {
            // Seen in an earlier pass: if it is back and not fixed now, the
            // earlier fix did not hold.
            if !fixed {
                old.fixed = false;
            }
            return;
        }
        self.findings.push(f);
    }

    pub(crate) fn absorb_scan(&mut self, s: &ScanOut, applied: &[usize]) {
        for f in &s.findings {
            let fixed = f.fix.is_some_and(|i| applied.contains(&i));
            self.add(f.clone(), fixed);
        }
        for d in &s.damaged {
            let mut d = d.clone();
            let fixed = s
                .findings
                .get(d.finding)
                .and_then(|f| f.fix)
                .is_some_and(|i| applied.contains(&i));
            if fixed {
                d.state = if d.drop {
                    DamageState::Dropped
                } else {
                    DamageState::Marked
                };
            }
            // Seen in an earlier pass (marked since, or still found).
            match self
                .damaged
                .iter_mut()
                .find(|o| (o.ino, o.start, o.end) == (d.ino, d.start, d.end))
            {
                Some(o) if o.state == DamageState::Found => *o = d,
                Some(_) => {}
                None => self.damaged.push(d),
            }
        }
        self.counts = s.counts.clone();
        if s.superblock.is_some() {
            self.superblock = s.superblock.clone();
        }
        if let Some(fatal) = &s.fatal {
            if fatal.operational {
                self.operational_error = Some(fatal.message.clone());
            }
        }
    }

    pub(crate) fn absorb_journal_pass(&mut self, s: &ScanOut, applied: &[usize]) {
        for f in &s.findings {
            if let Some(i) = f.fix {
                if applied.contains(&i) {
                    self.add(f.clone(), true);
                }
            }
        }
    }

    pub(crate) fn finish(&mut self, t0: Instant) {
        self.elapsed_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.exit_code = self.compute_exit_code();
    }

    fn compute_exit_code(&self) -> i32 {
        if self.operational_error.is_some() {
            exit::OPERATIONAL
        } else if self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error && !f.fixed)
        {
            exit::UNCORRECTED
        } else if !self.changes.is_empty() {
            exit::CORRECTED
        } else {
            exit::CLEAN
        }
    }

    /// No operational error and no error or warning left (fixed ones do not count).
    pub fn clean(&self) -> bool {
        self.operational_error.is_none()
            && !self
                .findings
                .iter()
                .any(|f| f.severity >= Severity::Warning && !f.fixed)
    }

    /// Errors left that mounting would not deal with by itself.
    pub fn errors_beyond_recovery(&self) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error && !f.fixed && !f.mount_recovers)
            .collect()
    }

    /// Errors (fixed or not).
    pub fn errors(&self) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect()
    }

    /// Unfixed findings of at least `s`.
    pub fn unfixed(&self, s: Severity) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity >= s && !f.fixed)
            .collect()
    }

    /// Findings grouped per inode (`None`: image-wide).
    pub fn by_inode(&self) -> BTreeMap<Option<u32>, Vec<&Finding>> {
        let mut m: BTreeMap<Option<u32>, Vec<&Finding>> = BTreeMap::new();
        for f in &self.findings {
            m.entry(f.ino).or_default().push(f);
        }
        m
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Human-readable report, grouped per file.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        if let Some(e) = &self.operational_error {
            let _ = writeln!(out, "fsck.pktfs: {e}");
            if self.checked_nothing() {
                // Counts of zero would read as an empty image, not as
                // "not checked".
                let _ = writeln!(
                    out,
                    "operational error (exit {}): not checked",
                    self.exit_code
                );
                return out;
            }
        }
        if !self.damaged.is_empty() {
            let _ = writeln!(out, "damaged file data:");
            for d in &self.damaged {
                let _ = writeln!(out, "  {}", d.line());
            }
        }
        for (ino, fs) in self.by_inode() {
            let head = match (ino, fs.iter().find_map(|f| f.path.clone())) {
                (None, _) => "image".to_string(),
                (Some(i), Some(p)) => format!("inode {i} ({p})"),
                (Some(i), None) => format!("inode {i}"),
            };
            let _ = writeln!(out, "{head}:");
            for f in fs {
                let sev = match f.severity {
                    Severity::Info => "info",
                    Severity::Warning => "warning",
                    Severity::Error => "ERROR",
                };
                let rec = f
                    .record
                    .map(|r| format!(" [record {r}]"))
                    .unwrap_or_default();
                let _ = write!(out, "  {sev} {}{rec}: {}", f.code, f.message);
                match (&f.repair, f.fixed) {
                    (Some(r), true) => {
                        let _ = write!(out, " -- FIXED: {r}");
                    }
                    (Some(r), false) if self.mode != Mode::Check => {
                        let _ = write!(out, " -- not fixed (would {r})");
                    }
                    (Some(r), false) => {
                        let _ = write!(out, " -- repair would {r}");
                    }
                    _ => {}
                }
                let _ = writeln!(out);
            }
        }
        if !self.changes.is_empty() {
            let _ = writeln!(out, "changes:");
            for c in &self.changes {
                let who = match (&c.path, c.ino) {
                    (Some(p), Some(i)) => format!("{p} (inode {i})"),
                    (None, Some(i)) => format!("inode {i}"),
                    (Some(p), None) => p.clone(),
                    (None, None) => "image".into(),
                };
                let _ = writeln!(out, "  {who}: {}", c.what);
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        let c = &self.counts;
        let _ = writeln!(
            out,
            "{} inodes ({} dirs, {} files, {} symlinks, {} special), {} records, {} bytes stored, {} payload bytes verified",
            c.inodes, c.directories, c.regular_files, c.symlinks, c.special_files, c.records, c.stored_bytes, c.payload_bytes_checked
        );
        if c.remote_records > 0 {
            let _ = writeln!(
                out,
                "tiered: {} remote records, {} bytes in the object store",
                c.remote_records, c.remote_bytes
            );
        }
        let _ = writeln!(
            out,
            "space: {} buffers used, {} free; {} records free; {} inodes free; {} shared ranges; {} journal slots pending",
            c.buffers_used, c.buffers_free, c.records_free, c.inodes_free, c.shared_ranges, c.journal_slots_pending
        );
        let verdict = match self.exit_code {
            exit::CLEAN => "clean",
            exit::CORRECTED => "errors corrected",
            exit::UNCORRECTED => "errors left uncorrected",
            _ => "operational error",
        };
        let _ = writeln!(
            out,
            "{verdict} (exit {}), {:.1} ms, {} pass(es)",
            self.exit_code, self.elapsed_ms, self.passes
        );
        out
    }
}
