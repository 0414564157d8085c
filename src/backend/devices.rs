//! Enumerates every device this build can use: the CPU, each wgpu adapter
//! (Vulkan/DX12/Metal) and each CUDA device. Never panics: a missing driver is
//! an empty list plus a note.

use super::device::Api;
use super::BackendKind;
use serde::{Deserialize, Serialize};

/// Broad class of a device, in `auto`'s order of preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    /// A GPU with memory of its own.
    Discrete,
    /// A GPU sharing the host's memory.
    Integrated,
    /// A virtual or software device (lavapipe, a VM's GPU).
    Virtual,
    /// The host processor.
    Cpu,
    /// A GPU API implemented on the CPU (lavapipe, llvmpipe): slower than `cpu`.
    Software,
}

/// One device as `ferrofit devices` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// `cpu`, `cuda`, or the wgpu API (`vulkan`, `dx12`, `metal`, `gl`).
    pub api: Api,
    /// Index within its API, as `--device` takes it.
    pub index: usize,
    /// The device's name, as its driver gives it.
    pub name: String,
    /// The vendor, as its driver gives it.
    pub vendor: String,
    /// Discrete, integrated, virtual or CPU.
    pub class: DeviceClass,
    /// Driver name and version.
    pub driver: String,
    /// Memory the device reports, in bytes (CPU: system memory; wgpu: largest buffer).
    pub memory_bytes: Option<u64>,
    /// What `memory_bytes` means for this device.
    pub memory_note: String,
    /// Number formats and execution features: `f16`, `bf16`, `subgroups 32`, ...
    #[serde(default)]
    pub features: Vec<String>,
    /// The largest buffer one kernel binding may span, where the API limits
    /// it below the memory (wgpu: `max_storage_buffer_binding_size`, 128 MiB
    /// on lavapipe and on some integrated GPUs).
    #[serde(default)]
    pub binding_bytes: Option<u64>,
}

/// Everything found, plus notes on what could not be probed.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Inventory {
    /// Every device found, the CPU first.
    pub devices: Vec<DeviceInfo>,
    /// Why an API found nothing (not compiled in, no driver).
    pub notes: Vec<String>,
}

impl Inventory {
    /// Probes every compiled-in API.
    pub fn probe() -> Inventory {
        Inventory::probe_for(&[BackendKind::Auto])
    }

    /// Probes only the APIs these requests can select (the CPU always): a
    /// `--backend cpu` run loads no GPU driver, a CUDA run enumerates no
    /// wgpu adapters. Start-up time is mostly driver loading (docs/PERFORMANCE.md).
    pub fn probe_for(kinds: &[BackendKind]) -> Inventory {
        let wants =
            |f: fn(BackendKind) -> bool| kinds.iter().any(|&k| k == BackendKind::Auto || f(k));
        let mut inv = Inventory {
            devices: vec![cpu_info()],
            notes: vec![],
        };
        if wants(|k| k == BackendKind::Cuda) {
            #[cfg(feature = "cuda")]
            cuda_devices(&mut inv);
            #[cfg(not(feature = "cuda"))]
            inv.notes
                .push("cuda: not compiled in (cargo feature `cuda`)".into());
        }
        if wants(|k| k.feature() == "wgpu") {
            #[cfg(feature = "wgpu")]
            wgpu_devices(&mut inv);
            #[cfg(not(feature = "wgpu"))]
            inv.notes
                .push("wgpu: not compiled in (cargo feature `wgpu`)".into());
        }
        inv
    }

    /// [`Inventory::probe_for`] of one request, probed once a process: a
    /// program that fits many models (the library's `fit`, the Python
    /// package's, in a loop) loads and enumerates its drivers once, not every
    /// call. The CLI's commands probe afresh (one command, one process).
    pub fn cached_for(kind: BackendKind) -> Inventory {
        cached_with(kind, Inventory::probe_for)
    }

    /// Devices of one API, in index order.
    pub fn of_api(&self, api: Api) -> impl Iterator<Item = &DeviceInfo> + '_ {
        self.devices.iter().filter(move |d| d.api == api)
    }
}

