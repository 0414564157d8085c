//! `ferrofit._native`: the Rust side of the Python package. It takes plain
//! f32 buffers (the package's `__init__.py` turns numpy arrays into them and
//! back, with the checks and messages a Python user expects) and calls the
//! library's front door, `ferrofit::fit`. Training releases the GIL; at each
//! log point it takes it back to report progress and to notice Ctrl-C.

use clap::ValueEnum;
use ferrofit::backend::devices::Inventory;
use ferrofit::backend::{select, BackendKind};
use ferrofit::bench::measure::{self, Plan};
use ferrofit::config::TrainConfig;
use ferrofit::engine::run::Progress;
use ferrofit::fit::{self, Options};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::Path;

/// A ferrofit error as a Python exception: bad input is a `ValueError`,
/// anything else a `RuntimeError`; the message is the front door's
/// ([`fit::FitError`]): the fix included, spoken of in parameters
/// (`val_split`), not the CLI's flags.
fn err(e: impl Into<fit::FitError>) -> PyErr {
    use ferrofit::error::exit;
    let e = e.into();
    let msg = e.to_string();
    match e.error().exit_code() {
        exit::USAGE => PyValueError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

fn choice<T: ValueEnum>(what: &str, s: &str) -> PyResult<T> {
    T::from_str(s, true).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
            .collect();
        PyValueError::new_err(format!("{what}={s:?} is not one of {}", names.join(", ")))
    })
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// How often a run looks for Ctrl-C between log points (a long run's log
/// points can be minutes apart).
const SIGNAL_CHECK: std::time::Duration = std::time::Duration::from_millis(50);

/// Progress for Python: calls `callback(step, steps, loss)` at log points and
/// checks for Ctrl-C there and every [`SIGNAL_CHECK`] (the GIL is taken only then).
struct PyProgress {
    callback: Option<Py<PyAny>>,
    steps: usize,
    interrupted: Option<PyErr>,
    checked: std::time::Instant,
}

impl Progress for PyProgress {
    fn update(&mut self, step: usize, loss: Option<f64>) {
        let Some(loss) = loss else { return };
        Python::attach(|py| {
            if let Err(e) = py.check_signals() {
                self.interrupted = Some(e);
                return;
            }
            if let Some(cb) = &self.callback {
                if let Err(e) = cb.call1(py, (step + 1, self.steps, loss)) {
                    self.interrupted = Some(e);
                }
            }
        });
    }

    fn stop(&mut self) -> bool {
        if self.interrupted.is_none() && self.checked.elapsed() >= SIGNAL_CHECK {
            self.checked = std::time::Instant::now();
            if let Err(e) = Python::attach(|py| py.check_signals()) {
                self.interrupted = Some(e);
            }
        }
        self.interrupted.is_some()
    }
}

/// A trained model (see `ferrofit.Model` for the Python face).
#[pyclass(module = "ferrofit._native", frozen)]
struct Model(fit::Model);

#[pymethods]
impl Model {
    #[getter]
    fn inputs(&self) -> usize {
        self.0.inputs()
    }

    #[getter]
    fn outputs(&self) -> usize {
        self.0.outputs()
    }

    #[getter]
    fn activation(&self) -> String {
        format!("{:?}", self.0.activation).to_lowercase()
    }

    /// The standardisation (names, means, deviations) as JSON.
    fn normalization_json(&self) -> String {
        serde_json::to_string(&self.0.normalization).unwrap_or_default()
    }

    /// The training record (as `train --json` prints it), if the model has one.
    fn record_json(&self) -> Option<String> {
        self.0
            .record
            .as_ref()
            .and_then(|r| serde_json::to_string(r).ok())
    }

    /// Predictions for row-major f32 inputs, as f32 bytes.
    fn predict<'py>(&self, py: Python<'py>, x: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let y = self.0.predict(&floats(x)).map_err(err)?;
        Ok(PyBytes::new(py, &to_bytes(&y)))
    }

    fn save(&self, dir: &str) -> PyResult<()> {
        self.0.save(Path::new(dir)).map_err(err)
    }

    /// `(name, shape, f32 bytes)` for each tensor, PyTorch's names and layout.
    fn tensors<'py>(&self, py: Python<'py>) -> Vec<(String, Vec<usize>, Bound<'py, PyBytes>)> {
        ferrofit::save::tensors(&self.0.params)
            .into_iter()
            .map(|(name, shape, bytes)| (name, shape, PyBytes::new(py, &bytes)))
            .collect()
    }
}

