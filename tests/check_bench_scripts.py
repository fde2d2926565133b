#!/usr/bin/env python3
"""This file contains the CPU test of the bench scripts' parts that need no GPU: bench/merge.py, the
join that turns the device's JSON rows (moejit bench, the torch baseline, bench/ceilings.py)
into docs/PERFORMANCE.md's tables (the columns and their arithmetic, "-" where a source has no
row, the table without --ceilings unchanged), and bench/sweep.py, the command line and JSON
output the device scripts share. Those scripts' timing needs torch and a GPU."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
sys.path.insert(0, BENCH)
import merge  # noqa: E402
import sweep  # noqa: E402

DECODE = {"shape": "qwen3-30b-a3b", "batch": 1, "backend": "wgmma", "path": "small/t1", "us": 25.6, "e_read": 8.0,
          "e_act": 8.0, "tbps": 2.94, "tflops": 2.9, "floor_us": 16.9, "frac_floor": 0.66, "check": "ok",
          "device": "NVIDIA H200", "sm_mhz": 1965.0, "power_w": 350.0, "clock_samples": 12}
PREFILL = dict(DECODE, batch=4096, path="pair", us=681.8, e_read=128.0, e_act=128.0, tbps=1.77, tflops=453.6,
               floor_us=391.4, frac_floor=0.574, clock_samples=0)
TORCH = [{"source": "torch", "shape": "qwen3-30b-a3b", "batch": 1, "us": 103.4}]
CEIL = [{"source": "ceiling", "shape": "dense-8192", "batch": 0, "dense_us": 1480.6, "dense_tflops": 742.6},
        {"source": "ceiling", "shape": "qwen3-30b-a3b", "batch": 1, "read_us": 19.5, "read_experts": 8,
         "read_tbps": 3.868},
        {"source": "ceiling", "shape": "qwen3-30b-a3b", "batch": 4096, "dense_us": 479.4, "dense_tflops": 645.0}]


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


class MergeTest(unittest.TestCase):
    def test_plain_table(self):
        lines = merge.table([DECODE, PREFILL], TORCH).splitlines()
        self.assertEqual(len(cells(lines[0])), 14)
        row = cells(lines[2])
        self.assertEqual(row[:5], ["qwen3-30b-a3b", "1", "wgmma", "small/t1", "25.6"])
        self.assertEqual(row[10], "1965, 350")  # SM clock and power where NVML sampled
        self.assertEqual(row[11:13], ["103.4", "4.04×"])  # 103.4 / 25.6
        row = cells(lines[3])
        self.assertEqual(row[10], "-")  # no clock samples
        self.assertEqual(row[11:13], ["-", "-"])  # no torch row for this point
        self.assertNotIn("read-only", lines[0])

    def test_ceiling_columns(self):
        text = merge.table([DECODE, PREFILL], TORCH, CEIL)
        lines = text.splitlines()
        head = cells(lines[0])
        self.assertEqual(head[14:], ["read-only TB/s", "of read-only", "dense TFLOP/s", "of dense"])
        self.assertEqual(len(cells(lines[1])), 18)
        self.assertEqual(cells(lines[2])[14:], ["3.87", "76.0%", "-", "-"])  # 2.94 / 3.868
        self.assertEqual(cells(lines[3])[14:], ["-", "-", "645.0", "70.3%"])  # 453.6 / 645.0
        self.assertIn("742.6 TFLOP/s", text)  # the same run's dense 8192^3
        # the first 14 columns are the plain table's
        plain = merge.table([DECODE, PREFILL], TORCH).splitlines()
        for a, b in zip(plain[2:4], lines[2:4]):
            self.assertEqual(cells(a), cells(b)[:14])

    def test_only_the_binding_ceiling(self):
        # a row with both ceilings shows the one of the resource that sets its floor: a weight-bound
        # B = 1024 row (4.11 TB/s against 131.6 TFLOP/s) gets no dense fraction, and the reverse
        both = {"source": "ceiling", "shape": "qwen3-30b-a3b", "read_tbps": 4.6, "dense_tflops": 839.6}
        weight_row = dict(DECODE, batch=1024, tbps=4.11, tflops=131.6)
        flop_row = dict(PREFILL, batch=1024)
        lines = merge.table([weight_row], [], [dict(both, batch=1024)]).splitlines()
        self.assertEqual(cells(lines[2])[14:], ["4.60", "89.3%", "-", "-"])
        lines = merge.table([flop_row], [], [dict(both, batch=1024)]).splitlines()
        self.assertEqual(cells(lines[2])[14:], ["-", "-", "839.6", "54.0%"])

    def test_point_without_ceiling_row(self):
        lines = merge.table([DECODE], TORCH, CEIL[:1]).splitlines()
        self.assertEqual(cells(lines[2])[14:], ["-", "-", "-", "-"])

    def test_cli_with_ceilings(self):
        with tempfile.TemporaryDirectory() as d:
            paths = {}
            for name, rows in (("m", [DECODE, PREFILL]), ("t", TORCH), ("c", CEIL)):
                paths[name] = os.path.join(d, name + ".json")
                with open(paths[name], "w") as f:
                    f.write("noise before the rows\n")  # logs carry other lines: only {...} lines count
                    for r in rows:
                        f.write(json.dumps(r) + "\n")
            out = subprocess.run([sys.executable, os.path.join(BENCH, "merge.py"), paths["m"], paths["t"],
                                  "--ceilings", paths["c"]], capture_output=True, text=True, check=True).stdout
            self.assertIn("| 3.87 | 76.0% | - | - |", out)
            self.assertIn("| - | - | 645.0 | 70.3% |", out)


class SweepArgsTest(unittest.TestCase):
    def test_defaults_and_lists(self):
        names, batches, rotate, path = sweep.parse_args("t", [])
        self.assertEqual(names, sweep.DEFAULT_SHAPES.split(","))
        self.assertEqual(batches, [1, 8, 64, 512, 4096])
        self.assertEqual((rotate, path), (0, None))
        names, batches, rotate, path = sweep.parse_args(
            "t", ["--shapes", "nemotron,qwen3-30b-a3b", "--batches", "2,16384", "--rotate", "3", "--json", "x.json"])
        self.assertEqual(names, ["nemotron", "qwen3-30b-a3b"])
        self.assertEqual((batches, rotate, path), ([2, 16384], 3, "x.json"))
        self.assertEqual(sweep.parse_args("t", ["--shapes", "all"])[0], list(sweep.SHAPES))

    def rejected(self, argv, *words):
        """argv is refused with exit status 2 and a message naming the field and what it allows."""
        with tempfile.TemporaryFile("w+") as err:
            saved, sys.stderr = sys.stderr, err
            try:
                with self.assertRaises(SystemExit) as e:
                    sweep.parse_args("t", argv)
            finally:
                sys.stderr = saved
            err.seek(0)
            text = err.read()
        self.assertEqual(e.exception.code, 2)
        for w in words:
            self.assertIn(w, text)

    def test_bad_values_name_the_field(self):
        self.rejected(["--shapes", "llama"], "--shapes", "'llama'", "mixtral-8x7b", "all")
        self.rejected(["--batches", "1,x"], "--batches", "'1,x'")
        self.rejected(["--batches", "0,4"], "--batches", "at least 1")
        self.rejected(["--rotate", "-1"], "--rotate")

    def test_which_floor_binds(self):
        # Qwen3-30B-A3B, all 128 experts read: 1.21 GB of weights; F = 2·B·8·2304·2048
        w, f = 128 * 3 * 2048 * 768 * 2, lambda b: 2.0 * b * 8 * 2304 * 2048
        self.assertTrue(sweep.weight_bound(w, f(512)))  # 270 µs of bytes against 49 of FLOPs
        self.assertFalse(sweep.weight_bound(w, f(4096)))  # against 391 µs of FLOPs

    def test_json_lines_round_trip(self):
        rows = [{"shape": "nemotron", "batch": 1, "read_tbps": 4.15}, {"shape": "dense-8192", "batch": 0}]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            sweep.write_json(path, rows)
            self.assertEqual(merge.load(path), rows)


if __name__ == "__main__":
    unittest.main()
