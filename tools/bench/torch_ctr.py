#!/usr/bin/python3
"""PyTorch baselines of Ember's CTR models (DLRM, DeepFM, DCN-v2), configured
like `ember train`, for comparing quality (test AUC, logloss) and speed on the
same examples.

Same data (tools/bench/bench_data.py): the same split, dense transform
log(1 + x) and one embedding row per distinct value of a slot. Same models as
engine/models/*.cc, layer for layer:
  dlrm    bottom MLP (ReLU; last width --embedding_dim) over the dense
          features, dot interaction of [bottom, embeddings] (pairs i > j),
          top MLP to one logit over [bottom, pairs]; without dense features
          the embeddings interact among themselves and the top MLP reads
          [embeddings, pairs].
  deepfm  scale * FM(embeddings) + bias + linear([dense, emb]) + MLP([dense, emb]).
  dcn_v2  --cross_layers full-rank cross layers x0 * (W x + b) + x over
          x0 = [dense, emb], then the MLP.
He-uniform weights (bound sqrt(6 / fan_in); cross layers fan_in + fan_out),
zero biases, FM scale 0, embeddings uniform in +-1/sqrt(dim). Sigmoid
cross-entropy averaged over the batch. Same optimizers: Adagrad (eps 1e-8 on
the root, accumulator from 0; Ember's form), row-wise Adagrad (one
accumulator per row, as Ember's rowwise_adagrad) or SGD on the embeddings
with sparse gradients, Adam on the dense weights.

The baseline gets its best settings: all slots in one fused embedding table
(one lookup, one sparse gradient and one optimizer step per batch instead of
one per slot), preloaded tensors with each epoch's shuffled copy made before
the clock starts, multi-tensor Adam, torch.set_num_threads(--threads). Run it
with OPENBLAS_CORETYPE=SkylakeX (Debian's OpenBLAS 0.3.21 does not recognise
this CPU and falls back to generic kernels) and the OpenMP build of OpenBLAS
(libopenblas0-openmp; the pthread build fights torch's OpenMP threads):
tools/bench/run.sh does both.

--start=ember starts where `ember train --seed=S` starts, for a paired
comparison: Ember's initial embedding rows (by each row's key, which the .npz
holds), Ember's initial dense weights (by parameter name) and Ember's batch
order in every epoch, all reproduced from the seed (tools/bench/ember_random.py).
The distributions are the ones above either way; with the same draws, two runs
differ only by the engines' arithmetic, not by the luck of the draw.

--precision=bf16 (Ember's --dense_precision=bf16) runs the forward under
torch.autocast(cpu, bfloat16), PyTorch's own mixed precision for the CPU: the
matrix products (the MLPs and the interaction's bmm) in bf16 with f32 sums
and f32 master weights, the loss in f32. Debian's torch 1.13 runs them with
its oneDNN 2.6 on AMX tiles on this CPU (ONEDNN_VERBOSE=1 shows
brg:avx512_core_amx_bf16): DLRM trains at 1.7x its f32 samples/s on 2
threads, 2x on 1. Tried and not kept (DLRM, 2 threads, quiet machine): the
interaction's bmm in f32 (-20%), oneDNN without AMX
(ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16: -40%, f32 speed), torch.jit.trace of
the model (-10%; the CPU fuser forms no fusion group in a training graph),
torch.set_flush_denormal(True) (-2%, noise). Prepacked weights for training
need intel-extension-for-pytorch, which Debian does not package.

Usage:
  torch_ctr.py --data=prepared.npz [--model=dlrm] [--batch_size=2048] ...
  torch_ctr.py --train_data=criteo.tsv [--test_fraction=0.2] ...
Prints one JSON line: {"auc", "logloss", "samples_per_sec", "train_seconds",
"test_examples", "steps"}; the first --warmup_steps steps are not timed.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_data  # noqa: E402
import ember_random  # noqa: E402


def he_uniform_(tensor, fan_in):
    bound = math.sqrt(6.0 / fan_in)
    torch.nn.init.uniform_(tensor, -bound, bound)


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        linear = torch.nn.Linear(widths[i], widths[i + 1])
        he_uniform_(linear.weight, widths[i])
        torch.nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i + 2 < len(widths) or last_relu:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def with_output(hidden, output):
    return hidden if hidden and hidden[-1] == output else hidden + [output]


class Embeddings(torch.nn.Module):
    """One fused table for every slot; single-valued slots by lookup, the
    multi-valued one (if any) by sum pooling. Returns [B, S, dim]."""

    def __init__(self, table_rows, dim, has_bag):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(table_rows, dim))
        torch.nn.init.uniform_(self.weight, -1 / math.sqrt(dim), 1 / math.sqrt(dim))
        self.has_bag = has_bag

    def forward(self, ids, bag_ids=None, bag_offsets=None):
        e = F.embedding(ids, self.weight, sparse=True)
        if self.has_bag:
            bag = F.embedding_bag(bag_ids, self.weight, bag_offsets, mode="sum", sparse=True)
            e = torch.cat([e, bag.unsqueeze(1)], dim=1)
        return e


class Ctr(torch.nn.Module):
    def __init__(self, model, num_dense, num_slots, table_rows, has_bag, a):
        super().__init__()
        dim = a.embedding_dim
        self.model, self.num_dense, self.num_slots = model, num_dense, num_slots
        self.emb = Embeddings(table_rows, dim, has_bag)
        top = [int(w) for w in a.top_mlp.split(",") if w]
        width = num_dense + num_slots * dim  # [dense, embeddings]
        if model == "dlrm":
            f = num_slots
            direct = num_slots * dim
            if num_dense > 0:
                bottom = [int(w) for w in a.bottom_mlp.split(",") if w]
                self.bottom = mlp([num_dense] + with_output(bottom, dim), last_relu=True)
                f, direct = num_slots + 1, dim
            self.li, self.lj = torch.tril_indices(f, f, offset=-1)
            self.top = mlp([direct + f * (f - 1) // 2] + with_output(top, 1), last_relu=False)
        elif model == "deepfm":
            self.linear = mlp([width, 1], last_relu=False)
            self.deep = mlp([width] + with_output(top, 1), last_relu=False)
            self.fm_scale = torch.nn.Parameter(torch.zeros(1))
            self.fm_bias = torch.nn.Parameter(torch.zeros(1))
        elif model == "dcn_v2":
            self.cross_w = torch.nn.ParameterList()
            self.cross_b = torch.nn.ParameterList()
            for _ in range(a.cross_layers):
                w = torch.nn.Parameter(torch.empty(width, width))
                he_uniform_(w, 2 * width)
                self.cross_w.append(w)
                self.cross_b.append(torch.nn.Parameter(torch.zeros(width)))
            self.deep = mlp([width] + with_output(top, 1), last_relu=False)
        else:
            raise ValueError("unknown --model " + model)

    def he_uniform_parameters(self):
        """(Ember's name, parameter, fan_in) of each He-uniform weight, as
        engine/models/*.cc name them: bottom.l / top.l (DLRM), linear.0 and
        deep.l (DeepFM), cross.l and deep.l (DCN-v2); l counts Linear layers."""
        out = []
        for prefix in ("bottom", "top", "linear", "deep"):
            if hasattr(self, prefix):
                linears = [m for m in getattr(self, prefix) if isinstance(m, torch.nn.Linear)]
                out += [("%s.%d.weight" % (prefix, l), m.weight, m.in_features)
                        for l, m in enumerate(linears)]
        if hasattr(self, "cross_w"):
            out += [("cross.%d.weight" % l, w, 2 * w.shape[1]) for l, w in enumerate(self.cross_w)]
        return out

    @torch.no_grad()
    def start_as_ember(self, seed, keys, key_rows=None):
        """Ember's initial weights for --seed=seed: the rows of `keys` (rows
        key_rows, or all rows in order) and every He-uniform weight; biases
        and the FM scale start at zero in both. Rows without a key (padding
        that no example reads) keep their draw."""
        rows = torch.from_numpy(ember_random.initial_rows(seed, keys, self.emb.weight.shape[1]))
        if key_rows is None:
            self.emb.weight.copy_(rows)
        else:
            self.emb.weight[torch.from_numpy(key_rows)] = rows
        for name, p, fan_in in self.he_uniform_parameters():
            p.copy_(torch.from_numpy(ember_random.dense_init(seed, name, tuple(p.shape), fan_in)))

    def dense_parameters(self):
        return [p for n, p in self.named_parameters() if not n.startswith("emb.")]

    def forward(self, dense, ids, bag_ids=None, bag_offsets=None):
        e = self.emb(ids, bag_ids, bag_offsets)  # [B, S, dim]
        flat = e.reshape(e.shape[0], -1)
        if self.model == "dlrm":
            if self.num_dense > 0:
                direct = self.bottom(dense)
                feats = torch.cat([direct.unsqueeze(1), e], dim=1)
            else:
                direct, feats = flat, e
            z = torch.bmm(feats, feats.transpose(1, 2))[:, self.li, self.lj]
            return self.top(torch.cat([direct, z], dim=1)).squeeze(1)
        x0 = torch.cat([dense, flat], dim=1) if self.num_dense > 0 else flat
        if self.model == "deepfm":
            s = e.sum(dim=1)
            fm = 0.5 * (s * s - (e * e).sum(dim=1)).sum(dim=1)
            return fm * self.fm_scale + self.fm_bias + (self.linear(x0) + self.deep(x0)).squeeze(1)
        x = x0
        for w, b in zip(self.cross_w, self.cross_b):
            x = x0 * torch.addmm(b, x, w.t()) + x
        return self.deep(x).squeeze(1)


class RowWiseAdagrad(torch.optim.Optimizer):
    """Row-wise Adagrad on sparse gradients, Ember's rowwise_adagrad (and
    FBGEMM's): per row a += mean(g^2); w -= lr * g / (sqrt(a) + eps)."""

    def __init__(self, params, lr, eps=1e-8):
        super().__init__(params, dict(lr=lr, eps=eps))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = torch.zeros(p.shape[0])

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.coalesce()
                rows, values = g.indices()[0], g.values()
                acc = self.state[p]["sum"]
                acc.index_add_(0, rows, values.pow(2).mean(dim=1))
                scale = group["lr"] / (acc[rows].sqrt() + group["eps"])
                p.index_add_(0, rows, values * -scale.unsqueeze(1))


def auc(scores, labels):
    """Mann-Whitney AUC with tied scores sharing their mean rank."""
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    ranks = np.repeat(first + 0.5 * (counts + 1), counts)
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y > 0.5].sum() - pos * (pos + 1) / 2) / (pos * neg))


def load(a):
    if a.data:
        with np.load(a.data) as d:
            arrays = {k: d[k] for k in d.files}
    else:
        arrays = bench_data.criteo_arrays(a.train_data.split(","), 0, a.test_fraction)
    arrays.setdefault("bag_ids", None)
    arrays.setdefault("keys", None)
    arrays.setdefault("key_rows", None)
    return arrays


def bag_slice(bag_ids, bag_offsets, rows):
    """The bags of `rows` (i64 tensor) as (ids, offsets) for embedding_bag."""
    ends = torch.cat([bag_offsets[1:], torch.tensor([len(bag_ids)])])
    starts = bag_offsets[rows]
    lengths = ends[rows] - starts
    offsets = torch.zeros(len(rows), dtype=torch.int64)
    offsets[1:] = torch.cumsum(lengths, 0)[:-1]
    index = torch.repeat_interleave(starts - offsets, lengths) + torch.arange(int(lengths.sum()))
    return bag_ids[index], offsets


def autocast(a):
    """The forward's precision: with --precision=bf16, autocast runs the
    matrix products (linear, bmm, addmm) on bf16 copies of their inputs and
    weights, with f32 sums (oneDNN; AMX or AVX512-BF16 where the CPU has
    them), and their gradients in bf16 too; the weights, the embeddings and
    the optimizers stay f32."""
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")


def train(a, arrays):
    labels = torch.from_numpy(np.asarray(arrays["labels"], np.float32))
    dense = torch.from_numpy(np.asarray(arrays["dense"], np.float32))
    ids = torch.from_numpy(np.asarray(arrays["ids"], np.int64))
    n_train = int(arrays["n_train"])
    has_bag = arrays["bag_ids"] is not None
    bags = (torch.from_numpy(arrays["bag_ids"]), torch.from_numpy(arrays["bag_offsets"])) \
        if has_bag else None
    num_slots = ids.shape[1] + (1 if has_bag else 0)
    model = Ctr(a.model, dense.shape[1], num_slots, int(arrays["table_rows"]), has_bag, a)
    if a.start == "ember":
        if arrays.get("keys") is None:
            raise ValueError("--start=ember needs the rows' keys, which %s does not hold (an "
                             ".npz of an older bench_data.py: delete it to prepare it again)"
                             % a.data)
        model.start_as_ember(a.seed, arrays["keys"], arrays["key_rows"])
    if a.sparse_optimizer == "adagrad":
        sparse = torch.optim.Adagrad(model.emb.parameters(), lr=a.sparse_lr, eps=1e-8)
    elif a.sparse_optimizer == "rowwise_adagrad":
        sparse = RowWiseAdagrad(model.emb.parameters(), lr=a.sparse_lr, eps=1e-8)
    elif a.sparse_optimizer == "sgd":
        sparse = torch.optim.SGD(model.emb.parameters(), lr=a.sparse_lr)
    else:
        raise ValueError("--sparse_optimizer must be adagrad, rowwise_adagrad or sgd")
    adam = torch.optim.Adam(model.dense_parameters(), lr=a.dense_lr, foreach=True)
    generator = torch.Generator().manual_seed(a.seed)
    timed_seconds, timed_examples, steps = 0.0, 0, 0
    for epoch in range(a.epochs):
        # The epoch's shuffled copy, made before the clock starts (preloaded data).
        if a.start == "ember":
            order = torch.from_numpy(ember_random.epoch_order(a.seed, epoch, n_train))
        else:
            order = torch.randperm(n_train, generator=generator)
        batches = []
        for begin in range(0, n_train, a.batch_size):
            rows = order[begin:begin + a.batch_size]
            bag = bag_slice(*bags, rows) if has_bag else (None, None)
            batches.append((dense[rows], ids[rows], labels[rows]) + bag)
        start = time.perf_counter() if steps >= a.warmup_steps else None
        for d, x, y, b_ids, b_off in batches:
            if a.max_steps and steps == a.max_steps:
                break
            if start is None and steps == a.warmup_steps:
                start = time.perf_counter()
            with autocast(a):
                logits = model(d, x, b_ids, b_off)
            loss = F.binary_cross_entropy_with_logits(logits.float(), y)
            sparse.zero_grad(set_to_none=True)
            adam.zero_grad(set_to_none=True)
            loss.backward()
            sparse.step()
            adam.step()
            steps += 1
            if start is not None:
                timed_examples += len(y)
        if start is not None:
            timed_seconds += time.perf_counter() - start
    return model, steps, timed_examples, timed_seconds


def evaluate(a, model, arrays):
    n_train = int(arrays["n_train"])
    labels = np.asarray(arrays["labels"], np.float32)[n_train:]
    dense = torch.from_numpy(np.asarray(arrays["dense"], np.float32)[n_train:])
    ids = torch.from_numpy(np.asarray(arrays["ids"], np.int64)[n_train:])
    bag = (None, None)
    if arrays["bag_ids"] is not None:
        rows = torch.arange(n_train, len(arrays["labels"]))
        bag = bag_slice(torch.from_numpy(arrays["bag_ids"]), torch.from_numpy(arrays["bag_offsets"]),
                        rows)
    with torch.no_grad(), autocast(a):
        logits = model(dense, ids, *bag).float().numpy().astype(np.float64)
    prob = 1 / (1 + np.exp(-logits))
    pc = np.clip(prob, 1e-7, 1 - 1e-7)
    logloss = float(-(labels * np.log(pc) + (1 - labels) * np.log(1 - pc)).mean())
    return auc(prob, labels), logloss, len(labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="", help="an .npz from bench_data.py")
    p.add_argument("--train_data", default="", help="Criteo TSV, when --data is not given")
    p.add_argument("--test_fraction", type=float, default=0.2)
    p.add_argument("--model", default="dlrm", choices=["dlrm", "deepfm", "dcn_v2"])
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--bottom_mlp", default="512,256,64")
    p.add_argument("--top_mlp", default="512,256")
    p.add_argument("--cross_layers", type=int, default=3)
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--sparse_optimizer", default="adagrad")
    p.add_argument("--sparse_lr", type=float, default=0.05)
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--max_steps", type=int, default=0,
                   help="stop after this many training steps; 0: no limit (ember's flag)")
    p.add_argument("--start", default="own", choices=["own", "ember"],
                   help="own: PyTorch's draws of the initial weights and batch order; ember: "
                        "Ember's for the same --seed (needs an .npz with the rows' keys)")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="the forward's matrix products: f32, or bf16 under autocast")
    a = p.parse_args()
    if not a.data and not a.train_data:
        p.error("give --data or --train_data")
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    arrays = load(a)
    model, steps, examples, seconds = train(a, arrays)
    test_auc, logloss, n_test = evaluate(a, model, arrays)
    print(json.dumps({"auc": test_auc, "logloss": logloss,
                      "samples_per_sec": examples / seconds if seconds > 0 else 0.0,
                      "train_seconds": seconds, "steps": steps, "test_examples": n_test}))


if __name__ == "__main__":
    main()
