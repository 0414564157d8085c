//! Turns `--backend` and `--device` into one concrete device, or an error that
//! says what exists.

use super::devices::{DeviceInfo, Inventory};
use super::BackendKind;
use crate::error::{FerroError, Result};

/// The device a run will use.
#[derive(Clone, Debug)]
pub struct Target {
    /// `Cpu`, `Wgpu` (any API) or `Cuda` after resolving `auto` and API aliases.
    pub kind: BackendKind,
    pub info: DeviceInfo,
}

impl Target {
    /// `cpu`, `cuda`, `vulkan`, `dx12`, `metal`: what a person calls the backend.
    pub fn label(&self) -> String {
        if self.kind == BackendKind::Cpu {
            "cpu".into()
        } else {
            self.info.api.clone()
        }
    }
}

/// Picks the device for `kind` and `index` from what `inv` found.
pub fn select(inv: &Inventory, kind: BackendKind, index: Option<usize>) -> Result<Target> {
    compiled(kind)?;
    let pick = |api: &str, name: &str| -> Result<Target> {
        let found: Vec<&DeviceInfo> = inv.of_api(api).collect();
        let i = index.unwrap_or(0);
        match found.get(i) {
            Some(d) => Ok(Target {
                kind: resolved(api),
                info: (*d).clone(),
            }),
            None if found.is_empty() => Err(FerroError::NoDevice {
                backend: name.into(),
                detail: notes_for(inv, name),
            }),
            None => Err(FerroError::DeviceOutOfRange {
                backend: name.into(),
                index: i,
                count: found.len(),
            }),
        }
    };
    match kind {
        BackendKind::Cpu => pick("cpu", "cpu"),
        BackendKind::Cuda => pick("cuda", "cuda"),
        BackendKind::Vulkan => pick("vulkan", "vulkan"),
        BackendKind::Dx12 => pick("dx12", "dx12"),
        BackendKind::Metal => pick("metal", "metal"),
        BackendKind::Rocm => Err(FerroError::NoDevice {
            backend: "rocm".into(),
            detail: "device probing for ROCm is not implemented yet".into(),
        }),
        BackendKind::Wgpu => {
            let gpus: Vec<&DeviceInfo> = inv
                .devices
                .iter()
                .filter(|d| !matches!(d.api.as_str(), "cpu" | "cuda"))
                .collect();
            let i = index.unwrap_or(0);
            match gpus.get(i) {
                Some(d) => Ok(Target {
                    kind: BackendKind::Wgpu,
                    info: (*d).clone(),
                }),
                None if gpus.is_empty() => Err(FerroError::NoDevice {
                    backend: "wgpu".into(),
                    detail: notes_for(inv, "wgpu"),
                }),
                None => Err(FerroError::DeviceOutOfRange {
                    backend: "wgpu".into(),
                    index: i,
                    count: gpus.len(),
                }),
            }
        }
        BackendKind::Auto => {
            if let Some(i) = index {
                return Err(FerroError::arg(
                    "device",
                    i,
                    "--device needs an explicit --backend (cpu, cuda, vulkan, ...)",
                ));
            }
            let best = inv
                .devices
                .iter()
                .filter(|d| d.api != "cpu" || cfg!(feature = "cpu"))
                .min_by_key(|d| (d.api != "cuda", d.class, d.api == "gl"))
                .ok_or_else(|| FerroError::NoDevice {
                    backend: "auto".into(),
                    detail: "no device at all".into(),
                })?;
            Ok(Target {
                kind: resolved(&best.api),
                info: best.clone(),
            })
        }
    }
}

/// Every device found, as targets: what `bench` and `doctor` cover by default.
pub fn every_device(inv: &Inventory) -> Vec<Target> {
    inv.devices
        .iter()
        .map(|d| Target {
            kind: resolved(&d.api),
            info: d.clone(),
        })
        .filter(|t| {
            compiled(t.kind).is_ok()
                && matches!(
                    t.info.api.as_str(),
                    "cpu" | "cuda" | "vulkan" | "dx12" | "metal"
                )
        })
        .collect()
}

