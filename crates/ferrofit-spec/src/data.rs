//! Where a job's points come from: a built-in [`Task`], a CSV file, or the
//! caller's arrays (the library API), as one enum that records keep in the
//! flat `task` / `csv` fields they always had.

use crate::columns::{Missing, MissingPolicy};
use crate::error::{FerroError, Result};
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// Where a job's points come from: a built-in task or a CSV file.
///
/// Recorded as the flat fields it always had — `"task": "sin"`, or
/// `"task": "csv"` beside `"csv": {…}` — so records of every version load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "DataFields", into = "DataFields")]
pub enum Data {
    /// A built-in task.
    Task(Task),
    /// A CSV file.
    Csv(CsvSpec),
    /// Arrays the caller passed (`ferrofit::fit`, the Python package).
    Arrays,
}

/// [`Data`] as records hold it.
#[derive(Serialize, Deserialize)]
struct DataFields {
    task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    csv: Option<CsvSpec>,
}

impl TryFrom<DataFields> for Data {
    type Error = String;
    fn try_from(d: DataFields) -> std::result::Result<Data, String> {
        match (d.task.as_str(), d.csv) {
            (_, Some(c)) => Ok(Data::Csv(c)),
            ("csv", None) => Err("`task` is csv but no `csv` section says which file".into()),
            ("arrays", None) => Ok(Data::Arrays),
            (name, None) => Task::parse(name).map(Data::Task).map_err(|e| e.to_string()),
        }
    }
}

impl From<Data> for DataFields {
    fn from(d: Data) -> DataFields {
        match d {
            Data::Task(t) => DataFields {
                task: t.name().into(),
                csv: None,
            },
            Data::Csv(c) => DataFields {
                task: "csv".into(),
                csv: Some(c),
            },
            Data::Arrays => DataFields {
                task: "arrays".into(),
                csv: None,
            },
        }
    }
}

impl std::fmt::Display for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Data::Task(t) => f.pad(t.name()),
            Data::Csv(c) => f.pad(&c.path),
            Data::Arrays => f.pad("the caller's arrays"),
        }
    }
}

impl Data {
    /// The task's name, or `csv`: what records call the data source.
    pub fn name(&self) -> &str {
        match self {
            Data::Task(t) => t.name(),
            Data::Csv(_) => "csv",
            Data::Arrays => "arrays",
        }
    }

    /// The built-in task, or an error for CSV data (which the caller loads
    /// and passes as data).
    pub fn task(&self) -> Result<Task> {
        match self {
            Data::Task(t) => Ok(*t),
            Data::Csv(c) => Err(FerroError::arg(
                "csv",
                &c.path,
                "CSV data is loaded by the caller (userdata::load) and passed as data",
            )),
            Data::Arrays => Err(FerroError::arg(
                "task",
                "arrays",
                "the caller's arrays are passed as data, not generated",
            )),
        }
    }

    /// The built-in task's `n` points ([`Data::task`]).
    pub fn generate(&self, n: usize, seed: u64) -> Result<crate::task::Dataset> {
        Ok(self.task()?.generate(n, seed))
    }
}

/// Where user data comes from and which columns are which.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CsvSpec {
    /// The file.
    pub path: String,
    /// Input columns: comma-separated names or 0-based indices.
    pub inputs: String,
    /// Target columns, the same way.
    pub targets: String,
    /// Fraction of rows held out for validation (shuffled with the seed).
    pub val_split: f64,
    /// `None`: detected from the first line.
    pub delimiter: Option<char>,
    /// What a row with a missing cell in a selected column does.
    #[serde(default)]
    pub missing: MissingPolicy,
    /// Cell texts that mean missing (an empty cell always does).
    #[serde(default)]
    pub missing_values: Missing,
    /// Input columns to one-hot encode though they hold numbers (names or
    /// indices); text columns are encoded so anyway.
    #[serde(default)]
    pub categorical: String,
}

#[cfg(test)]
mod data_tests {
    use super::*;
    use crate::config::{OptimizerKind, TrainConfig};

    #[test]
    fn data_is_recorded_as_the_flat_fields_of_earlier_versions() {
        let cfg = TrainConfig::default();
        let v = serde_json::to_value(&cfg).unwrap();
        assert_eq!(v["task"], "x2-noise");
        assert!(v.get("csv").is_none() && v.get("data").is_none());
        assert_eq!(serde_json::from_value::<TrainConfig>(v).unwrap(), cfg);

        let csv = CsvSpec {
            path: "load.csv".into(),
            inputs: "temp".into(),
            targets: "load".into(),
            val_split: 0.1,
            delimiter: None,
            ..CsvSpec::default()
        };
        let with_csv = TrainConfig {
            data: Data::Csv(csv.clone()),
            ..TrainConfig::default()
        };
        let v = serde_json::to_value(&with_csv).unwrap();
        assert_eq!(
            (v["task"].as_str(), v["csv"]["path"].as_str()),
            (Some("csv"), Some("load.csv"))
        );
        assert_eq!(
            serde_json::from_value::<TrainConfig>(v).unwrap().data,
            Data::Csv(csv)
        );
    }

    #[test]
    fn a_configuration_recorded_by_an_earlier_version_loads() {
        // The `config` of a run.json written before run control and kernel
        // knobs were grouped (docs/results/2026-11-30-h200x2/checkpoints-deep/).
        let old = r#"{"task": "x2-noise", "n": 1000000, "model": {"inputs": 1, "hidden": 10, "layers": 1, "outputs": 1, "activation": "relu"}, "loss": "mse", "optimizer": "adam", "lr": 0.01, "weight_decay": 0.0, "schedule": "constant", "steps": 100, "batch_size": null, "accumulate": 1, "precision": "f32", "seed": 42, "target_loss": null, "data_on_device": true, "log_every": 10, "points_per_unit": null, "persistent": true}"#;
        let cfg: TrainConfig = serde_json::from_str(old).unwrap();
        assert_eq!(cfg.data, Data::Task(Task::X2Noise));
        assert_eq!(cfg.optimizer, OptimizerKind::Adam);
        assert_eq!((cfg.run.log_every, cfg.run.target_loss), (10, None));
        assert!(cfg.kernel.persistent && cfg.kernel.data_on_device && cfg.kernel.lanes.is_none());
        let again: serde_json::Value = serde_json::to_value(&cfg).unwrap();
        let old: serde_json::Value = serde_json::from_str(old).unwrap();
        assert_eq!(again, old, "it is written back with the same fields");
    }

    #[test]
    fn an_unknown_task_or_a_csv_task_without_its_file_is_refused() {
        let mut v = serde_json::to_value(TrainConfig::default()).unwrap();
        v["task"] = "cubic".into();
        let e = serde_json::from_value::<TrainConfig>(v.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cubic") && e.contains("x2-noise"), "{e}");
        v["task"] = "csv".into();
        let e = serde_json::from_value::<TrainConfig>(v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("csv"), "{e}");
    }
}
