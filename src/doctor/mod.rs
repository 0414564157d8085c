//! `ferrofit doctor`: the field report's pitfalls as checks, run on every
//! device. Each check is a [`Finding`] with a severity and, when it fails, the
//! change that fixes it.

pub mod checks;

use serde::Serialize;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Pass,
    Warn,
    Fail,
}

/// One check's outcome on one device.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub severity: Severity,
    /// What was measured.
    pub detail: String,
    /// What to change, when it did not pass.
    pub fix: Option<String>,
}

impl Finding {
    /// A passing finding.
    pub fn pass(check: &'static str, detail: String) -> Self {
        Finding {
            check,
            severity: Severity::Pass,
            detail,
            fix: None,
        }
    }

    /// A warning or failure with its fix.
    pub fn bad(check: &'static str, severity: Severity, detail: String, fix: &str) -> Self {
        Finding {
            check,
            severity,
            detail,
            fix: Some(fix.into()),
        }
    }
}