/// The replicas `--devices` names on `kind`: `all` devices of its API, or
/// indices (an index may repeat: several replicas on one device).
pub fn replicas(inv: &Inventory, kind: BackendKind, devices: &[String]) -> Result<Vec<Target>> {
    if devices.len() == 1 && devices[0] == "all" {
        let first = select(inv, kind, None)?;
        return inv
            .of_api(&first.info.api)
            .map(|d| select(inv, first.kind, Some(d.index)))
            .collect();
    }
    devices
        .iter()
        .map(|d| {
            let i: usize = d.trim().parse().map_err(|_| {
                FerroError::arg(
                    "devices",
                    d,
                    "give `all` or device indices such as 0,1 (see `ferrofit devices`)",
                )
            })?;
            select(inv, kind, Some(i))
        })
        .collect()
}

/// `replicas` for notes and records: `cuda #0, cuda #1`.
pub fn describe(replicas: &[Target]) -> String {
    replicas
        .iter()
        .map(|t| format!("{} #{}", t.label(), t.info.index))
        .collect::<Vec<_>>()
        .join(", ")
}

fn resolved(api: &str) -> BackendKind {
    match api {
        "cpu" => BackendKind::Cpu,
        "cuda" => BackendKind::Cuda,
        _ => BackendKind::Wgpu,
    }
}

fn notes_for(inv: &Inventory, name: &str) -> String {
    let key = if name == "cuda" { "cuda" } else { "wgpu" };
    let notes: Vec<&str> = inv
        .notes
        .iter()
        .filter(|n| n.starts_with(key))
        .map(|s| s.as_str())
        .collect();
    if notes.is_empty() {
        "none found".into()
    } else {
        notes.join("; ")
    }
}

/// Error unless `kind` was compiled into this binary.
pub fn compiled(kind: BackendKind) -> Result<()> {
    // Each arm's value depends on the enabled features, so this is no `matches!`.
    #[allow(clippy::match_like_matches_macro)]
    let on = match kind.feature() {
        "cpu" => cfg!(feature = "cpu"),
        "wgpu" => cfg!(feature = "wgpu"),
        "cuda" => cfg!(feature = "cuda"),
        _ => cfg!(feature = "rocm"),
    };
    if on {
        Ok(())
    } else {
        Err(FerroError::BackendNotCompiled {
            backend: kind.name(),
            feature: kind.feature(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::devices::DeviceClass;

    fn dev(api: &str, class: DeviceClass) -> DeviceInfo {
        DeviceInfo {
            api: api.into(),
            index: 0,
            name: format!("{api} {class:?}"),
            vendor: String::new(),
            class,
            driver: String::new(),
            memory_bytes: None,
            memory_note: String::new(),
            features: vec![],
        }
    }

    #[test]
    fn auto_prefers_cuda_then_discrete_then_integrated_then_cpu() {
        let mut inv = Inventory {
            devices: vec![
                dev("cpu", DeviceClass::Cpu),
                dev("vulkan", DeviceClass::Software),
            ],
            notes: vec![],
        };
        inv.devices.push(dev("vulkan", DeviceClass::Integrated));
        assert_eq!(
            select(&inv, BackendKind::Auto, None).unwrap().info.class,
            DeviceClass::Integrated
        );
        inv.devices.push(dev("vulkan", DeviceClass::Discrete));
        assert_eq!(
            select(&inv, BackendKind::Auto, None).unwrap().info.class,
            DeviceClass::Discrete
        );
        if cfg!(feature = "cuda") {
            inv.devices.push(dev("cuda", DeviceClass::Discrete));
            assert_eq!(
                select(&inv, BackendKind::Auto, None).unwrap().kind,
                BackendKind::Cuda
            );
        }
    }

    #[test]
    fn out_of_range_device_says_how_many_exist() {
        let inv = Inventory {
            devices: vec![dev("cpu", DeviceClass::Cpu)],
            notes: vec![],
        };
        let e = select(&inv, BackendKind::Cpu, Some(3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--device 3") && e.contains("1 device"), "{e}");
    }
}
