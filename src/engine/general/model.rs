//! The MLP as a Burn module, and conversion to and from host [`Params`].

use crate::config::{Activation, Precision};
use crate::model::{LayerParams, Params};
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation as act_fn;
use burn::tensor::FloatDType;

/// Linear layers with an activation between them (none after the last).
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// The layers, input first.
    pub layers: Vec<Linear<B>>,
}

/// The Burn dtype computations run in for a precision.
pub fn compute_dtype(p: Precision) -> FloatDType {
    match p {
        Precision::F32 => FloatDType::F32,
        Precision::F16 => FloatDType::F16,
        Precision::Bf16 => FloatDType::BF16,
    }
}

impl<B: Backend> Mlp<B> {
    /// A module holding exactly `p` (Burn stores weights as `[in, out]`).
    pub fn from_params(p: &Params, device: &B::Device) -> Self {
        let layers = p
            .layers
            .iter()
            .map(|l| {
                let wt: Vec<f32> = (0..l.fan_in * l.fan_out)
                    .map(|k| {
                        let (i, o) = (k / l.fan_out, k % l.fan_out);
                        l.w[o * l.fan_in + i]
                    })
                    .collect();
                let w =
                    Tensor::<B, 2>::from_data(TensorData::new(wt, [l.fan_in, l.fan_out]), device);
                let b =
                    Tensor::<B, 1>::from_data(TensorData::new(l.b.clone(), [l.fan_out]), device);
                Linear {
                    weight: Param::from_tensor(w),
                    bias: Some(Param::from_tensor(b)),
                }
            })
            .collect();
        Mlp { layers }
    }

    /// Reads the weights back to the host in PyTorch layout.
    pub fn to_params(&self) -> Params {
        Params {
            layers: self
                .layers
                .iter()
                .map(|l| layer_to_host(l.weight.val(), l.bias.as_ref().unwrap().val()))
                .collect(),
        }
    }

    /// Forward in `precision`; the result is always f32.
    pub fn forward(&self, x: Tensor<B, 2>, act: Activation, precision: Precision) -> Tensor<B, 2> {
        let dt = compute_dtype(precision);
        let cast = precision != Precision::F32;
        let mut h = if cast { x.cast(dt) } else { x };
        let last = self.layers.len() - 1;
        for (i, l) in self.layers.iter().enumerate() {
            let (mut w, mut b) = (l.weight.val(), l.bias.as_ref().unwrap().val());
            if cast {
                w = w.cast(dt);
                b = b.cast(dt);
            }
            h = h.matmul(w) + b.unsqueeze_dim(0);
            if i != last {
                h = activate(h, act);
            }
        }
        if cast {
            h.cast(FloatDType::F32)
        } else {
            h
        }
    }
}

/// `[in, out]` weight and bias tensors to host layer params.
pub fn layer_to_host<B: Backend>(w: Tensor<B, 2>, b: Tensor<B, 1>) -> LayerParams {
    let [fan_in, fan_out] = w.dims();
    let wt = read_f32(w.into_data());
    let w = (0..fan_in * fan_out)
        .map(|k| {
            let (o, i) = (k / fan_in, k % fan_in);
            wt[i * fan_out + o]
        })
        .collect();
    LayerParams {
        fan_in,
        fan_out,
        w,
        b: read_f32(b.into_data()),
    }
}

/// Tensor data as f32, whatever float dtype it holds.
pub fn read_f32(d: TensorData) -> Vec<f32> {
    d.convert::<f32>()
        .to_vec::<f32>()
        .expect("float tensor data converts to f32")
}

fn activate<B: Backend>(h: Tensor<B, 2>, act: Activation) -> Tensor<B, 2> {
    match act {
        Activation::Relu => act_fn::relu(h),
        Activation::Tanh => h.tanh(),
        Activation::Sigmoid => act_fn::sigmoid(h),
        Activation::Silu => act_fn::silu(h),
        Activation::Gelu => act_fn::gelu(h),
    }
}
