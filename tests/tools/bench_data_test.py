#!/usr/bin/python3
"""The benchmark suite's data and its baseline's start (tools/bench):
bench_data.rotate_fold (the folds of the cross-validation), the rows' keys of
the prepared arrays, and ember_random.py, which reproduces Ember's draws for
torch_ctr.py --start=ember. Run by CTest with Debian's python3 and numpy."""
import os
import sys
import tempfile
import unittest

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "bench"))
import bench_data  # noqa: E402
import ember_random  # noqa: E402


def write_dataset(folder, n):
    """n examples with a label, two single-valued slots and a bag of 0-3
    values, as a TSV and its arrays; example i is recognisable by slot 'a'."""
    rows = [[str(i % 3 // 2), "e%d" % i, "v%d" % (i % 4), "|".join("g%d" % (i + j) for j in
                                                                    range(i % 4))]
            for i in range(n)]
    tsv, npz = os.path.join(folder, "d.tsv"), os.path.join(folder, "d.npz")
    with open(tsv, "w") as f:
        for r in rows:
            f.write("\t".join(r) + "\n")
    bench_data.save_npz(npz, **bench_data._csv_arrays(rows, True, 0.2))
    return tsv, npz


def examples(tsv, npz):
    """Per example, in order: (its TSV line, label, slot-'a' row, bag rows)."""
    with open(tsv) as f:
        lines = f.read().splitlines()
    with np.load(npz) as d:
        ends = np.append(d["bag_offsets"], len(d["bag_ids"]))
        out = [(lines[i], float(d["labels"][i]), int(d["ids"][i][0]),
                tuple(d["bag_ids"][ends[i]:ends[i + 1]])) for i in range(len(d["labels"]))]
        return out, int(d["n_train"])


class KeysTest(unittest.TestCase):
    def test_each_row_holds_the_key_ember_gives_its_value(self):
        with tempfile.TemporaryDirectory() as folder:
            tsv, npz = write_dataset(folder, 12)
            with np.load(npz) as d:
                keys, ids = d["keys"], d["ids"]
                bag_ids, bag_offsets = d["bag_ids"], d["bag_offsets"]
                self.assertEqual(len(keys), int(d["table_rows"]))
            with open(tsv) as f:
                lines = [line.rstrip("\n").split("\t") for line in f]
            for i, fields in enumerate(lines):
                for slot in (0, 1):  # the TSV's columns 1-2 are slots 0-1
                    self.assertEqual(int(keys[ids[i][slot]]),
                                     ember_random.hash_categorical(slot, fields[1 + slot]))
                end = bag_offsets[i + 1] if i + 1 < len(lines) else len(bag_ids)
                self.assertEqual([int(k) for k in keys[bag_ids[bag_offsets[i]:end]]],
                                 [ember_random.hash_categorical(2, v)
                                  for v in fields[3].split("|") if v])
            # A fold keeps the table, keys included.
            out = os.path.join(folder, "f")
            bench_data.rotate_fold(tsv, npz, 1, 3, out + ".tsv", out + ".npz")
            with np.load(out + ".npz") as d:
                np.testing.assert_array_equal(d["keys"], keys)