fn cpu_info() -> DeviceInfo {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    };
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    DeviceInfo {
        api: Api::Cpu,
        index: 0,
        name: format!(
            "{} ({threads} threads)",
            field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string())
        ),
        vendor: field("vendor_id").unwrap_or_default(),
        class: DeviceClass::Cpu,
        driver: String::new(),
        memory_bytes: mem,
        memory_note: "system memory".into(),
        features: cpu_features(&cpuinfo),
        binding_bytes: None,
    }
}

#[cfg(feature = "cuda")]
fn cuda_devices(inv: &mut Inventory) {
    use cudarc::driver::result::device;
    use cudarc::driver::sys::CUdevice_attribute as Attr;
    use cudarc::driver::CudaContext;
    // SAFETY: only tries to dlopen libcuda; no CUDA call is made when it is absent.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        inv.notes
            .push("cuda: no NVIDIA driver (libcuda) found".into());
        return;
    }
    let count = match CudaContext::device_count() {
        Ok(c) => c.max(0) as usize,
        Err(e) => {
            inv.notes
                .push(format!("cuda: driver present but not usable: {e:?}"));
            return;
        }
    };
    let mut version = 0i32;
    // SAFETY: plain query of the loaded driver.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    // Plain device queries, no context: making one (and dropping it again
    // before the engine makes its own) cost 0.15 s of every CUDA run's start.
    for index in 0..count {
        let Ok(dev) = device::get(index as i32) else {
            continue;
        };
        // SAFETY: `dev` came from cuDeviceGet.
        let attr = |a| unsafe { device::get_attribute(dev, a) }.ok();
        let sm = attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .zip(attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
        let cc = sm.map(|(a, b)| format!(", sm_{a}{b}")).unwrap_or_default();
        let mut features = vec!["f32".to_string(), "warp 32".to_string()];
        if let Some((major, minor)) = sm {
            if (major, minor) >= (5, 3) {
                features.push("f16".into());
            }
            if major >= 8 {
                features.push("bf16".into());
            }
        }
        inv.devices.push(DeviceInfo {
            api: Api::Cuda,
            index,
            name: device::get_name(dev).unwrap_or_else(|_| "CUDA device".into()),
            vendor: "NVIDIA".into(),
            class: DeviceClass::Discrete,
            driver: format!("CUDA {}.{}{cc}", version / 1000, (version % 1000) / 10),
            // SAFETY: as above.
            memory_bytes: unsafe { device::total_mem(dev) }.ok().map(|m| m as u64),
            memory_note: "device memory".into(),
            features,
            binding_bytes: None,
        });
    }
}

/// The API of a wgpu backend, `None` for ones ferrofit does not list.
#[cfg(feature = "wgpu")]
pub fn wgpu_api(b: wgpu::Backend) -> Option<Api> {
    match b {
        wgpu::Backend::Vulkan => Some(Api::Vulkan),
        wgpu::Backend::Dx12 => Some(Api::Dx12),
        wgpu::Backend::Metal => Some(Api::Metal),
        wgpu::Backend::Gl => Some(Api::Gl),
        _ => None,
    }
}

/// All wgpu adapters of the given APIs, in wgpu's order.
#[cfg(feature = "wgpu")]
pub fn wgpu_adapters(backends: wgpu::Backends) -> Vec<wgpu::Adapter> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    cubecl::future::block_on(instance.enumerate_adapters(backends))
}

