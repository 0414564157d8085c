//! `--config FILE` for the commands that take a job (`train`, `bench`,
//! `tune`): TOML whose keys are flag names (`hidden = 64`, sections allowed
//! for grouping), or an earlier run's `run.json`, whose configuration is
//! turned back into flags (`ferrofit_spec::args::flags`). The file's flags go
//! first, so flags on the command line win (`args_override_self`).

use clap::CommandFactory;
use ferrofit::config::TrainConfig;
use ferrofit::error::FerroError;
use std::ffi::OsString;
use std::path::Path;

/// The commands that read `--config`.
const TAKES_CONFIG: [&str; 3] = ["train", "bench", "tune"];

/// `args` with the flags of any `--config FILE` put right after the command's name.
pub fn expand(args: Vec<OsString>) -> anyhow::Result<Vec<OsString>> {
    let Some(at) = args
        .iter()
        .position(|a| TAKES_CONFIG.iter().any(|c| a == c))
    else {
        return Ok(args);
    };
    let mut file = None;
    for (i, a) in args.iter().enumerate().skip(at + 1) {
        let a = a.to_string_lossy();
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--config=") {
            file = Some(v.to_string());
        } else if a == "--config" {
            file = args.get(i + 1).map(|v| v.to_string_lossy().into_owned());
        }
    }
    let Some(file) = file else {
        return Ok(args);
    };
    let command = args[at].to_string_lossy().into_owned();
    let flags = read(Path::new(&file), &command)?;
    let mut out = args[..=at].to_vec();
    out.extend(flags.into_iter().map(OsString::from));
    out.extend(args[at + 1..].iter().cloned());
    Ok(out)
}

fn bad(file: &Path, detail: String) -> FerroError {
    FerroError::File {
        path: file.display().to_string(),
        detail,
    }
}

/// The flags `file` gives `command`, each checked to be one of its flags.
fn read(file: &Path, command: &str) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(file).map_err(|source| FerroError::Io {
        action: "reading the --config file",
        path: file.display().to_string(),
        source,
    })?;
    let flags = if text.trim_start().starts_with('{') {
        from_record(file, &text)?
    } else {
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            bad(
                file,
                format!("not TOML ({e}); write one `flag = value` a line, e.g. hidden = 64"),
            )
        })?;
        let mut flags = Vec::new();
        from_toml(file, &table, &mut flags)?;
        flags
    };
    let cli = super::Cli::command();
    let cmd = cli
        .find_subcommand(command)
        .expect("TAKES_CONFIG names commands");
    for f in flags.iter().filter_map(|f| f.strip_prefix("--")) {
        let known = cmd
            .get_arguments()
            .any(|a| a.get_long() == Some(f) && !a.is_hide_set() && f != "config");
        if !known {
            anyhow::bail!(bad(
                file,
                format!("`{f}` is not a flag of `ferrofit {command}` (see `ferrofit {command} --help`; keys are flag names such as hidden or lr)")
            ));
        }
    }
    Ok(flags)
}

/// A run record's (or a bare configuration's) job as flags.
fn from_record(file: &Path, text: &str) -> anyhow::Result<Vec<String>> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        bad(
            file,
            format!("not JSON ({e}); give a run.json that `ferrofit train --out` wrote, or TOML"),
        )
    })?;
    let config = value.get("config").cloned().unwrap_or(value);
    let cfg: TrainConfig = serde_path_to_error::deserialize(config).map_err(|e| {
        bad(
            file,
            format!(
                "its configuration does not fit at `{}`: {}",
                e.path(),
                e.inner()
            ),
        )
    })?;
    Ok(ferrofit_spec::args::flags(&cfg))
}

/// A TOML table's keys as flags, in key order; sub-tables (`[model]`) only
/// group keys.
fn from_toml(file: &Path, table: &toml::Table, out: &mut Vec<String>) -> anyhow::Result<()> {
    use toml::Value;
    for (key, value) in table {
        let flag = format!("--{}", key.replace('_', "-"));
        let scalar = |v: &Value| -> Option<String> {
            match v {
                Value::String(s) => Some(s.clone()),
                Value::Integer(i) => Some(i.to_string()),
                Value::Float(f) => Some(f.to_string()),
                _ => None,
            }
        };
        match value {
            Value::Table(t) => from_toml(file, t, out)?,
            Value::Boolean(true) => out.push(flag),
            Value::Boolean(false) => {}
            Value::Array(items) => {
                let parts: Option<Vec<String>> = items.iter().map(scalar).collect();
                let Some(parts) = parts else {
                    anyhow::bail!(bad(
                        file,
                        format!("`{key}`: a list holds strings or numbers")
                    ));
                };
                out.extend([flag, parts.join(",")]);
            }
            v => match scalar(v) {
                Some(s) => out.extend([flag, s]),
                None => anyhow::bail!(bad(
                    file,
                    format!("`{key}`: give a string, number, true or a list")
                )),
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<OsString> {
        s.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn a_toml_file_or_a_run_record_becomes_flags_that_the_command_line_overrides() {
        let dir = std::env::temp_dir().join(format!("ferrofit-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let toml = dir.join("job.toml");
        std::fs::write(&toml, "hidden = 64\nlr = 0.01\n[kernel]\nhost_data = true\nmissing_values = [\"NA\", \"?\"]\n").unwrap();
        let got = expand(args(&format!(
            "ferrofit -q train --config {} --lr 0.1",
            toml.display()
        )))
        .unwrap();
        let want = format!(
            "ferrofit -q train --hidden 64 --host-data --missing-values NA,? --lr 0.01 --config {} --lr 0.1",
            toml.display()
        );
        assert_eq!(got, args(&want));
        let cli = <super::super::Cli as clap::Parser>::try_parse_from(got).unwrap();
        assert!(format!("{:?}", cli.command).contains("lr: Some(0.1)"));
        // A run.json: its job's flags.
        let record = dir.join("run.json");
        let cfg = TrainConfig {
            steps: 7,
            ..TrainConfig::default()
        };
        std::fs::write(&record, serde_json::json!({ "config": cfg }).to_string()).unwrap();
        let got = expand(args(&format!(
            "ferrofit train --config={}",
            record.display()
        )))
        .unwrap();
        assert!(
            got.windows(2).any(|w| w[0] == "--steps" && w[1] == "7"),
            "{got:?}"
        );
        // Unknown keys and commands without a job are refused or left alone.
        std::fs::write(&toml, "hiden = 64\n").unwrap();
        let e = expand(args(&format!("ferrofit train --config {}", toml.display()))).unwrap_err();
        assert!(
            e.to_string()
                .contains("`hiden` is not a flag of `ferrofit train`"),
            "{e}"
        );
        std::fs::write(&toml, "csv = \"d.csv\"\n").unwrap();
        let e = expand(args(&format!("ferrofit bench --config {}", toml.display()))).unwrap_err();
        assert!(
            e.to_string()
                .contains("`csv` is not a flag of `ferrofit bench`"),
            "{e}"
        );
        let plain = args("ferrofit devices --json");
        assert_eq!(expand(plain.clone()).unwrap(), plain);
    }
}
