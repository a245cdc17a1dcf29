#!/usr/bin/python3
"""A PyTorch DLRM on Criteo TSV, configured like `ember train`, for comparing
quality (test AUC and logloss) and speed on the same split.

Same data handling as Ember: label, 13 integer columns through log(1 + x) for
x > 0 (else 0; missing is 0), 26 categorical columns where each distinct value
of a slot (missing included) gets its own embedding row. Same model: bottom
MLP (ReLU), dot interaction of [bottom output, 26 embeddings] (pairs i > j),
top MLP (ReLU) to one logit, sigmoid cross-entropy; He-uniform weights, zero
biases, embeddings uniform in +-1/sqrt(dim). Same optimizers: Adagrad on the
embeddings (sparse gradients), Adam on the dense weights.

Usage: torch_dlrm.py --train_data=F [--test_fraction=0.2] [--batch_size=256] ...
Prints one JSON line: {"auc": .., "logloss": .., "samples_per_sec": ..}.
"""
import argparse
import json
import math
import time

import numpy as np
import torch


def read_criteo(paths):
    labels, dense, cats = [], [], []
    for path in paths:
        with open(path, "r") as f:
            for line in f:
                fields = line.rstrip("\r\n").split("\t")
                if len(fields) != 40:
                    continue
                labels.append(float(fields[0]))
                row = []
                for v in fields[1:14]:
                    x = float(v) if v else 0.0
                    row.append(math.log1p(x) if x > 0 else 0.0)
                dense.append(row)
                cats.append(fields[14:40])
    return np.array(labels, np.float32), np.array(dense, np.float32), cats


def index_categoricals(cats):
    vocab = [dict() for _ in range(26)]
    ids = np.zeros((len(cats), 26), np.int64)
    for i, row in enumerate(cats):
        for s, v in enumerate(row):
            ids[i, s] = vocab[s].setdefault(v, len(vocab[s]))
    return ids, [len(v) for v in vocab]


def mlp(widths, last_relu):
    layers = []
    for i in range(len(widths) - 1):
        linear = torch.nn.Linear(widths[i], widths[i + 1])
        bound = math.sqrt(6.0 / widths[i])
        torch.nn.init.uniform_(linear.weight, -bound, bound)
        torch.nn.init.zeros_(linear.bias)
        layers.append(linear)
        if i + 2 < len(widths) or last_relu:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class Dlrm(torch.nn.Module):
    def __init__(self, vocab_sizes, dim, bottom, top):
        super().__init__()
        self.embeddings = torch.nn.ModuleList()
        for n in vocab_sizes:
            e = torch.nn.Embedding(n, dim, sparse=True)
            torch.nn.init.uniform_(e.weight, -1 / math.sqrt(dim), 1 / math.sqrt(dim))
            self.embeddings.append(e)
        self.bottom = mlp([13] + bottom, last_relu=True)
        f = len(vocab_sizes) + 1
        self.li, self.lj = torch.tril_indices(f, f, offset=-1)
        self.top = mlp([dim + f * (f - 1) // 2] + top + [1], last_relu=False)

    def forward(self, dense, ids):
        b = self.bottom(dense)
        feats = torch.stack([b] + [e(ids[:, s]) for s, e in enumerate(self.embeddings)], dim=1)
        z = torch.bmm(feats, feats.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([b, z], dim=1)).squeeze(1)


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        ranks[i:j] = 0.5 * (i + 1 + j)
        i = j
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y > 0.5].sum() - pos * (pos + 1) / 2) / (pos * neg))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train_data", required=True)
    p.add_argument("--test_fraction", type=float, default=0.2)
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--bottom_mlp", default="512,256,64,16")
    p.add_argument("--top_mlp", default="512,256")
    p.add_argument("--batch_size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--sparse_lr", type=float, default=0.05)
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    labels, dense, cats = read_criteo(a.train_data.split(","))
    ids, vocab_sizes = index_categoricals(cats)
    n_test = int(round(len(labels) * a.test_fraction))
    n_train = len(labels) - n_test
    model = Dlrm(vocab_sizes, a.embedding_dim, [int(w) for w in a.bottom_mlp.split(",")],
                 [int(w) for w in a.top_mlp.split(",")])
    sparse = torch.optim.Adagrad(list(model.embeddings.parameters()), lr=a.sparse_lr)
    dense_params = list(model.bottom.parameters()) + list(model.top.parameters())
    adam = torch.optim.Adam(dense_params, lr=a.dense_lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    tl, td, ti = map(torch.from_numpy, (labels, dense, ids))
    generator = torch.Generator().manual_seed(a.seed)
    start = time.time()
    examples = 0
    for _ in range(a.epochs):
        order = torch.randperm(n_train, generator=generator)
        for begin in range(0, n_train, a.batch_size):
            idx = order[begin:begin + a.batch_size]
            loss = loss_fn(model(td[idx], ti[idx]), tl[idx])
            sparse.zero_grad()
            adam.zero_grad()
            loss.backward()
            sparse.step()
            adam.step()
            examples += len(idx)
    seconds = time.time() - start
    with torch.no_grad():
        logits = model(td[n_train:], ti[n_train:]).numpy()
    prob = 1 / (1 + np.exp(-logits.astype(np.float64)))
    y = labels[n_train:]
    pc = np.clip(prob, 1e-7, 1 - 1e-7)
    logloss = float(-(y * np.log(pc) + (1 - y) * np.log(1 - pc)).mean())
    print(json.dumps({"auc": auc(prob, y), "logloss": logloss,
                      "samples_per_sec": examples / seconds, "test_examples": int(len(y))}))


if __name__ == "__main__":
    main()
