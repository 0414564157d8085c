//! The configurations `tune` tries: engine, precision, batch size and
//! accumulation, learning rate scaled with the batch, and the GPU kernel's
//! points per unit, launch scheme and lanes per point — in the order most likely to win first, so early winners
//! cut later, hopeless trials short.

use crate::config::{EngineKind, ModelSpec, Precision, TrainConfig};
use crate::engine::fused::gpu_kernel_limits::takes_tiled;
use serde::{Deserialize, Serialize};

/// The knobs `tune` sets; everything else comes from the job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Engine.
    pub engine: EngineKind,
    /// Compute precision.
    pub precision: Precision,
    /// Points per micro-batch (`None`: full batch).
    pub batch_size: Option<usize>,
    /// Micro-batches a step (gradient accumulation).
    pub accumulate: usize,
    /// Learning rate.
    pub lr: f64,
    /// GPU fused kernel tile (`None`: the default).
    pub points_per_unit: Option<usize>,
    /// GPU fused kernel: many full-batch steps per launch (`--no-persistent`: false).
    #[serde(default = "yes")]
    pub persistent: bool,
    /// GPU fused kernel: threads per point (`None`: by the layer's width).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<usize>,
    /// GPU fused kernel for several hidden layers: threads a workgroup
    /// (`None`: by the model and device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiled_threads: Option<usize>,
}

fn yes() -> bool {
    true
}

impl Candidate {
    /// The job's own configuration, as a candidate.
    pub fn of(cfg: &TrainConfig, engine: EngineKind) -> Self {
        Candidate {
            engine,
            precision: cfg.precision,
            batch_size: cfg.batch_size,
            accumulate: cfg.accumulate,
            lr: cfg.lr,
            points_per_unit: cfg.kernel.points_per_unit,
            persistent: cfg.kernel.persistent,
            lanes: cfg.kernel.lanes,
            tiled_threads: cfg.kernel.tiled_threads,
        }
    }

    /// `base` with this candidate's knobs.
    pub fn apply(&self, base: &TrainConfig) -> TrainConfig {
        TrainConfig {
            precision: self.precision,
            batch_size: self.batch_size,
            accumulate: self.accumulate,
            lr: self.lr,
            kernel: crate::config::KernelKnobs {
                points_per_unit: self.points_per_unit,
                persistent: self.persistent,
                lanes: self.lanes,
                tiled_threads: self.tiled_threads,
                ..base.kernel.clone()
            },
            ..base.clone()
        }
    }

    /// A short description for tables.
    pub fn label(&self) -> String {
        let batch = match self.batch_size {
            None => "full".to_string(),
            Some(b) => b.to_string(),
        };
        let mut s = format!("{:?} {:?} batch {batch}", self.engine, self.precision).to_lowercase();
        if self.accumulate > 1 {
            s += &format!(" x{}", self.accumulate);
        }
        s += &format!(" lr {:.4}", self.lr);
        if let Some(p) = self.points_per_unit {
            s += &format!(" ppu {p}");
        }
        if !self.persistent {
            s += " two-launch";
        }
        if let Some(l) = self.lanes {
            s += &format!(" lanes {l}");
        }
        if let Some(t) = self.tiled_threads {
            s += &format!(" threads {t}");
        }
        s
    }
}

/// What the search needs to know about the device.
#[derive(Clone, Copy, Debug)]
pub struct Space {
    /// The fused engine can run this job here.
    pub fused: bool,
    /// The device is a GPU (the fused kernel's tile matters).
    pub gpu: bool,
    /// The fused engine runs this job in half precision here (tensor cores).
    pub tensor: bool,
}

/// Smallest mini-batch tried.
const MIN_BATCH: usize = 256;
/// Tiles tried for the GPU fused kernel.
pub const TILES: [usize; 5] = [4, 8, 16, 32, 64];

/// Stage one: every engine, precision, batch and learning rate worth a trial.
pub fn first_stage(base: &TrainConfig, space: Space) -> Vec<Candidate> {
    let n = base.n;
    let mut batches: Vec<Option<usize>> = vec![None];
    batches.extend(
        [4, 16, 64]
            .iter()
            .map(|d| n / d)
            .filter(|&b| b >= MIN_BATCH)
            .map(Some),
    );
    if base.batch_size.is_some() && !batches.contains(&base.batch_size) {
        batches.push(base.batch_size);
    }
    // Learning rates: the job's, twice it, and for mini-batches the job's
    // scaled by sqrt(batch / n) (the square-root scaling rule).
    let lrs = |b: Option<usize>| -> Vec<f64> {
        let mut v = vec![base.lr, 2.0 * base.lr];
        if let Some(b) = b {
            v.push(base.lr * (b as f64 / n as f64).sqrt());
        }
        v
    };
    let mut engines = Vec::new();
    if space.fused {
        let mut precisions = vec![Precision::F32];
        if space.tensor {
            precisions.extend([Precision::Bf16, Precision::F16]);
        }
        engines.push((EngineKind::Fused, precisions));
    }
    engines.push((
        EngineKind::General,
        vec![Precision::F32, Precision::Bf16, Precision::F16],
    ));
    let mut out = Vec::new();
    for (engine, precisions) in engines {
        for &precision in &precisions {
            for &batch_size in &batches {
                for lr in lrs(batch_size) {
                    out.push(Candidate {
                        engine,
                        precision,
                        batch_size,
                        accumulate: 1,
                        lr,
                        points_per_unit: base.kernel.points_per_unit,
                        persistent: base.kernel.persistent,
                        lanes: base.kernel.lanes,
                        tiled_threads: base.kernel.tiled_threads,
                    });
                }
            }
        }
        // Accumulation: the full batch as four micro-batches (same gradient,
        // smaller buffers) — worth it only where the full batch is slow to hold.
        if n / 4 >= MIN_BATCH {
            out.push(Candidate {
                engine,
                precision: precisions[0],
                batch_size: Some(n.div_ceil(4)),
                accumulate: 4,
                lr: base.lr,
                points_per_unit: base.kernel.points_per_unit,
                persistent: base.kernel.persistent,
                lanes: base.kernel.lanes,
                tiled_threads: base.kernel.tiled_threads,
            });
        }
    }
    out
}

