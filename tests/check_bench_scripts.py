#!/usr/bin/env python3
"""This file contains the CPU test of the bench scripts' parts that need no GPU: bench/merge.py, the
join that turns the device's JSON rows (moejit bench, the torch baseline, bench/ceilings.py)
into docs/PERFORMANCE.md's tables (the columns and their arithmetic, "-" where a source has no
row, the table without --ceilings unchanged), bench/sweep.py, the command line and JSON
output the device scripts share, and bench/w4_weights.py, the torch baseline's dequantization of
the 4-bit shapes (torch on the CPU; make test runs this file in the build's Python environment,
which has it). Those scripts' timing needs torch and a GPU."""
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

try:
    import torch
    import w4_weights
except ImportError:  # the merge and sweep tests need neither
    torch = None

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

    def test_4bit_shapes(self):
        names = sweep.parse_args("t", ["--shapes", "gpt-oss-120b-mxfp4,qwen3-30b-a3b-w4a16"])[0]
        self.assertEqual([sweep.weight_format(n) for n in names], ["mxfp4", "w4a16"])
        self.assertEqual(sweep.weight_format("qwen3-30b-a3b"), "bf16")
        self.assertEqual(sweep.SHAPES["gpt-oss-120b-mxfp4"][:4], (2880, 2880, 128, 4))
        self.assertEqual(sweep.WEIGHT_BYTES["mxfp4"], 0.53125)  # a nibble and 1/32 of a scale byte
        self.assertEqual(sweep.WEIGHT_BYTES["w4a16"], 0.515625)  # a nibble and 2/128 bytes of scale

    def test_json_lines_round_trip(self):
        rows = [{"shape": "nemotron", "batch": 1, "read_tbps": 4.15}, {"shape": "dense-8192", "batch": 0}]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            sweep.write_json(path, rows)
            self.assertEqual(merge.load(path), rows)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


@unittest.skipIf(torch is None, "no torch in this Python: run by make test in the build's environment")
class W4WeightsTest(unittest.TestCase):
    def test_mxfp4_every_byte_and_scale_edges(self):
        packed = torch.arange(256, dtype=torch.uint8).view(1, 2, 128)
        scales = torch.tensor([[[127, 0, 128, 120, 2, 64, 90, 127], [1, 126, 100, 127, 128, 7, 110, 125]]],
                              dtype=torch.uint8)  # 256 k a row: 8 groups
        got = w4_weights.dequant("mxfp4", packed, scales).double()
        lut = torch.tensor(E2M1, dtype=torch.float64)
        want = lut[w4_weights.nibbles(packed).long()] * torch.pow(2.0, scales.double() - 127).repeat_interleave(32, -1)
        self.assertTrue(torch.equal(got, want))  # exact: e2m1 times a power of two
        # bytes 0x00 then 0x01: k 0..3 are nibbles 0, 0, 1, 0 (the even k in the low nibble)
        self.assertEqual(got[0, 0, :4].tolist(), [0.0, 0.0, 0.5, 0.0])

    def test_w4a16_rounded_once(self):
        torch.manual_seed(3)
        packed, scales = w4_weights.make("w4a16", 2, 4, 256, "cpu")
        got = w4_weights.dequant("w4a16", packed, scales)
        exact = (w4_weights.nibbles(packed).double() - 8) * scales.double().repeat_interleave(128, -1)
        self.assertTrue(torch.equal(got, exact.to(torch.bfloat16)))
        self.assertEqual(w4_weights.nibbles(torch.tensor([0x4A], dtype=torch.uint8)).tolist(), [10, 4])

    def test_made_weights_near_one_over_sqrt_k(self):
        torch.manual_seed(4)
        for fmt in ("mxfp4", "w4a16"):
            packed, scales = w4_weights.make(fmt, 2, 64, 2048, "cpu")
            rms = w4_weights.dequant(fmt, packed, scales).double().pow(2).mean().sqrt().item()
            self.assertTrue(0.5 / 2048 ** 0.5 < rms < 2.0 / 2048 ** 0.5, f"{fmt}: rms {rms}")


if __name__ == "__main__":
    unittest.main()
