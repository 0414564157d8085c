//! Turns `--backend` and `--device` into one typed device, or an error that
//! says what exists. The only place a user's request meets the inventory.

use super::device::Backend;
use super::devices::{DeviceInfo, Inventory};
use super::BackendKind;
use crate::error::{FerroError, Result};

/// The device a run will use: a typed backend and the adapter behind it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The backend it runs on.
    pub backend: Backend,
    /// The device.
    pub info: DeviceInfo,
}

impl Target {
    /// The target of a listed device, `None` for APIs ferrofit does not train on.
    pub fn of(info: &DeviceInfo) -> Option<Target> {
        Some(Target {
            backend: info.api.backend()?,
            info: info.clone(),
        })
    }

    /// `cpu`, `cuda`, `vulkan`, `dx12`, `metal`: what a person calls the backend.
    pub fn label(&self) -> String {
        self.backend.to_string()
    }
}

/// Picks the device for `kind` and `index` from what `inv` found.
pub fn select(inv: &Inventory, kind: BackendKind, index: Option<usize>) -> Result<Target> {
    kind.compiled()?;
    let nth = |found: Vec<&DeviceInfo>, name: &str| -> Result<Target> {
        let i = index.unwrap_or(0);
        match found.get(i).and_then(|d| Target::of(d)) {
            Some(t) => Ok(t),
            None if found.is_empty() => Err(FerroError::NoDevice {
                backend: name.into(),
                detail: notes_for(inv, kind),
            }),
            None => Err(FerroError::DeviceOutOfRange {
                backend: name.into(),
                index: i,
                count: found.len(),
            }),
        }
    };
    match kind {
        BackendKind::Rocm => Err(FerroError::NoDevice {
            backend: "rocm".into(),
            detail: "device probing for ROCm is not implemented yet".into(),
        }),
        BackendKind::Wgpu => nth(
            inv.devices
                .iter()
                .filter(|d| matches!(d.api.backend(), Some(Backend::Wgpu(_))))
                .collect(),
            kind.name(),
        ),
        BackendKind::Auto => {
            if let Some(i) = index {
                return Err(FerroError::arg(
                    "device",
                    i,
                    "--device needs an explicit --backend (cpu, cuda, vulkan, ...)",
                ));
            }
            inv.devices
                .iter()
                .filter_map(Target::of)
                .filter(|t| t.backend.compiled())
                .min_by_key(|t| (t.backend != Backend::Cuda, t.info.class))
                .ok_or_else(|| FerroError::NoDevice {
                    backend: "auto".into(),
                    detail: "no device at all".into(),
                })
        }
        one => {
            let api = one.api().expect("every other request names one API");
            nth(inv.of_api(api).collect(), api.name())
        }
    }
}

/// Every device found, as targets: what `bench` and `doctor` cover by default.
pub fn every_device(inv: &Inventory) -> Vec<Target> {
    inv.devices
        .iter()
        .filter_map(Target::of)
        .filter(|t| t.backend.compiled())
        .collect()
}

/// The replicas `--devices` names on `kind`: `all` devices of its API, or
/// indices (an index may repeat: several replicas on one device).
pub fn replicas(inv: &Inventory, kind: BackendKind, devices: &[String]) -> Result<Vec<Target>> {
    if devices.len() == 1 && devices[0] == "all" {
        let first = select(inv, kind, None)?;
        return Ok(inv.of_api(first.info.api).filter_map(Target::of).collect());
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

fn notes_for(inv: &Inventory, kind: BackendKind) -> String {
    let key = if kind == BackendKind::Cuda {
        "cuda"
    } else {
        "wgpu"
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::devices::DeviceClass;
    use crate::backend::Api;

    fn dev(api: Api, class: DeviceClass) -> DeviceInfo {
        DeviceInfo {
            api,
            index: 0,
            name: format!("{api} {class:?}"),
            vendor: String::new(),
            class,
            driver: String::new(),
            memory_bytes: None,
            memory_note: String::new(),
            features: vec![],
            binding_bytes: None,
        }
    }

    #[test]
    fn auto_prefers_cuda_then_discrete_then_integrated_then_cpu() {
        let mut inv = Inventory {
            devices: vec![
                dev(Api::Cpu, DeviceClass::Cpu),
                dev(Api::Vulkan, DeviceClass::Software),
            ],
            notes: vec![],
        };
        inv.devices.push(dev(Api::Vulkan, DeviceClass::Integrated));
        assert_eq!(
            select(&inv, BackendKind::Auto, None).unwrap().info.class,
            DeviceClass::Integrated
        );
        inv.devices.push(dev(Api::Vulkan, DeviceClass::Discrete));
        assert_eq!(
            select(&inv, BackendKind::Auto, None).unwrap().info.class,
            DeviceClass::Discrete
        );
        if cfg!(feature = "cuda") {
            inv.devices.push(dev(Api::Cuda, DeviceClass::Discrete));
            assert_eq!(
                select(&inv, BackendKind::Auto, None).unwrap().backend,
                Backend::Cuda
            );
        }
    }

    #[test]
    fn out_of_range_device_says_how_many_exist() {
        let inv = Inventory {
            devices: vec![dev(Api::Cpu, DeviceClass::Cpu)],
            notes: vec![],
        };
        let e = select(&inv, BackendKind::Cpu, Some(3))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--device 3") && e.contains("1 device"), "{e}");
    }
}