/// Lanes per point tried for hidden layers at least [`LANES_FROM`] wide.
pub const LANES: [usize; 5] = [1, 2, 4, 8, 16];
/// Narrower layers keep one thread per point (a whole gradient row fits).
pub const LANES_FROM: usize = 16;

/// Threads a workgroup tried for the tiled kernel (the device may allow
/// fewer: the engine then takes its most, and says so).
pub const TILED_THREADS: [usize; 3] = [256, 512, 1024];

/// Stage two: the best fused candidate with every GPU tile, with the other
/// launch scheme (persistent or two launches per step) and, for wide layers,
/// with every number of lanes per point. For models the tiled kernel takes
/// ([`takes_tiled`]: several hidden layers, or many parameters),
/// which those knobs do not reach, its threads a workgroup instead — where
/// it runs in f32 or emulates half precision (not on tensor cores).
pub fn tiles_of(best: &Candidate, space: Space, model: &ModelSpec) -> Vec<Candidate> {
    let tiled = takes_tiled(model.layers, model.parameter_count());
    if !(space.gpu && best.engine == EngineKind::Fused) {
        return vec![];
    }
    if tiled {
        // On tensor cores the tiled kernel does not run.
        if space.tensor && best.precision != Precision::F32 {
            return vec![];
        }
        return TILED_THREADS
            .iter()
            .filter(|&&t| Some(t) != best.tiled_threads)
            .map(|&t| Candidate {
                tiled_threads: Some(t),
                ..best.clone()
            })
            .collect();
    }
    let lanes = if model.hidden >= LANES_FROM {
        &LANES[..]
    } else {
        &[]
    };
    TILES
        .iter()
        .filter(|&&t| Some(t) != best.points_per_unit)
        .map(|&t| Candidate {
            points_per_unit: Some(t),
            ..best.clone()
        })
        .chain([Candidate {
            persistent: !best.persistent,
            ..best.clone()
        }])
        .chain(
            lanes
                .iter()
                .filter(|&&l| Some(l) != best.lanes)
                .map(|&l| Candidate {
                    lanes: Some(l),
                    ..best.clone()
                }),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_layers_get_every_lane_count_and_deep_models_every_thread_count() {
        let gpu = Space {
            fused: true,
            gpu: true,
            tensor: false,
        };
        let best = Candidate::of(&TrainConfig::default(), EngineKind::Fused);
        let wide = |hidden| ModelSpec {
            hidden,
            ..TrainConfig::default().model
        };
        let lanes = |hidden| -> Vec<Option<usize>> {
            tiles_of(&best, gpu, &wide(hidden))
                .into_iter()
                .filter(|c| c.lanes.is_some())
                .map(|c| c.lanes)
                .collect()
        };
        assert_eq!(lanes(64), LANES.map(Some).to_vec());
        assert!(lanes(LANES_FROM - 1).is_empty());
        // Every other knob stays the best candidate's.
        for c in tiles_of(&best, gpu, &wide(64))
            .iter()
            .filter(|c| c.lanes.is_some())
        {
            assert_eq!(
                (c.lr, c.persistent, c.batch_size),
                (best.lr, best.persistent, best.batch_size)
            );
            assert!(c.label().contains(&format!("lanes {}", c.lanes.unwrap())));
        }
        // On a CPU there is no kernel tile, launch scheme or lane count to try.
        let cpu = Space {
            fused: true,
            gpu: false,
            tensor: false,
        };
        assert!(tiles_of(&best, cpu, &wide(64)).is_empty());
        // A model the tiled kernel takes: its threads a workgroup instead.
        let deep = ModelSpec {
            layers: 3,
            ..wide(64)
        };
        let threads: Vec<_> = tiles_of(&best, gpu, &deep)
            .into_iter()
            .map(|c| (c.tiled_threads, c.lanes, c.points_per_unit, c.persistent))
            .collect();
        let expect =
            TILED_THREADS.map(|t| (Some(t), best.lanes, best.points_per_unit, best.persistent));
        assert_eq!(threads, expect.to_vec());
        assert!(tiles_of(&best, gpu, &deep)[0]
            .label()
            .ends_with("threads 256"));
        // None in half precision on tensor cores (the tiled kernel does not
        // run), all where half precision is emulated on it.
        let half = Candidate {
            precision: Precision::Bf16,
            ..best.clone()
        };
        let tensor = Space {
            tensor: true,
            ..gpu
        };
        assert!(tiles_of(&half, tensor, &deep).is_empty());
        assert_eq!(tiles_of(&half, gpu, &deep).len(), TILED_THREADS.len());
        assert_eq!(tiles_of(&best, tensor, &deep).len(), TILED_THREADS.len());
        assert!(tiles_of(&best, cpu, &deep).is_empty());
    }
}