#[cfg(feature = "wgpu")]
fn wgpu_devices(inv: &mut Inventory) {
    let adapters = std::panic::catch_unwind(|| {
        wgpu_adapters(wgpu::Backends::VULKAN | wgpu::Backends::DX12 | wgpu::Backends::METAL)
    });
    let Ok(adapters) = adapters else {
        inv.notes
            .push("wgpu: probing adapters crashed; check the graphics driver".into());
        return;
    };
    if adapters.is_empty() {
        inv.notes.push("wgpu: no Vulkan/DX12/Metal adapter (install a driver, or mesa-vulkan-drivers for a software one)".into());
    }
    let mut per_api: std::collections::HashMap<Api, usize> = Default::default();
    for a in adapters {
        let info = a.get_info();
        let Some(api) = wgpu_api(info.backend) else {
            continue;
        };
        let index = per_api.entry(api).or_default();
        inv.devices.push(DeviceInfo {
            api,
            index: *index,
            name: info.name.clone(),
            vendor: vendor_name(info.vendor),
            class: match info.device_type {
                wgpu::DeviceType::DiscreteGpu => DeviceClass::Discrete,
                wgpu::DeviceType::IntegratedGpu => DeviceClass::Integrated,
                wgpu::DeviceType::VirtualGpu => DeviceClass::Virtual,
                _ => DeviceClass::Software,
            },
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
            memory_bytes: Some(a.limits().max_buffer_size),
            memory_note: if info.device_type == wgpu::DeviceType::IntegratedGpu {
                "largest buffer the adapter accepts; memory is shared with the system".into()
            } else {
                "largest buffer the adapter accepts (wgpu reports no total)".into()
            },
            features: wgpu_features(&a),
            binding_bytes: Some(a.limits().max_storage_buffer_binding_size),
        });
        *index += 1;
    }
}

#[cfg(feature = "wgpu")]
fn vendor_name(id: u32) -> String {
    match id {
        0x10de => "NVIDIA".into(),
        0x1002 => "AMD".into(),
        0x8086 => "Intel".into(),
        0x106b => "Apple".into(),
        0x5143 => "Qualcomm".into(),
        0x13b5 => "ARM".into(),
        0x10005 => "Mesa".into(),
        0 => String::new(),
        other => format!("{other:#06x}"),
    }
}

/// What the CPU's instruction set offers the kernels.
fn cpu_features(cpuinfo: &str) -> Vec<String> {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    let mut out = vec!["f32".to_string()];
    for (flag, name) in [
        ("avx2", "avx2"),
        ("fma", "fma"),
        ("avx512f", "avx512"),
        ("f16c", "f16 conversion (f16c)"),
        ("avx512_bf16", "bf16 (avx512_bf16)"),
    ] {
        if flags.contains(&flag) {
            out.push(name.into());
        }
    }
    out
}

/// Shader number formats and subgroup support of a wgpu adapter.
#[cfg(feature = "wgpu")]
fn wgpu_features(a: &wgpu::Adapter) -> Vec<String> {
    let f = a.features();
    let info = a.get_info();
    let mut out = vec!["f32".to_string()];
    if f.contains(wgpu::Features::SHADER_F16) {
        out.push("f16".into());
    } else {
        out.push("no f16 in shaders".into());
    }
    if !wgpu_api(info.backend).is_some_and(Api::spirv) {
        out.push("no bf16 (WGSL has none)".into());
    }
    if f.contains(wgpu::Features::SUBGROUP) {
        out.push(if info.subgroup_min_size == info.subgroup_max_size {
            format!("subgroups {}", info.subgroup_min_size)
        } else {
            format!(
                "subgroups {}..{}",
                info.subgroup_min_size, info.subgroup_max_size
            )
        });
    } else {
        out.push("no subgroups".into());
    }
    out
}

/// [`Inventory::cached_for`] with the probe passed in (tests count its calls).
fn cached_with(kind: BackendKind, probe: impl FnOnce(&[BackendKind]) -> Inventory) -> Inventory {
    static SEEN: std::sync::Mutex<Vec<(BackendKind, Inventory)>> =
        std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, inv)) = seen.iter().find(|(k, _)| *k == kind) {
        return inv.clone();
    }
    let inv = probe(&[kind]);
    seen.push((kind, inv.clone()));
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_probed_once_a_process() {
        let probes = std::sync::atomic::AtomicUsize::new(0);
        let probe = |kinds: &[BackendKind]| {
            probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Inventory::probe_for(kinds)
        };
        // Metal: no other test asks for it (none is compiled in here).
        cached_with(BackendKind::Metal, probe);
        let after_first = probes.load(std::sync::atomic::Ordering::Relaxed);
        assert!(after_first <= 1);
        cached_with(BackendKind::Metal, probe);
        assert_eq!(
            probes.load(std::sync::atomic::Ordering::Relaxed),
            after_first,
            "the second request is answered from the cache"
        );
    }
}
