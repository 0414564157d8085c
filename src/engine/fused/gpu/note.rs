//! What the fused GPU engine says about its kernels (`engine_note`, `doctor`,
//! `bench`): which kernel runs the pass, laid out how, with which operands.

use super::engine::whole_steps;
use crate::engine::fused::gpu::GpuFused;
use cubecl::prelude::*;

impl<R: Runtime> GpuFused<R> {
    /// Which kernel runs the pass, and how.
    pub(super) fn kernel_detail(&self) -> Option<String> {
        let detail = self.kernel_layout()?;
        Some(format!("{detail}{}", self.unused_knobs()))
    }

    /// Knobs set for another kernel than the one that runs, said, so that a
    /// run does not look as if it had taken them.
    fn unused_knobs(&self) -> String {
        let k = &self.cfg.kernel;
        let one_layer = self.tile().is_none();
        let tiled = !one_layer && self.pass.tensor.is_none();
        let mut said = String::new();
        if (k.lanes.is_some() || k.points_per_unit.is_some()) && !one_layer {
            said += "; --lanes and --points-per-unit tune the one-layer kernels only";
        }
        if k.tiled_threads.is_some() && !tiled {
            said += "; --tiled-threads sets the f32 tiled kernel's workgroups only";
        }
        said
    }

    /// Which kernel runs the pass, laid out how.
    fn kernel_layout(&self) -> Option<String> {
        if let Some(p) = self.pass.tensor {
            return Some(format!(
                "tensor-core kernel ({} operands, f32 accumulation and master weights), \
                 {} points a tile, {} units a workgroup, products on {}, weights {}{}{}, \
                 two launches per step",
                self.cfg.precision.name(),
                p.tile,
                p.units,
                if p.strips {
                    "registers (mma.sync), each plane its own 16 points through every layer"
                } else if p.regs {
                    "registers (mma.sync)"
                } else {
                    "cmma fragments"
                },
                if p.streamed {
                    "read from global memory"
                } else {
                    "in shared memory"
                },
                match p.held {
                    0 => String::new(),
                    1 => ", the top layer's weight gradient held in registers".into(),
                    n => format!(", the top {n} layers' weight gradients held in registers"),
                },
                if p.down_sums {
                    ", bias sums made as the δ going down is"
                } else {
                    ""
                }
            ));
        }
        if let Some(tile) = self.tile() {
            let b = self.pass.blocks;
            let loads = if b.lined { "16-byte" } else { "one-value" };
            let ahead = if b.rows_ahead {
                ", partial rows read ahead"
            } else {
                ""
            };
            // Half precision without tensor cores: said, with what it costs.
            let half = match self.pass.half {
                Some(_) => format!(
                    "; {} operands in the hidden-to-hidden products emulated, rounded in f32 \
                     (no tensor-core pass for this model on this device): the tensor cores' \
                     numerics, at f32's speed or below",
                    self.cfg.precision.name()
                ),
                None => String::new(),
            };
            return Some(format!(
                "tiled kernel, {tile} points a tile, blocks {}×{} (weight gradients {}×{}), \
                 {loads} loads{ahead}, {} units a workgroup, two launches per step{half}",
                b.points, b.units, b.grad_u, b.grad_k, b.cube
            ));
        }
        let scheme = match &self.persistent {
            Some(p) => format!("persistent kernel, {} workgroup(s)", p.cubes),
            None if self.cfg.kernel.persistent && whole_steps(&self.cfg) => {
                "two launches per step: the persistent kernel's workgroups cannot all run at once here".to_string()
            }
            None => "two launches per step".into(),
        };
        Some(match self.pass.lanes {
            1 => scheme,
            l => format!("{scheme}; {l} lanes share each point"),
        })
    }
}