class EmberRandomTest(unittest.TestCase):
    """The values Ember's own tests pin, reproduced: a change on either side
    fails one of the two."""

    def test_random_stream_and_next_below(self):  # tests/core/random_test.cc
        stream = ember_random.RandomStream(1, 0)
        want = [0x8d7aecaf722fc711, 0x14dadd092c596b88, 0x91af90fb696eaec2]
        self.assertEqual([stream.next_u64() for _ in range(3)], want)
        self.assertEqual([int(x) for x in ember_random.RandomStream(1, 0).next_u64s(3)], want)
        stream = ember_random.RandomStream(3, 9)
        self.assertEqual([stream.next_below(n) for n in (1, 2, 3, 10, (1 << 40) + 7,
                                                         (1 << 63) + 5)],
                         [0, 0, 2, 4, 351903317958, 7856676843066978251])
        self.assertEqual(float(ember_random.uniform_at(42, [123456789], 5)[0]),
                         float.fromhex("0x1.294d45c694e84p-3"))

    def test_keys(self):  # tests/io/feature_hash_test.cc
        h = ember_random.hash_categorical
        self.assertEqual(h(0, "68fd1e64"), 0x001d08d4bf3cda49)
        self.assertEqual(h(25, "9727dd16"), 0x0668d33fceda44c1)
        self.assertEqual(h(7, "a"), 0x01e9c2aadd9b8527)
        self.assertEqual(h(3, "68fd1e64", 20), 0x000038d4bf3cda49)
        self.assertEqual(h(3, ""), 3 << 54)  # the missing value

    def test_epoch_order(self):  # tests/io/batch_source_test.cc
        self.assertEqual(ember_random.epoch_order(1, 0, 10).tolist(),
                         [6, 4, 3, 1, 7, 0, 5, 8, 2, 9])
        self.assertEqual(ember_random.epoch_order(7, 1, 10).tolist(),
                         [7, 3, 0, 8, 9, 1, 6, 4, 5, 2])

    def test_initial_weights(self):  # graph_executor_test.cc, row_init_test.cc
        f32 = lambda values: np.array(values, np.float32)  # noqa: E731
        np.testing.assert_array_equal(
            ember_random.dense_init(1, "top.0.weight", (2, 3), 3),
            f32([[0.531345963, -1.04143274, 1.13220489], [-0.571366429, -0.878497005, 1.31195569]]))
        np.testing.assert_array_equal(
            ember_random.initial_rows(1, [123456789], 4),
            f32([[-0.00440706965, 0.339627832, 0.0832804963, -0.466210991]]))


class RotateFoldTest(unittest.TestCase):
    def folds_of(self, n, folds):
        with tempfile.TemporaryDirectory() as folder:
            tsv, npz = write_dataset(folder, n)
            base, _ = examples(tsv, npz)
            out = []
            for k in range(folds):
                stem = os.path.join(folder, "f%d" % k)
                bench_data.rotate_fold(tsv, npz, k, folds, stem + ".tsv", stem + ".npz")
                out.append(examples(stem + ".tsv", stem + ".npz"))
            return base, out

    def test_every_example_is_held_out_once_and_lines_match_arrays(self):
        base, folds = self.folds_of(25, 5)
        held_out = []
        for k, (rotated, n_train) in enumerate(folds):
            self.assertEqual(n_train, 20)
            # The same examples, rotated; each line still beside its arrays.
            self.assertEqual(sorted(rotated), sorted(base))
            tail = rotated[n_train:]
            self.assertEqual(tail, base[5 * k:5 * k + 5])
            for line, label, _, _ in rotated:
                self.assertEqual(float(line.split("\t")[0]), label)
            held_out += tail
        self.assertEqual(sorted(held_out), sorted(base))
        self.assertEqual(folds[-1][0], base)  # the last fold is the usual split

    def test_bags_follow_their_examples(self):
        base, folds = self.folds_of(25, 5)
        by_line = {e[0]: e for e in base}
        for rotated, _ in folds:
            for e in rotated:
                self.assertEqual(e, by_line[e[0]])

    def test_a_count_not_a_multiple_of_the_folds_still_tests_every_example(self):
        base, folds = self.folds_of(23, 5)  # h = 5: the last two folds overlap
        held_out = set()
        for rotated, n_train in folds:
            self.assertEqual(n_train, 18)
            held_out.update(rotated[n_train:])
        self.assertEqual(held_out, set(base))
        self.assertEqual(folds[-1][0], base)

    def test_bad_folds_and_mismatched_files_are_refused(self):
        with tempfile.TemporaryDirectory() as folder:
            tsv, npz = write_dataset(folder, 10)
            out = os.path.join(folder, "o")
            with self.assertRaisesRegex(ValueError, "fold 5 of 5"):
                bench_data.rotate_fold(tsv, npz, 5, 5, out + ".tsv", out + ".npz")
            with self.assertRaisesRegex(ValueError, "cannot be split into 30 folds"):
                bench_data.rotate_fold(tsv, npz, 0, 30, out + ".tsv", out + ".npz")
            with open(tsv, "a") as f:
                f.write("1\textra\tv\t\n")
            with self.assertRaisesRegex(ValueError, "11 lines but 10 examples"):
                bench_data.rotate_fold(tsv, npz, 0, 5, out + ".tsv", out + ".npz")


if __name__ == "__main__":
    unittest.main()
