//! wgpu (Vulkan, DX12, Metal): Burn's wgpu backend for the general engine, the
//! CubeCL kernels on CubeCL's wgpu runtime. Maps an adapter to CubeCL's device
//! id and initialises it once per process.

use super::{Platform, Target};
use crate::backend::device::{Backend, WgpuApi};
use crate::backend::devices::{wgpu_adapters, DeviceClass};
use crate::config::TrainConfig;
use crate::engine::fused::envelope;
use crate::engine::fused::gpu::tensor::tensor_plan;
use crate::engine::{FlatEngine, StepEngine};
use crate::error::{FerroError, Result};
use crate::model::Params;
use crate::task::Dataset;
use cubecl::wgpu::{init_setup, Dx12, Metal, RuntimeOptions, Vulkan, WgpuDevice, WgpuRuntime};
use std::collections::HashMap;
use std::sync::Mutex;

/// The wgpu platform (Vulkan, DX12, Metal through CubeCL's wgpu runtime).
pub struct Wgpu;

static READY: Mutex<Option<HashMap<(WgpuApi, usize), WgpuDevice>>> = Mutex::new(None);

/// The CubeCL device for the target adapter, set up on first use.
fn device(t: &Target) -> Result<WgpuDevice> {
    let Backend::Wgpu(api) = t.backend else {
        unreachable!("the wgpu platform is only chosen for wgpu targets")
    };
    let key = (api, t.info.index);
    let mut ready = READY.lock().unwrap_or_else(|e| e.into_inner());
    let map = ready.get_or_insert_with(HashMap::new);
    if let Some(d) = map.get(&key) {
        return Ok(d.clone());
    }
    let backend = match api {
        WgpuApi::Vulkan => wgpu::Backend::Vulkan,
        WgpuApi::Dx12 => wgpu::Backend::Dx12,
        WgpuApi::Metal => wgpu::Backend::Metal,
    };
    let adapters = wgpu_adapters(backend.into());
    let me = adapters
        .get(t.info.index)
        .ok_or_else(|| FerroError::NoDevice {
            backend: t.label(),
            detail: "the adapter disappeared".into(),
        })?;
    let ty = me.get_info().device_type;
    let k = adapters[..t.info.index]
        .iter()
        .filter(|a| a.get_info().device_type == ty)
        .count();
    let device = match ty {
        wgpu::DeviceType::DiscreteGpu => WgpuDevice::DiscreteGpu(k),
        wgpu::DeviceType::IntegratedGpu => WgpuDevice::IntegratedGpu(k),
        wgpu::DeviceType::VirtualGpu => WgpuDevice::VirtualGpu(k),
        wgpu::DeviceType::Cpu if k == 0 => WgpuDevice::Cpu,
        _ => {
            return Err(FerroError::NoDevice {
                backend: t.label(),
                detail: format!("adapter type {ty:?} #{k} cannot be addressed"),
            })
        }
    };
    // Before CubeCL's runtime starts, so its SPIR-V is cached on disk.
    crate::backend::kernel_cache::enable(&t.info);
    let opts = RuntimeOptions::default();
    match api {
        WgpuApi::Vulkan => drop(init_setup::<Vulkan>(&device, opts)),
        WgpuApi::Dx12 => drop(init_setup::<Dx12>(&device, opts)),
        WgpuApi::Metal => drop(init_setup::<Metal>(&device, opts)),
    }
    map.insert(key, device.clone());
    Ok(device)
}

impl Platform for Wgpu {
    fn general(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        init: &Params,
        host: Option<&Dataset>,
    ) -> Result<Box<dyn StepEngine>> {
        type B = burn::backend::Autodiff<burn::backend::Wgpu>;
        super::general_on::<B>(cfg, init, host, &device(t)?)
    }

    fn fused(
        &self,
        t: &Target,
        cfg: &TrainConfig,
        data: Dataset,
        init: Params,
    ) -> Result<Box<dyn FlatEngine>> {
        // A GPU API on the CPU (lavapipe) gets the kernels' CPU-friendly settings.
        let software = t.info.class == DeviceClass::Software;
        Ok(super::gpu_fused_on::<WgpuRuntime>(
            cfg,
            &data,
            init,
            &device(t)?,
            software,
            crate::backend::kernel_cache::enable(&t.info),
        ))
    }

    fn fits(&self, t: &Target, cfg: &TrainConfig) -> Result<()> {
        envelope::check_gpu(cfg)?;
        // f16/bf16 run on the tensor-core pass where `gpu::tensor::tensor_plan`
        // takes the device (SPIR-V with cooperative matrices), else emulated
        // on the f32 tiled kernel.
        envelope::check_bindings(cfg, &t.info.name, t.info.binding_bytes)
    }

    fn tensor_cores(&self, t: &Target, cfg: &TrainConfig) -> bool {
        device(t)
            .is_ok_and(|d| tensor_plan(&<WgpuRuntime as cubecl::Runtime>::client(&d), cfg).is_ok())
    }
}
