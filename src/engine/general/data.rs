//! Training data as Burn tensors: created on the device (the usual
//! advice) or uploaded from the host, and sliced into micro-batches.

use crate::batches::Batch;
use crate::task::{Dataset, Task};
use burn::prelude::*;
use burn::tensor::Distribution;

/// `x` `[n, inputs]` and `y` `[n, outputs]` on one device.
pub struct DeviceData<B: Backend> {
    /// Inputs, one row a point.
    pub x: Tensor<B, 2>,
    /// Targets, one row a point.
    pub y: Tensor<B, 2>,
}

impl<B: Backend> DeviceData<B> {
    /// Uploads a host dataset.
    pub fn upload(d: &Dataset, device: &B::Device) -> Self {
        let n = d.len();
        DeviceData {
            x: Tensor::from_data(TensorData::new(d.x.clone(), [n, d.inputs]), device),
            y: Tensor::from_data(TensorData::new(d.y.clone(), [n, d.outputs]), device),
        }
    }

    /// Builds the task's data with device ops: `linspace` from `arange`, noise
    /// from the backend's seeded RNG (so it differs from the host's noise).
    pub fn generate(task: Task, n: usize, seed: u64, device: &B::Device) -> Self {
        let step = if n > 1 { 2.0 / (n - 1) as f64 } else { 0.0 };
        let x = Tensor::<B, 1, Int>::arange(0..n as i64, device)
            .float()
            .mul_scalar(step)
            .sub_scalar(1.0)
            .reshape([n, 1]);
        let f = match task {
            Task::X2Noise => x.clone().powi_scalar(2),
            Task::Sin => x.clone().mul_scalar(std::f64::consts::PI).sin(),
            Task::Step => x.clone().greater_elem(0.0).float(),
            Task::GaussBumps => {
                let a = x
                    .clone()
                    .sub_scalar(0.4)
                    .div_scalar(0.15)
                    .powi_scalar(2)
                    .neg()
                    .exp();
                let b = x
                    .clone()
                    .add_scalar(0.5)
                    .div_scalar(0.25)
                    .powi_scalar(2)
                    .neg()
                    .exp();
                a + b.mul_scalar(0.6)
            }
        };
        let y = if task.noise() > 0.0 {
            B::seed(device, seed);
            f + Tensor::random([n, 1], Distribution::Uniform(0.0, 1.0), device)
                .mul_scalar(task.noise())
        } else {
            f
        };
        DeviceData { x, y }
    }

    /// The points of one micro-batch.
    pub fn batch(&self, b: &Batch) -> (Tensor<B, 2>, Tensor<B, 2>) {
        match b {
            Batch::Range(s, e) if *s == 0 && *e == self.x.dims()[0] => {
                (self.x.clone(), self.y.clone())
            }
            Batch::Range(s, e) => (self.x.clone().slice(*s..*e), self.y.clone().slice(*s..*e)),
            Batch::Indices(v) => {
                let device = self.x.device();
                let idx: Vec<i32> = v.iter().map(|&i| i as i32).collect();
                let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [v.len()]), &device);
                (
                    self.x.clone().select(0, idx.clone()),
                    self.y.clone().select(0, idx),
                )
            }
        }
    }
}
