"""Ember's start of a training run, reproduced in numpy: its initial weights
and its batch order for a given --seed, so that the PyTorch baseline can
start where Ember starts (torch_ctr.py --start=ember).

Everything Ember draws at the start is a pure function of the seed through
its counter-based random numbers (core/random.h), so it is reproduced here
bit for bit, not re-drawn:
  Mix64, HashCombine      core/random.h (SplitMix64's finaliser)
  RandomStream            NextU64 / NextDouble / Uniform / NextBelow
  UniformAt               the initial embedding rows (embedding/row_init.h)
  hash_categorical        a categorical value's key (io/feature_hash.h)
  dense_init              He-uniform parameters (ops/graph_executor.cc)
  epoch_order             an epoch's permutation (io/batch_source.cc)
tests/tools/bench_data_test.py checks these against the values that Ember's
own tests pin (tests/core/random_test.cc, tests/io/feature_hash_test.cc,
tests/io/batch_source_test.cc, tests/ops/graph_executor_test.cc).
"""
import math

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9e3779b97f4a7c15
COMBINE = 0x632be59bd9b4e019
STREAM_STEP = 0xd1342543de82ef95
SHUFFLE_STREAM = 0x5eed0000  # io/batch_source.cc's kShuffleStream
SLOT_BITS = 10  # io/feature_hash.h's kDefaultSlotBits


def mix64(x):
    """SplitMix64's finaliser on a Python int or a numpy uint64 array."""
    if isinstance(x, (np.ndarray, np.generic)):
        with np.errstate(over="ignore"):
            x = x + np.uint64(GOLDEN)
            x = (x ^ (x >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
            x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
            return x ^ (x >> np.uint64(31))
    x = (x + GOLDEN) & MASK
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & MASK
    return x ^ (x >> 31)


def hash_combine(a, b):
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        with np.errstate(over="ignore"):
            inner = mix64(np.asarray(b, np.uint64) + np.uint64(COMBINE))
            return mix64(np.asarray(a, np.uint64) ^ inner)
    return mix64(a ^ mix64((b + COMBINE) & MASK))


def to_unit(bits):
    """The top 53 of 64 bits as a double in [0, 1), exactly (Ember's >> 11 * 2^-53)."""
    if isinstance(bits, (np.ndarray, np.generic)):
        return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return float(bits >> 11) * 2.0**-53


class RandomStream:
    """core/random.h's RandomStream(seed, stream)."""

    def __init__(self, seed, stream=0):
        self.key = hash_combine(seed & MASK, stream & MASK)
        self.counter = 0

    def next_u64(self):
        x = mix64((self.key + self.counter * STREAM_STEP) & MASK)
        self.counter += 1
        return x

    def next_u64s(self, n):
        """The next n values at once, as a uint64 array."""
        counters = np.arange(self.counter, self.counter + n, dtype=np.uint64)
        self.counter += n
        with np.errstate(over="ignore"):
            return mix64(np.uint64(self.key) + counters * np.uint64(STREAM_STEP))

    def next_double(self):
        return to_unit(self.next_u64())

    def next_below(self, n):
        """Lemire's multiply-shift with rejection, as RandomStream::NextBelow."""
        m = self.next_u64() * n
        if (m & MASK) < n:
            threshold = ((1 << 64) - n) % n
            while (m & MASK) < threshold:
                m = self.next_u64() * n
        return m >> 64


def uniform_at(seed, keys, index):
    """UniformAt(seed, key, index) for an array of keys (uint64)."""
    return _uniform_at_base(hash_combine(np.uint64(seed), np.asarray(keys, np.uint64)), index)


def _uniform_at_base(base, index):
    """UniformAt from base = HashCombine(seed, key), which a row's elements share."""
    return to_unit(hash_combine(base, np.uint64(index)))


def initial_rows(seed, keys, dim, init_scale=0.0):
    """The initial embedding rows of `keys` [R] as f32 [R, dim]:
    s * (2 * UniformAt(seed, key, e) - 1) in double, rounded to float, with
    s = init_scale, or 1/sqrt(dim) as a float (embedding/row_init.h)."""
    s = float(np.float32(init_scale if init_scale > 0 else 1.0 / math.sqrt(dim)))
    base = hash_combine(np.uint64(seed), np.asarray(keys, np.uint64))
    rows = np.empty((len(base), dim), np.float32)
    for e in range(dim):
        rows[:, e] = (s * (2.0 * _uniform_at_base(base, e) - 1.0)).astype(np.float32)
    return rows


def name_hash(name):
    """ops/graph_executor.cc's NameHash: FNV-1a 64 over the name's bytes,
    from 1469598103934665603 (FNV's offset basis is 14695981039346656037;
    Ember's is one digit short, and stays so: every model's initial weights
    depend on it)."""
    return _fnv1a(name.encode(), 1469598103934665603)


def _fnv1a(data, basis):
    """FNV-1a 64 over bytes `data` from offset basis `basis`."""
    h = basis
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & MASK
    return h


def dense_init(seed, name, shape, fan_in):
    """A He-uniform parameter `name` of `shape` (row-major, [out, in] for a
    weight): element i is the i-th Uniform(-b, b), b = sqrt(6 / fan_in), of
    RandomStream(seed, NameHash(name)), rounded to float."""
    bound = math.sqrt(6.0 / fan_in)
    u = to_unit(RandomStream(seed, name_hash(name)).next_u64s(int(np.prod(shape))))
    return (-bound + (bound - -bound) * u).astype(np.float32).reshape(shape)


def hash_categorical(slot, value, slot_bits=SLOT_BITS):
    """Key of categorical `value` (str or bytes) in `slot` (io/feature_hash.cc)."""
    value_bits = 64 - slot_bits
    slot_part = slot << value_bits
    data = value.encode() if isinstance(value, str) else value
    if not data:
        return slot_part
    hashed = mix64(_fnv1a(data, 0xcbf29ce484222325)) & ((1 << value_bits) - 1)
    return slot_part | (hashed or 1)


def epoch_order(seed, epoch, n):
    """The order of epoch `epoch` (from 0) over n training examples with
    --shuffle: Fisher-Yates from the last position down, by
    RandomStream(seed, kShuffleStream + epoch) (DatasetBatchSource)."""
    stream = RandomStream(seed, SHUFFLE_STREAM + epoch)
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = stream.next_below(i + 1)
        order[i], order[j] = order[j], order[i]
    return np.array(order, np.int64)
