//! The one error a tool's `main` handles: what went wrong, and so the exit
//! status. Commands return `Result<_, CliError>` (a `String` converts into
//! [`CliError::Failed`]); [`finish`] prints it once, as `TOOL: message`,
//! and turns it into the process's status.

use std::process::ExitCode;

/// Why a command ended without success.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The arguments were wrong: status 2 (as every coreutil).
    #[error("{0}")]
    Usage(String),
    /// The command failed: status 1.
    #[error("{0}")]
    Failed(String),
    /// The command failed with a status its caller defines (mount(8)'s 32,
    /// "mount failure").
    #[error("{message}")]
    FailedWith { status: u8, message: String },
    /// The command ended with a status of its own, already explained on
    /// stderr or in its output (scrub's and fsck's e2fsck-style codes,
    /// recv's, mount(8)'s 32): nothing more is printed.
    #[error("exit status {0}")]
    Status(u8),
}

impl CliError {
    /// The process status this error ends with.
    pub fn status(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) => 1,
            CliError::FailedWith { status, .. } => *status,
            CliError::Status(s) => *s,
        }
    }
}

impl From<String> for CliError {
    fn from(s: String) -> CliError {
        CliError::Failed(s)
    }
}

/// End `tool` with the result of its command: success is status 0; an
/// error is printed once to stderr as `tool: message` (and handed to
/// `also`, e.g. a log when stderr goes nowhere) and becomes its status.
pub fn finish(tool: &str, r: Result<(), CliError>, also: impl FnOnce(&CliError)) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !matches!(e, CliError::Status(_)) {
                also(&e);
                eprintln!("{tool}: {e}");
            }
            ExitCode::from(e.status())
        }
    }
}

/// A status a command computed (0 is success).
pub fn status(code: i32) -> Result<(), CliError> {
    match u8::try_from(code) {
        Ok(0) => Ok(()),
        Ok(s) => Err(CliError::Status(s)),
        Err(_) => Err(CliError::Failed(format!("exit status {code} out of range"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(CliError::Usage("x".into()).status(), 2);
        assert_eq!(CliError::from("x".to_string()).status(), 1);
        assert_eq!(CliError::Status(32).status(), 32);
        let e = CliError::FailedWith {
            status: 32,
            message: "m".into(),
        };
        assert_eq!((e.status(), e.to_string().as_str()), (32, "m"));
        assert!(status(0).is_ok());
        assert!(matches!(status(4), Err(CliError::Status(4))));
        assert!(matches!(status(-1), Err(CliError::Failed(_))));
        assert!(matches!(status(300), Err(CliError::Failed(_))));
    }
}