/// Fits a model; see `ferrofit.fit`.
#[pyfunction(name = "fit")]
#[pyo3(signature = (x, y, inputs, outputs, hidden, layers, activation, loss, optimizer, lr, weight_decay, schedule, steps, batch_size, precision, seed, val_split, patience, backend, device, engine, callback))]
#[allow(clippy::too_many_arguments)]
fn fit_model(
    py: Python<'_>,
    x: &[u8],
    y: &[u8],
    inputs: usize,
    outputs: usize,
    hidden: usize,
    layers: usize,
    activation: &str,
    loss: &str,
    optimizer: &str,
    lr: Option<f64>,
    weight_decay: f64,
    schedule: &str,
    steps: usize,
    batch_size: Option<usize>,
    precision: &str,
    seed: u64,
    val_split: f64,
    patience: Option<usize>,
    backend: &str,
    device: Option<usize>,
    engine: &str,
    callback: Option<Py<PyAny>>,
) -> PyResult<Model> {
    let opt = Options {
        hidden,
        layers,
        activation: choice("activation", activation)?,
        loss: choice("loss", loss)?,
        optimizer: choice("optimizer", optimizer)?,
        lr,
        weight_decay,
        schedule: choice("schedule", schedule)?,
        steps,
        batch_size,
        precision: choice("precision", precision)?,
        seed,
        val_split,
        patience,
        backend: choice("backend", backend)?,
        device,
        engine: choice("engine", engine)?,
    };
    let (x, y) = (floats(x), floats(y));
    let mut progress = PyProgress {
        callback,
        steps,
        interrupted: None,
        checked: std::time::Instant::now(),
    };
    let result = py.detach(|| fit::fit_with(&x, &y, inputs, outputs, &opt, &mut progress));
    if let Some(e) = progress.interrupted {
        return Err(e);
    }
    result.map(Model).map_err(err)
}

/// Reads a model folder (or model file) written by `Model.save` or `ferrofit train --out`.
#[pyfunction]
fn load(path: &str) -> PyResult<Model> {
    fit::Model::load(Path::new(path)).map(Model).map_err(err)
}

/// Every device this build can use, as JSON (as `ferrofit devices --json`).
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<String> {
    let inv = py.detach(Inventory::probe);
    serde_json::to_string(&inv).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Times the seed job (or `n`, `hidden`, `layers`, `steps`) on each backend
/// named (all devices when empty): JSON rows as `ferrofit bench` records them.
#[pyfunction(name = "bench")]
#[pyo3(signature = (backends, n, hidden, layers, steps, runs, warmup))]
#[allow(clippy::too_many_arguments)] // one argument per keyword of `ferrofit.bench`
fn bench_rows(
    py: Python<'_>,
    backends: Vec<String>,
    n: usize,
    hidden: usize,
    layers: usize,
    steps: usize,
    runs: usize,
    warmup: usize,
) -> PyResult<String> {
    let kinds = backends
        .iter()
        .map(|b| choice::<BackendKind>("backends", b))
        .collect::<PyResult<Vec<_>>>()?;
    let mut cfg = TrainConfig {
        n,
        steps,
        ..TrainConfig::default()
    };
    cfg.model.hidden = hidden;
    cfg.model.layers = layers;
    cfg.run.log_every = (steps / 20).max(1);
    cfg.validate().map_err(err)?;
    let rows = py.detach(|| {
        let inv = Inventory::probe();
        let targets = if kinds.is_empty() {
            select::every_device(&inv)
        } else {
            kinds
                .iter()
                .map(|&k| select::select(&inv, k, None))
                .collect::<ferrofit::Result<Vec<_>>>()?
        };
        let plan = Plan { warmup, runs };
        targets
            .iter()
            .map(|t| {
                let mut run = |c: &TrainConfig| {
                    ferrofit::trainer::Trainer::new(c.clone(), t.clone())
                        .run()
                        .map(|r| r.outcome)
                };
                measure::measure(&mut run, &cfg, plan, "ferrofit", &t.label(), &t.info.name)
            })
            .collect::<ferrofit::Result<Vec<_>>>()
    });
    let rows = rows.map_err(err)?;
    serde_json::to_string(&rows).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_function(wrap_pyfunction!(fit_model, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(bench_rows, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
