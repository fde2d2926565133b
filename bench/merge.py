#!/usr/bin/env python3
"""This file contains the join of `moejit bench layer --json` rows with bench/torch_baseline.py
rows by (shape, batch): one Markdown table with moejit's time, the experts its input sets route
to (and E_act under uniform routing), TB/s, TFLOP/s, fraction of the floor, the mean SM clock
and board power over moejit's timed replays ("-" where the bench had no NVML), the torch time
and the speedup (torch µs / moejit µs), optionally appended to a file (docs/PERFORMANCE.md)
under a heading with date, commit and device. With --ceilings (bench/ceilings.py's rows) it adds
the device's own ceiling at each point, the one of the resource that sets the row's floor: where
its weight bytes do, the TB/s of a kernel that only reads the same experts' weights and moejit's
TB/s as a fraction of it; where its FLOPs do, the TFLOP/s of the layer's two GEMMs as dense
torch.mm calls and moejit's TFLOP/s as a fraction of that.

Usage: python3 bench/merge.py MOEJIT.json TORCH.json [--ceilings CEIL.json] [--append FILE] [--commit SHA]
"""
import argparse
import datetime
import json

from sweep import weight_bound


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def ceiling_cells(r, c):
    """The four ceiling columns of moejit row r against ceilings row c (None: all "-"): the
    read-only ceiling where the row's floor is its weight bytes, the dense one where it is its
    FLOPs (a fraction of the other would measure the wrong resource)."""
    cells = ["-"] * 4
    by_bytes = weight_bound(r["tbps"], r["tflops"])  # both per µs of the same row: the ratio holds
    if c and by_bytes and "read_tbps" in c:
        cells[:2] = [f'{c["read_tbps"]:.2f}', f'{100 * r["tbps"] / c["read_tbps"]:.1f}%']
    elif c and not by_bytes and "dense_tflops" in c:
        cells[2:] = [f'{c["dense_tflops"]:.1f}', f'{100 * r["tflops"] / c["dense_tflops"]:.1f}%']
    return " | ".join(cells) + " |"


def table(moejit, torch_rows, ceilings=None):
    base = {(r["shape"], r["batch"]): r for r in torch_rows}
    ceil = {(r["shape"], r["batch"]): r for r in ceilings or []}
    out = ["| shape | B | backend | path | µs | experts read (uniform) | TB/s (weights) | TFLOP/s | floor µs | of floor "
           "| SM MHz, W | torch µs | speedup | check |",
           "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    if ceilings is not None:
        out[0] += " read-only TB/s | of read-only | dense TFLOP/s | of dense |"
        out[1] += "---:|---:|---:|---:|"
    for r in moejit:
        t = base.get((r["shape"], r["batch"]))
        tus = f'{t["us"]:.1f}' if t else "-"
        sp = f'{t["us"] / r["us"]:.2f}×' if t else "-"
        clk = f'{r["sm_mhz"]:.0f}, {r["power_w"]:.0f}' if r.get("clock_samples") else "-"
        # rows of benches before e_read counted the uniform E_act as read
        read = r.get("e_read", r["e_act"])
        out.append(f'| {r["shape"]} | {r["batch"]} | {r["backend"]} | {r["path"]} | {r["us"]:.1f} | '
                   f'{read:.2f} ({r["e_act"]:.2f}) | {r["tbps"]:.2f} | {r["tflops"]:.1f} | {r["floor_us"]:.1f} | {100 * r["frac_floor"]:.1f}% | '
                   f'{clk} | {tus} | {sp} | {r["check"]} |')
        if ceilings is not None:
            out[-1] += " " + ceiling_cells(r, ceil.get((r["shape"], r["batch"])))
    if ceilings is not None:
        peak = [c for c in ceilings if c["shape"] == "dense-8192"]
        if peak:
            out.append(f'\n(dense 8192³ bf16 torch.mm in the same run: {peak[0]["dense_tflops"]:.1f} TFLOP/s)')
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("moejit")
    p.add_argument("torch")
    p.add_argument("--ceilings", default=None)
    p.add_argument("--append", default=None)
    p.add_argument("--commit", default="(not given)")
    a = p.parse_args()
    m, t = load(a.moejit), load(a.torch)
    text = table(m, t, load(a.ceilings) if a.ceilings else None)
    print(text)
    if a.append:
        dev = m[0]["device"] if m else "?"
        tv = t[0].get("torch", "?") if t else "?"
        with open(a.append, "a") as f:
            f.write(f"\n### moejit vs torch._grouped_mm, {datetime.date.today()}, commit {a.commit}, {dev}\n\n")
            f.write("Method: whole layer by CUDA-graph replay, median, rotating input sets (8 below B=1024, "
                    f"else 4), bf16, renormalize routing on seeded uniform logits; torch {tv} baseline = "
                    "top-k/softmax, argsort, gather, torch._grouped_mm ×2, activation, weighted index_add_, "
                    "graph-captured; floor = max(W / 4.48 TB/s, F / 790 TFLOP/s), W on the experts the input "
                    "sets route to (their mean; E_act under uniform routing in brackets).\n\n")
            f.write(text)


if __name__ == "__main__":
    main()
