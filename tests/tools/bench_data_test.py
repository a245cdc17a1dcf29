#!/usr/bin/python3
"""bench_data.rotate_fold: the folds of the benchmark suite's cross-validation
(tools/bench/bench_data.py). Run by CTest with Debian's python3 and numpy."""
import os
import sys
import tempfile
import unittest

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "bench"))
import bench_data  # noqa: E402


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
