//! CUDA: Burn's CUDA backend for the general engine, the CubeCL kernels on
//! CubeCL's CUDA runtime (libcuda and NVRTC loaded at run time).

use super::{Platform, Target};
use crate::config::TrainConfig;
use crate::engine::fused::envelope;
use crate::engine::fused::gpu::tensor::tensor_plan;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::Result;
use crate::model::Params;
use crate::task::Dataset;
use burn::backend::cuda::CudaDevice;
use cubecl::cuda::CudaRuntime;

/// The CUDA platform (CubeCL's CUDA runtime).
pub struct Cuda;

fn device(t: &Target) -> CudaDevice {
    // Before CubeCL's runtime starts, so its kernels are cached on disk.
    crate::backend::kernel_cache::enable(&t.info);
    CudaDevice::new(t.info.index)
}

impl Platform for Cuda {
    fn general(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        init: &Params,
        host: Option<&Dataset>,
    ) -> Result<Box<dyn StepEngine>> {
        type B = burn::backend::Autodiff<burn::backend::Cuda>;
        super::general_on::<B>(cfg, init, host, &device(t))
    }

    fn fused(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        data: Dataset,
        init: Params,
    ) -> Result<Box<dyn FlatEngine>> {
        Ok(super::gpu_fused_on::<CudaRuntime>(
            cfg,
            &data,
            init,
            &device(t),
            false,
            crate::backend::kernel_cache::enable(&t.info),
        ))
    }

    fn fits(&self, _: &Target, cfg: &TrainConfig) -> Result<()> {
        // f16/bf16 run on the tensor cores where they take the model, else
        // emulated on the f32 tiled kernel (`GpuFused::new` chooses, and its
        // note says which).
        envelope::check_gpu(cfg)
    }

    fn tensor_cores(&self, t: &Target, cfg: &TrainConfig) -> bool {
        let client = <CudaRuntime as cubecl::Runtime>::client(&device(t));
        tensor_plan(&client, cfg).is_ok()
    }
}
