//! Persist modes: how a write becomes durable ([`PersistMode`]), what the
//! user asked for ([`PersistChoice`]), and the pair of mode and write-back
//! instruction an open image actually uses ([`Persistence`]), which is what
//! the tools print.

use super::arch::{detect_flush, FlushInsn};
use super::MediaError;

/// How writes are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersistMode {
    /// Write back each written line (clwb, or clflushopt / clflush where the
    /// CPU has no clwb or the user asked for them), then sfence. Default on a
    /// DAX mapping and on /dev/shm.
    Clwb,
    /// msync(MS_SYNC) the written pages: a file on a block device.
    Msync,
    /// sfence only: the CPU caches are in the persistence domain (eADR).
    Eadr,
}

/// What the user asked for; `Auto` picks by what the image is.
///
/// `Clflushopt` and `Clflush` are the `Clwb` mode with that write-back
/// instruction instead of the best one the CPU has. Both also evict the
/// line, so the next read of it misses: they show on a CPU with clwb what
/// pktfs costs on one without it (and keep those paths tested there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PersistChoice {
    #[default]
    Auto,
    Clwb,
    Clflushopt,
    Clflush,
    Msync,
    Eadr,
}

/// Every choice, in the order help and error texts list them (and parsing
/// tries them): the chain `PersistChoice::next` walks from `Auto`, built
/// when the crate compiles. `next` has no wildcard arm, so a new choice
/// does not compile until it has a place in the chain, and then `--persist`
/// parses and lists it.
const ALL: [PersistChoice; COUNT] = {
    let mut all = [PersistChoice::Auto; COUNT];
    let mut i = 0;
    let mut at = Some(PersistChoice::Auto);
    while let Some(c) = at {
        all[i] = c;
        i += 1;
        at = c.next();
    }
    all
};

/// How many choices the chain holds.
const COUNT: usize = {
    let mut n = 0;
    let mut at = Some(PersistChoice::Auto);
    while let Some(c) = at {
        n += 1;
        at = c.next();
    }
    n
};

/// The names `--persist` takes, for help and error texts:
/// "auto, clwb, clflushopt, clflush, msync, eadr".
pub fn persist_names() -> String {
    ALL.map(|c| c.to_string()).join(", ")
}

impl std::str::FromStr for PersistChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ALL.into_iter()
            .find(|c| c.to_string() == s)
            .ok_or_else(|| format!("unknown persist mode {s:?} ({})", persist_names()))
    }
}

impl std::fmt::Display for PersistChoice {
    /// The name `--persist` takes for it (parsing reads it from here).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PersistChoice::Auto => "auto",
            PersistChoice::Clwb => "clwb",
            PersistChoice::Clflushopt => "clflushopt",
            PersistChoice::Clflush => "clflush",
            PersistChoice::Msync => "msync",
            PersistChoice::Eadr => "eadr",
        })
    }
}

impl PersistChoice {
    /// The choice after this one in the order `ALL` lists (`None` after
    /// the last).
    const fn next(self) -> Option<PersistChoice> {
        match self {
            PersistChoice::Auto => Some(PersistChoice::Clwb),
            PersistChoice::Clwb => Some(PersistChoice::Clflushopt),
            PersistChoice::Clflushopt => Some(PersistChoice::Clflush),
            PersistChoice::Clflush => Some(PersistChoice::Msync),
            PersistChoice::Msync => Some(PersistChoice::Eadr),
            PersistChoice::Eadr => None,
        }
    }

    /// The write-back instruction this choice insists on, if it names one.
    pub fn write_back_insn(self) -> Option<FlushInsn> {
        match self {
            PersistChoice::Clflushopt => Some(FlushInsn::Clflushopt),
            PersistChoice::Clflush => Some(FlushInsn::Clflush),
            _ => None,
        }
    }

    /// The instruction to write lines back with: the one asked for (refused
    /// where the CPU lacks it, before anything is opened), else the best
    /// the CPU has.
    pub(super) fn resolve_insn(self) -> Result<FlushInsn, MediaError> {
        match self.write_back_insn() {
            Some(i) if i.available() => Ok(i),
            Some(i) => Err(MediaError::FlushUnavailable(i.name())),
            None => Ok(detect_flush()),
        }
    }
}

impl std::fmt::Display for PersistMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PersistMode::Clwb => "clwb",
            PersistMode::Msync => "msync",
            PersistMode::Eadr => "eadr",
        })
    }
}

/// An open image's persistence: the mode and, for the write-back mode, the
/// instruction. Prints as `--persist` would name it: `clwb`, `clflushopt`,
/// `clflush`, `msync` or `eadr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Persistence {
    pub mode: PersistMode,
    pub insn: FlushInsn,
}

impl std::fmt::Display for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.mode, self.insn) {
            (PersistMode::Clwb, FlushInsn::Clwb | FlushInsn::Clflushopt | FlushInsn::Clflush) => {
                f.write_str(self.insn.name())
            }
            (m, _) => m.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_ones_are_refused() {
        assert_eq!(
            persist_names(),
            "auto, clwb, clflushopt, clflush, msync, eadr"
        );
        for n in persist_names().split(", ") {
            let c: PersistChoice = n.parse().unwrap();
            assert_eq!(c.to_string(), n);
            let shown = match c {
                PersistChoice::Auto => "auto".to_string(),
                PersistChoice::Clwb => Persistence {
                    mode: PersistMode::Clwb,
                    insn: FlushInsn::Clwb,
                }
                .to_string(),
                PersistChoice::Msync => PersistMode::Msync.to_string(),
                PersistChoice::Eadr => PersistMode::Eadr.to_string(),
                c => Persistence {
                    mode: PersistMode::Clwb,
                    insn: c.write_back_insn().unwrap(),
                }
                .to_string(),
            };
            assert_eq!(shown, n);
        }
        let e = "clwbx".parse::<PersistChoice>().unwrap_err();
        assert!(e.contains("clwbx") && e.contains("clflushopt"), "{e}");
    }

    #[test]
    fn a_forced_instruction_is_used_or_refused_with_its_name() {
        for c in [PersistChoice::Clflushopt, PersistChoice::Clflush] {
            let i = c.write_back_insn().unwrap();
            match c.resolve_insn() {
                Ok(got) => {
                    assert!(i.available());
                    assert_eq!(got, i);
                }
                Err(e) => {
                    assert!(!i.available());
                    assert!(e.to_string().contains(i.name()), "{e}");
                }
            }
        }
        assert_eq!(PersistChoice::Clwb.resolve_insn().unwrap(), detect_flush());
        // What an eADR or msync image prints does not name an instruction.
        let p = Persistence {
            mode: PersistMode::Eadr,
            insn: FlushInsn::Clwb,
        };
        assert_eq!(p.to_string(), "eadr");
    }
}
