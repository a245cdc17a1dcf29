"""Datasets of the benchmark suite, prepared once for both engines.

Each dataset becomes (a) the files and flags `ember train` reads and (b) an
.npz of preloaded arrays for the PyTorch baseline (tools/bench/torch_ctr.py)
holding exactly the examples, labels, dense values and categorical rows Ember
trains on:

  labels  f32 [N]            train rows first, then the test rows
  dense   f32 [N, D]         log(1 + x) for x > 0, else 0 (Ember's LogTransform)
  ids     i64 [N, S1]        single-valued slots, as rows of one fused table
  bag_ids, bag_offsets       (optional) one multi-valued slot, sum-pooled
  n_train, table_rows        rows before the test split; rows of the fused table
  keys    u64 [K]            Ember's key of each row's value, from which
                             torch_ctr.py --start=ember draws Ember's initial
                             rows (tools/bench/ember_random.py)
  key_rows i64 [K]           (generated data) the rows of those keys; without
                             it the keys are those of rows 0..table_rows-1

Categorical values map to rows as Ember maps them to keys: every distinct
value of a slot (the empty, missing value included) has a row of its own
(Ember hashes (slot, bytes) to a 64-bit key and makes a row on first sight).
Slot s owns rows [offset_s, offset_s + rows_s) of the fused table, where
rows_s is the slot's distinct values, or `rows_per_slot` when that is larger
(the generated cases allocate their 1M-row tables whole, as a PyTorch DLRM
does). The held-out split is Ember's: the last llround(N * test_fraction)
rows. Real data is never written into the repository: the prepared files go
to the work directory given by the caller.
"""
import math
import os
import random
import subprocess

import numpy as np

import ember_random

SHARED = os.environ.get("EMBER_SHARED_DATA",
                        os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))

FRAPPE_FIELD_STARTS = [0, 957, 5039, 5046, 5053, 5055, 5058, 5060, 5069, 5149]


def log_transform(x):
    return math.log1p(x) if x > 0 else 0.0


class Indexer:
    """Per-slot value -> row of the fused table, in order of first sight."""

    def __init__(self, num_slots):
        self.vocab = [dict() for _ in range(num_slots)]

    def index(self, slot, value):
        v = self.vocab[slot]
        return v.setdefault(value, len(v))

    def fuse(self, ids, bag_ids, rows_per_slot):
        """Turns per-slot indices into fused-table rows; returns table_rows."""
        sizes = [max(len(v), rows_per_slot) for v in self.vocab]
        offsets = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        self.offsets = offsets
        s1 = ids.shape[1]
        ids += offsets[None, :s1]
        if bag_ids is not None:
            bag_ids += offsets[s1]
        return int(sum(sizes))

    def keys(self):
        """Ember's key (io/feature_hash.h) of every row of the fused table
        that holds a value, after fuse(): slot s's values in order."""
        return np.array([ember_random.hash_categorical(slot, value)
                         for slot, vocab in enumerate(self.vocab) for value in vocab], np.uint64)

    def key_rows(self):
        """The rows of keys(): with padded slots (rows_per_slot larger than a
        slot's values) not all rows hold a value."""
        return np.concatenate([offset + np.arange(len(vocab), dtype=np.int64)
                               for offset, vocab in zip(self.offsets, self.vocab)])


def held_out(n, test_fraction):
    return int(math.floor(n * test_fraction + 0.5))  # std::llround for n * f >= 0


def _prepared(npz, *files):
    """Whether a dataset's npz (and its other files) were prepared, by this
    version: with the rows' keys."""
    if not all(os.path.exists(f) for f in (npz,) + files):
        return False
    with np.load(npz) as d:
        return "keys" in d.files


def save_npz(path, labels, dense, ids, n_train, table_rows, bag_ids=None, bag_offsets=None,
             keys=None, key_rows=None):
    arrays = dict(labels=np.asarray(labels, np.float32), dense=np.asarray(dense, np.float32),
                  ids=ids, n_train=np.int64(n_train), table_rows=np.int64(table_rows))
    if keys is not None:
        rows = table_rows if key_rows is None else len(key_rows)
        if len(keys) != rows:
            raise ValueError("%d keys for %d rows" % (len(keys), rows))
        arrays.update(keys=np.asarray(keys, np.uint64))
        if key_rows is not None:
            arrays.update(key_rows=np.asarray(key_rows, np.int64))
    if bag_ids is not None:
        arrays.update(bag_ids=bag_ids, bag_offsets=bag_offsets)
    np.savez(path, **arrays)


