#!/usr/bin/env python3
"""DLRM in PyTorch entirely on one CUDA device: the "GPU-only" baseline of
scripts/gpu_check.sh's heterogeneous measurement (Ember keeps the embeddings
on the CPU; here they live in GPU memory).

Speed only, on random batches made on the GPU before the clock starts: ids
uniform in each slot's --vocabulary, dense features log(1 + x) of counts,
labels at a 25% positive rate. There is no AUC to compare (the data has no
signal); torch_ctr.py is the quality baseline, and it runs on the CPU only.

The model is engine/models/dlrm.cc's, layer for layer as in torch_ctr.py:
bottom MLP (ReLU; last width --embedding_dim) over the dense features, the dot
interaction of [bottom, embeddings] (pairs i > j), top MLP to one logit over
[bottom, pairs]. All slots share one fused table (one lookup and one sparse
gradient per batch); row-wise-free Adagrad on it (sparse gradients), Adam on
the dense weights. --precision=bf16 runs the forward under
torch.autocast(cuda, bfloat16). Prints one JSON object (and writes it to
--json_out): samples/s over the steps after --warmup_steps.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2 or last_relu:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class Dlrm(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        bottom = [a.num_dense] + [int(w) for w in a.bottom_mlp.split(",") if w]
        if bottom[-1] != a.embedding_dim:
            bottom.append(a.embedding_dim)
        self.bottom = mlp(bottom, last_relu=True)
        self.table = torch.nn.Embedding(a.num_slots * a.vocabulary, a.embedding_dim, sparse=True)
        torch.nn.init.uniform_(self.table.weight, -a.embedding_dim ** -0.5, a.embedding_dim ** -0.5)
        features = a.num_slots + 1
        pairs = features * (features - 1) // 2
        top = [a.embedding_dim + pairs] + [int(w) for w in a.top_mlp.split(",") if w] + [1]
        self.top = mlp(top, last_relu=False)
        li, lj = torch.tril_indices(features, features, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)

    def forward(self, dense, ids):
        x = self.bottom(dense)
        e = self.table(ids)  # batch x slots x dim
        t = torch.cat([x.unsqueeze(1), e], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch_size", type=int, default=4096)
    p.add_argument("--embedding_dim", type=int, default=32)
    p.add_argument("--bottom_mlp", default="512,256,32")
    p.add_argument("--top_mlp", default="1024,512,256")
    p.add_argument("--num_dense", type=int, default=13)
    p.add_argument("--num_slots", type=int, default=26)
    p.add_argument("--vocabulary", type=int, default=100000, help="ids per slot")
    p.add_argument("--sparse_lr", type=float, default=0.05)
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    p.add_argument("--seconds", type=float, default=20.0, help="timed training time, s")
    p.add_argument("--warmup_steps", type=int, default=20)
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_gpu_dlrm: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    torch.manual_seed(1)
    model = Dlrm(a).to(dev)
    sparse_opt = torch.optim.Adagrad([model.table.weight], lr=a.sparse_lr)
    dense_params = [q for n, q in model.named_parameters() if not n.startswith("table")]
    dense_opt = torch.optim.Adam(dense_params, lr=a.dense_lr)

    pool = 32  # distinct batches, cycled; made before the clock starts
    offsets = torch.arange(a.num_slots, device=dev) * a.vocabulary
    batches = []
    for _ in range(pool):
        ids = torch.randint(0, a.vocabulary, (a.batch_size, a.num_slots), device=dev) + offsets
        dense = torch.log1p(torch.randint(0, 100, (a.batch_size, a.num_dense), device=dev).float())
        labels = (torch.rand(a.batch_size, device=dev) < 0.25).float()
        batches.append((dense, ids, labels))

    def step(i):
        dense, ids, labels = batches[i % pool]
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(dense, ids)
        loss = F.binary_cross_entropy_with_logits(logits.float(), labels)
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        return loss

    for i in range(a.warmup_steps):
        step(i)
    torch.cuda.synchronize()
    steps = 0
    start = time.perf_counter()
    while True:
        loss = step(steps)
        steps += 1
        if steps % 50 == 0:
            torch.cuda.synchronize()
            if time.perf_counter() - start >= a.seconds:
                break
    seconds = time.perf_counter() - start
    result = {
        "model": "dlrm",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "precision": a.precision,
        "batch_size": a.batch_size,
        "steps": steps,
        "seconds": seconds,
        "samples_per_sec": steps * a.batch_size / seconds,
        "last_loss": float(loss),
        "embedding_rows": a.num_slots * a.vocabulary,
        "embedding_bytes": a.num_slots * a.vocabulary * a.embedding_dim * 4,
        "data": "random batches on the GPU (speed only)",
    }
    text = json.dumps(result, indent=2)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
