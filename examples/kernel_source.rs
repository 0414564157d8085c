//! The CUDA C++ of the tensor-core gradient pass for a model, on a machine
//! without an NVIDIA GPU ([`ferrofit::engine::fused::gpu::kernel_source`]):
//!
//! ```text
//! cargo run --example kernel_source -- 64x3 [--f16] [--count K] [--out DIR] [--spirv]
//! python3 benches/device/registers.py DIR/64x3_bf16_*.cu
//! ```
//!
//! writes K compiles of the pass to `DIR/HxL_TYPE_k.cu` (default
//! `/tmp/kernel_source`) and prints where each places its shared arrays
//! (`INDEX@OFFSET`). `--spirv` writes the pass as NVIDIA's Vulkan driver
//! would get it instead, `DIR/HxL_TYPE_k.spv`, for a SPIR-V validator, and
//! counts the components it takes of scalar loads (0 in a valid module).
//! `FERROFIT_TENSOR_PLAN` names another layout, as on the GPU.
//!
//! `cargo run --example kernel_source -- seed [--out DIR]` writes the
//! persistent kernel of the seed job instead, `DIR/seed_persistent.cu`, and
//! `… -- tiled 128x4 [--vulkan] [--out DIR]` the f32 tiled kernel as CUDA
//! runs it (`--vulkan`: in the layout NVIDIA's Vulkan driver gets, still as
//! CUDA C++), `DIR/128x4_tiled[_vulkan].cu` (`FERROFIT_TILED_BLOCKS`,
//! `FERROFIT_ROWS_AHEAD` name other blocks and passes, as on the GPU).

use anyhow::{anyhow, Result};
use cubecl::wgpu::WgpuDevice;
use ferrofit::config::Precision;
use ferrofit::engine::fused::gpu::kernel_source::{
    persistent_steps, scalar_extracts, seed_shape, shared_layout, tensor_pass, tensor_pass_spirv,
    tiled_pass, SM90_SHARED, VULKAN_NVIDIA_SHARED,
};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("64x3", String::as_str);
    let out = flag(&args, "--out").unwrap_or("/tmp/kernel_source");
    let device = WgpuDevice::DefaultDevice;
    if model == "seed" {
        std::fs::create_dir_all(out)?;
        let path = format!("{out}/seed_persistent.cu");
        std::fs::write(&path, persistent_steps(&device, seed_shape(10, 1))?)?;
        println!("{path}");
        return Ok(());
    }
    if model == "tiled" {
        let (h, l) = width_layers(args.get(1).map_or("128x4", String::as_str))?;
        std::fs::create_dir_all(out)?;
        let vulkan = args.iter().any(|a| a == "--vulkan");
        let (src, tile, b) = tiled_pass(&device, seed_shape(h, l), vulkan)?;
        let path = format!(
            "{out}/{h}x{l}_tiled{}.cu",
            if vulkan { "_vulkan" } else { "" }
        );
        std::fs::write(&path, src)?;
        println!(
            "{path}: tile {tile}, blocks {}x{}, weight gradients {}x{}, {} units, lined {}, rows ahead {}",
            b.points, b.units, b.grad_u, b.grad_k, b.cube, b.lined, b.rows_ahead
        );
        return Ok(());
    }
    let (h, l) = width_layers(model)?;
    let count: usize = flag(&args, "--count").map_or(Ok(1), str::parse)?;
    let (precision, ty) = match args.iter().any(|a| a == "--f16") {
        true => (Precision::F16, "f16"),
        false => (Precision::Bf16, "bf16"),
    };
    std::fs::create_dir_all(out)?;
    let shape = seed_shape(h, l);
    let spirv = args.iter().any(|a| a == "--spirv");
    for k in 0..count {
        // The file's bytes and what to say of them.
        let (ext, bytes, said) = if spirv {
            let words = tensor_pass_spirv(&device, shape, precision, VULKAN_NVIDIA_SHARED)?;
            let bad = scalar_extracts(&words);
            let said = format!("{} words, {bad} components of scalar loads", words.len());
            let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            ("spv", bytes, said)
        } else {
            let src = tensor_pass(&device, shape, precision, SM90_SHARED)?;
            let at: Vec<String> = shared_layout(&src)
                .iter()
                .map(|(offset, index)| format!("{index}@{offset}"))
                .collect();
            ("cu", src.into_bytes(), at.join(" "))
        };
        let path = format!("{out}/{model}_{ty}_{k}.{ext}");
        std::fs::write(&path, bytes)?;
        println!("{path}: {said}");
    }
    Ok(())
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).map(String::as_str)
}

/// `WIDTHxLAYERS` (e.g. `64x3`) as numbers.
fn width_layers(model: &str) -> Result<(usize, usize)> {
    let (h, l) = model
        .split_once('x')
        .ok_or_else(|| anyhow!("name the model as WIDTHxLAYERS, e.g. 64x3"))?;
    Ok((h.parse()?, l.parse()?))
}