def criteo_arrays(paths, rows_per_slot, test_fraction):
    labels, dense, cats = [], [], []
    idx = Indexer(26)
    for path in paths:
        with open(path, "r") as f:
            for line in f:
                fields = line.rstrip("\r\n").split("\t")
                if len(fields) != 40:
                    continue
                labels.append(float(fields[0]))
                dense.append([log_transform(float(v)) if v else 0.0 for v in fields[1:14]])
                cats.append([idx.index(s, v) for s, v in enumerate(fields[14:40])])
    ids = np.array(cats, np.int64)
    table_rows = idx.fuse(ids, None, rows_per_slot)
    n = len(labels)
    # The generated cases' padded 1M-row tables have rows without a value.
    return dict(labels=labels, dense=np.array(dense, np.float32).reshape(n, 13), ids=ids,
                n_train=n - held_out(n, test_fraction), table_rows=table_rows, keys=idx.keys(),
                key_rows=idx.key_rows() if rows_per_slot > 0 else None)


def generated(ember, work, rows, vocabulary, seed=1):
    """Zipf click data from Ember's planted model (criteo TSV); cached."""
    path = os.path.join(work, "gen_%d_v%d_s%d.tsv" % (rows, vocabulary, seed))
    if not os.path.exists(path):
        subprocess.run([ember, "gen-data", "--out=" + path, "--rows=%d" % rows,
                        "--vocabulary=%d" % vocabulary, "--seed=%d" % seed, "--threads=2"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def missing_files(name):
    """The first input file of real dataset `name` that is not there, or None."""
    needs = {"criteo": ["criteo/criteo_kaggle_8k.tsv"],
             "frappe": ["frappe/frappe.validation.libfm", "frappe/frappe.test.libfm"],
             "movielens": ["movielens-100k/u.data", "movielens-100k/u.user",
                           "movielens-100k/u.item"],
             "talkingdata": ["talkingdata/train_sample.csv"]}.get(name, [])
    for rel in needs:
        if not os.path.exists(os.path.join(SHARED, rel)):
            return os.path.join(SHARED, rel)
    return None


def prepare(name, work, ember=None, test_fraction=0.2, gen_rows=0, rows_per_slot=0, fold=0,
            folds=1):
    """Prepares dataset `name`; returns {"npz", "ember_flags", "examples"}.
    folds > 1: fold `fold` of a k-fold cross-validation (see _fold)."""
    if folds > 1:
        return _fold(name, work, fold, folds)
    npz = os.path.join(work, name + ".npz")
    if name == "generated":
        tsv = generated(ember, work, gen_rows, rows_per_slot)
        npz = os.path.splitext(tsv)[0] + ".npz"  # one per size, as the TSV
        flags = ["--train_data=" + tsv, "--format=criteo", "--test_fraction=%g" % test_fraction]
        if not _prepared(npz):
            save_npz(npz, **criteo_arrays([tsv], rows_per_slot, test_fraction))
    elif name == "criteo":
        tsv = os.path.join(SHARED, "criteo", "criteo_kaggle_8k.tsv")
        flags = ["--train_data=" + tsv, "--format=criteo", "--test_fraction=%g" % test_fraction]
        if not _prepared(npz):
            save_npz(npz, **criteo_arrays([tsv], 0, test_fraction))
    elif name == "frappe":
        flags = _frappe(npz)
    elif name == "movielens":
        flags = _movielens(work, npz, test_fraction)
    elif name == "talkingdata":
        flags = _talkingdata(work, npz, test_fraction)
    else:
        raise ValueError("unknown dataset " + name)
    with np.load(npz) as d:
        examples = int(d["labels"].shape[0])
    return {"npz": npz, "ember_flags": flags, "examples": examples}


def _frappe(npz):
    train = os.path.join(SHARED, "frappe", "frappe.validation.libfm")
    test = os.path.join(SHARED, "frappe", "frappe.test.libfm")
    # In memory (not streamed, the default with --test_data): each epoch is a
    # permutation of all examples, which torch_ctr.py --start=ember repeats.
    flags = ["--train_data=" + train, "--test_data=" + test, "--format=libsvm",
             "--field_starts=" + ",".join(map(str, FRAPPE_FIELD_STARTS)), "--reader=memory"]
    if _prepared(npz):
        return flags
    idx = Indexer(len(FRAPPE_FIELD_STARTS))
    labels, cats, n_train = [], [], 0
    for path in (train, test):
        with open(path, "r") as f:
            for line in f:
                tokens = line.split()
                if not tokens:
                    continue
                labels.append(1.0 if float(tokens[0]) == 1 else 0.0)
                row = [0] * len(FRAPPE_FIELD_STARTS)
                for t in tokens[1:]:
                    i = int(t.split(":")[0])
                    slot = max(s for s, start in enumerate(FRAPPE_FIELD_STARTS) if i >= start)
                    row[slot] = idx.index(slot, str(i))
                cats.append(row)
        if path == train:
            n_train = len(labels)
    ids = np.array(cats, np.int64)
    table_rows = idx.fuse(ids, None, 0)
    save_npz(npz, labels, np.zeros((len(labels), 0), np.float32), ids, n_train, table_rows,
             keys=idx.keys())
    return flags


def _write_shuffled_csv(path, rows, seed):
    """Rows in a fixed random order, so that the held-out tail is a random split."""
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    with open(path, "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")
    return rows


def _csv_arrays(rows, multi_column, test_fraction):
    """rows: [label, cat..., (multi)] strings, as written to the TSV."""
    num_single = len(rows[0]) - 1 - (1 if multi_column else 0)
    idx = Indexer(num_single + (1 if multi_column else 0))
    labels, cats, bag_ids, bag_offsets = [], [], [], []
    for r in rows:
        labels.append(float(r[0]))
        cats.append([idx.index(s, v) for s, v in enumerate(r[1:1 + num_single])])
        if multi_column:
            bag_offsets.append(len(bag_ids))
            bag_ids.extend(idx.index(num_single, v) for v in r[-1].split("|") if v)
    ids = np.array(cats, np.int64)
    bags = np.array(bag_ids, np.int64) if multi_column else None
    table_rows = idx.fuse(ids, bags, 0)
    n = len(labels)
    return dict(labels=labels, dense=np.zeros((n, 0), np.float32), ids=ids,
                n_train=n - held_out(n, test_fraction), table_rows=table_rows, bag_ids=bags,
                bag_offsets=np.array(bag_offsets, np.int64) if multi_column else None,
                keys=idx.keys())


def _movielens(work, npz, test_fraction):
    """MovieLens-100k as CTR: label rating >= 4; user, item, age, gender,
    occupation, zip; genres as a multi-valued slot."""
    tsv = os.path.join(work, "movielens.tsv")
    flags = ["--train_data=" + tsv, "--format=csv", "--delimiter=tab",
             "--schema=label,1-6=cat,7=multi:sep=pipe", "--test_fraction=%g" % test_fraction]
    if _prepared(npz, tsv):
        return flags
    base = os.path.join(SHARED, "movielens-100k")
    users = {}
    with open(os.path.join(base, "u.user"), encoding="latin-1") as f:
        for line in f:
            u = line.rstrip("\r\n").split("|")
            users[u[0]] = u[1:5]  # age, gender, occupation, zip
    genres = {}
    with open(os.path.join(base, "u.item"), encoding="latin-1") as f:
        for line in f:
            it = line.rstrip("\r\n").split("|")
            genres[it[0]] = "|".join(str(g) for g, flag in enumerate(it[5:24]) if flag == "1")
    rows = []
    with open(os.path.join(base, "u.data")) as f:
        for line in f:
            user, item, rating, _ = line.split("\t")
            rows.append(["1" if int(rating) >= 4 else "0", user, item] + users[user] +
                        [genres[item]])
    rows = _write_shuffled_csv(tsv, rows, seed=100)
    save_npz(npz, **_csv_arrays(rows, True, test_fraction))
    return flags


def _talkingdata(work, npz, test_fraction):
    """TalkingData: ip, app, device, os, channel and the click's hour of day
    as categorical slots; attributed_time (it leaks the label) is dropped."""
    tsv = os.path.join(work, "talkingdata.tsv")
    flags = ["--train_data=" + tsv, "--format=csv", "--delimiter=tab",
             "--schema=label,1-6=cat", "--test_fraction=%g" % test_fraction]
    if _prepared(npz, tsv):
        return flags
    rows = []
    with open(os.path.join(SHARED, "talkingdata", "train_sample.csv")) as f:
        next(f)
        for line in f:
            ip, app, device, os_, channel, click_time, _, label = line.rstrip("\r\n").split(",")
            rows.append([label, ip, app, device, os_, channel, click_time[11:13]])
    rows = _write_shuffled_csv(tsv, rows, seed=100)
    save_npz(npz, **_csv_arrays(rows, False, test_fraction))
    return flags


def _fold(name, work, fold, folds):
    """Fold `fold` (0-based) of `folds` of dataset `name` (see rotate_fold);
    for the datasets with one held-out tail (not Frappe, whose test file is
    given)."""
    base = prepare(name, work)
    flags = base["ember_flags"]
    sources = [f.split("=", 1)[1] for f in flags if f.startswith("--train_data=")]
    if len(sources) != 1 or any(f.startswith("--test_data=") for f in flags):
        raise ValueError("%s has a test set of its own: it is not split into folds" % name)
    stem = os.path.join(work, "%s_fold%dof%d" % (name, fold, folds))
    if not _prepared(stem + ".npz", stem + ".tsv"):
        rotate_fold(sources[0], base["npz"], fold, folds, stem + ".tsv", stem + ".npz")
    flags = ["--train_data=" + stem + ".tsv" if f.startswith("--train_data=") else
             "--test_fraction=%r" % (1.0 / folds) if f.startswith("--test_fraction=") else f
             for f in flags]
    return {"npz": stem + ".npz", "ember_flags": flags, "examples": base["examples"]}


def rotate_fold(src_tsv, src_npz, fold, folds, tsv, npz):
    """Writes fold `fold` (0-based) of `folds` of a k-fold cross-validation:
    the N examples of src_tsv (one per non-empty line) and src_npz rotated so
    that the fold's h = llround(N / folds) examples (Ember's held-out count
    for --test_fraction=1/folds) are the held-out tail, the rest in their
    order before them. Fold k < folds - 1 holds examples [k * h, (k + 1) * h),
    the last fold the last h: the unrotated split. When N is a multiple of
    folds every example is tested once; otherwise the last two folds overlap
    (folds * h > N) or examples [(folds - 1) * h, N - h) are never tested."""
    if not 0 <= fold < folds:
        raise ValueError("fold %d of %d" % (fold, folds))
    with np.load(src_npz) as d:
        arrays = {k: d[k] for k in d.files}
    n = int(arrays["labels"].shape[0])
    with open(src_tsv, "r") as f:
        lines = [line if line.endswith("\n") else line + "\n" for line in f if line.strip()]
    if len(lines) != n:
        raise ValueError("%s: %d lines but %d examples in %s; lines and examples must match to "
                         "rotate them" % (src_tsv, len(lines), n, src_npz))
    h = held_out(n, 1.0 / folds)
    if h == 0 or (folds - 1) * h > n:
        raise ValueError("%s: %d examples cannot be split into %d folds" % (src_npz, n, folds))
    shift = ((fold + 1) * h if fold + 1 < folds else n) % n
    with open(tsv, "w") as f:
        f.writelines(lines[shift:] + lines[:shift])
    order = np.roll(np.arange(n), -shift)  # order[i] = (i + shift) % n
    rotated = dict(labels=arrays["labels"][order], dense=arrays["dense"][order],
                   ids=arrays["ids"][order], n_train=n - h, table_rows=arrays["table_rows"],
                   keys=arrays.get("keys"), key_rows=arrays.get("key_rows"))
    if "bag_ids" in arrays:
        ends = np.append(arrays["bag_offsets"], len(arrays["bag_ids"]))
        starts, lengths = ends[:-1][order], np.diff(ends)[order]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        gather = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
        rotated.update(bag_ids=arrays["bag_ids"][gather], bag_offsets=offsets)
    save_npz(npz, **rotated)
