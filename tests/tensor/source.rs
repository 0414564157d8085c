//! The tensor-core passes compiled for GPUs this machine need not have
//! (`kernel_source`), from a wgpu device (lavapipe in CI): CUDA C++ whose
//! shared layout is the same at every compile, SPIR-V that NVIDIA's Vulkan
//! driver can build; the f32 tiled kernel's CUDA C++ in the layouts of an
//! sm_90 device's CUDA and NVIDIA's Vulkan driver; the persistent kernel's
//! shared layout.

use super::common;
use cubecl::wgpu::WgpuDevice;
use ferrofit::config::Precision;
use ferrofit::engine::fused::gpu::kernel_source::{
    persistent_steps, scalar_extracts, seed_shape, shared_layout, tensor_pass, tensor_pass_spirv,
    tiled_pass, SM90_SHARED, VULKAN_NVIDIA_SHARED,
};

/// The wgpu device the passes are defined on, where test `name` has one.
fn device(name: &str) -> Option<WgpuDevice> {
    common::device(common::Kind::Wgpu, name).map(|_| WgpuDevice::DefaultDevice)
}

/// CubeCL lays a kernel's shared arrays out at every compile, once in a
/// hash set's order (new every process); the layout changed NVRTC's program
/// of the strip pass by up to 43 registers a unit and its time by 11 %
/// (docs/PERFORMANCE.md, "One source, two programs"). The tensor-core
/// passes claim their arrays in a fixed order: their CUDA C++, made here
/// from a wgpu device (lavapipe in CI), places them alike at every compile.
#[test]
fn tensor_pass_lays_shared_memory_out_alike_at_every_compile() {
    let Some(device) = device("tensor_pass_lays_shared_memory_out_alike_at_every_compile") else {
        return;
    };
    // The strip pass (64 × 3, 32 × 2) and the shared-output pass (128 × 4).
    for (hidden, layers) in [(64, 3), (32, 2), (128, 4)] {
        let shape = seed_shape(hidden, layers);
        let layouts: Vec<Vec<(usize, usize)>> = (0..4)
            .map(|_| {
                let src = tensor_pass(&device, shape, Precision::Bf16, SM90_SHARED)
                    .expect("CubeCL's CUDA compiler takes the pass");
                shared_layout(&src)
            })
            .collect();
        assert!(
            layouts[0].len() >= 5,
            "{hidden} × {layers}: {:?}",
            layouts[0]
        );
        assert!(
            layouts.iter().all(|l| l == &layouts[0]),
            "{hidden} × {layers}: (offset, array) differ between compiles: {layouts:?}"
        );
    }
}

/// The tensor-core pass as NVIDIA's Vulkan driver gets it (CubeCL's SPIR-V,
/// cooperative matrices) takes no component of a scalar load: CubeCL's
/// vector views of shared memory made such loads, SPIRV-Tools' validator
/// rejected the module and the driver crashed making the pipeline. Every
/// plan it picks there: shared output (64 × 3, 128 × 4), streamed weights
/// (128 × 8), odd widths (48 × 3).
#[test]
fn tensor_pass_spirv_reads_no_component_of_a_scalar() {
    let Some(device) = device("tensor_pass_spirv_reads_no_component_of_a_scalar") else {
        return;
    };
    for (hidden, layers) in [(64, 3), (128, 4), (128, 8), (48, 3)] {
        for precision in [Precision::F16, Precision::Bf16] {
            let words = tensor_pass_spirv(
                &device,
                seed_shape(hidden, layers),
                precision,
                VULKAN_NVIDIA_SHARED,
            )
            .expect("CubeCL's SPIR-V compiler takes the pass");
            assert!(
                words.len() > 1000,
                "{hidden} × {layers}: {} words",
                words.len()
            );
            assert_eq!(
                scalar_extracts(&words),
                0,
                "{hidden} × {layers} {precision:?}: components of scalar loads"
            );
        }
    }
}

/// The f32 tiled kernel compiles through CubeCL's CUDA compiler in the
/// layout an sm_90 device runs it in — its 16-byte lined passes, which CI
/// never launches (lavapipe takes the one-value passes) — and in the layout
/// of NVIDIA's Vulkan driver (48 KiB: a smaller tile, one value a load),
/// with its shared arrays placed alike at every compile (the tile first).
/// `benches/device/registers.py` counts the registers of either.
#[test]
fn tiled_kernel_compiles_in_cuda_and_vulkan_layouts() {
    let Some(device) = device("tiled_kernel_compiles_in_cuda_and_vulkan_layouts") else {
        return;
    };
    for (hidden, layers) in [(64, 3), (128, 4), (96, 2)] {
        let shape = seed_shape(hidden, layers);
        let (cuda, cuda_tile, cuda_blocks) =
            tiled_pass(&device, shape, false).expect("CubeCL's CUDA compiler takes the kernel");
        let (vulkan, vulkan_tile, vulkan_blocks) =
            tiled_pass(&device, shape, true).expect("CubeCL's CUDA compiler takes the kernel");
        let at = format!("{hidden} × {layers}");
        assert!(cuda_blocks.lined && !vulkan_blocks.lined, "{at}");
        // The lined passes load four floats at a time; the one-value ones never.
        assert!(cuda.contains("float_4"), "{at}: no 16-byte loads");
        assert!(!vulkan.contains("float_4"), "{at}: 16-byte loads");
        assert!(
            cuda.contains("tiled_grad") && vulkan.contains("tiled_grad"),
            "{at}"
        );
        assert!(
            vulkan_tile < cuda_tile,
            "{at}: {vulkan_tile} ≥ {cuda_tile} points"
        );
        for (src, vulkan) in [(cuda, false), (vulkan, true)] {
            let layout = shared_layout(&src);
            assert_eq!(layout.len(), 2, "{at}: {layout:?}");
            // The loss scratch (1 KiB) after the tile, not before it.
            assert!(layout[1].0 > 1024, "{at}: the tile first, {layout:?}");
            for _ in 0..3 {
                let (again, _, _) = tiled_pass(&device, shape, vulkan).expect("compiles");
                assert_eq!(shared_layout(&again), layout, "{at}: another layout");
            }
        }
    }
}

/// The persistent kernel (the seed job's steps) places its seven shared
/// arrays alike at every compile: in a hash set's order before, a new one
/// each compile (127 or 128 registers on an sm_90 device).
#[test]
fn persistent_kernel_lays_shared_memory_out_alike_at_every_compile() {
    let Some(device) = device("persistent_kernel_lays_shared_memory_out_alike_at_every_compile")
    else {
        return;
    };
    let compile = || {
        let src = persistent_steps(&device, seed_shape(10, 1))
            .expect("CubeCL's CUDA compiler takes the kernel");
        shared_layout(&src)
    };
    let first = compile();
    assert_eq!(first.len(), 7, "{first:?}");
    for _ in 0..3 {
        assert_eq!(compile(), first, "another layout");
    }
}
