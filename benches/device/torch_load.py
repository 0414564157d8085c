"""Loads a ferrofit model.safetensors into a PyTorch nn.Sequential with the
names the README documents, and compares its outputs with `ferrofit predict`.

usage: torch_load.py MODEL_DIR PREDICTIONS.csv  (predictions: x0,y0 rows)"""
import sys

import torch
from safetensors.torch import load_file

model_dir, preds = sys.argv[1], sys.argv[2]
state = load_file(f"{model_dir}/model.safetensors")
layers = sorted({int(k.split(".")[1]) for k in state})
mods = []
for i in layers:
    w = state[f"layers.{i}.weight"]
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    mods.append(lin)
    if i != layers[-1]:
        mods.append(torch.nn.ReLU())
net = torch.nn.Sequential(*mods)
# layers.{i} of ferrofit is the i-th Linear: index 2*i in a Sequential with activations between.
net.load_state_dict({k.replace(f"layers.{k.split('.')[1]}.", f"{2 * int(k.split('.')[1])}."): v for k, v in state.items()})
rows = [line.split(",") for line in open(preds).read().split("\n")[1:] if line]
x = torch.tensor([[float(r[0])] for r in rows])
want = torch.tensor([[float(r[1])] for r in rows])
with torch.no_grad():
    got = net(x)
print(f"torch loaded {len(layers)} layers {[tuple(state[f'layers.{i}.weight'].shape) for i in layers]}; "
      f"max |torch - ferrofit predict| = {(got - want).abs().max().item():.3e} over {len(rows)} points")
