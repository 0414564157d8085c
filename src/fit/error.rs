//! The front door's error: ferrofit's typed error, worded for a program —
//! the fields and arguments it sets (`val_split`), not the command-line flags
//! the CLI's messages name (`--val-split`).

use crate::error::FerroError;

/// An error of the front door: a [`FerroError`] whose message speaks of
/// the fields and arguments a program gives (`val_split`, `lr`) where the
/// CLI's names flags (`--val-split`, `--lr`); commands in backticks
/// (`` `ferrofit devices` ``) are kept as they are.
#[derive(Debug)]
pub struct FitError(pub FerroError);

impl FitError {
    /// The typed error underneath (to match on: `FerroError::Diverged`, …).
    pub fn error(&self) -> &FerroError {
        &self.0
    }
}

impl From<FerroError> for FitError {
    fn from(e: FerroError) -> Self {
        FitError(e)
    }
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&in_fields(&self.0.to_string()))
    }
}

impl std::error::Error for FitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

/// `msg` with each `--flag-name` outside backticks as `flag_name`.
pub fn in_fields(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    for (i, part) in msg.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out += part;
            continue;
        }
        let mut rest = part;
        while let Some(at) = rest.find("--") {
            out += &rest[..at];
            rest = &rest[at + 2..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(rest.len());
            out += &rest[..end].replace('-', "_");
            rest = &rest[end..];
        }
        out += rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_fields_outside_backticks() {
        assert_eq!(
            in_fields("invalid --val-split 2: hold out less; lower --lr, or run `ferrofit train --resume DIR`"),
            "invalid val_split 2: hold out less; lower lr, or run `ferrofit train --resume DIR`"
        );
        let e = FitError(FerroError::arg("patience", 3, "needs --val-split > 0"));
        assert_eq!(e.to_string(), "invalid patience 3: needs val_split > 0");
        assert!(matches!(e.error(), FerroError::InvalidArg { .. }));
    }
}
