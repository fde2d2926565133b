#!/usr/bin/env bash
# This file contains the per-kernel breakdown of a layer's forward on a device: each kernel's
# duration, grid, block and active warps, profiled by ncu at the device's own clocks
# (--clock-control none) and one kernel at a time, so the sum exceeds the layer's time by the
# overlap that programmatic launches give. It answers where a point's time goes (a batch-1
# layer: its GEMM1, GEMM2, finalize, routing) before a kernel is changed for it.
#
#   POINTS="gpt-oss-120b-mxfp4:1 qwen3-30b-a3b-w4a16:16" OUT=$OUT BUILD=.device/cur bash bench/kernel_times.sh
#
# BUILD is a build folder as `make all bundle` leaves build/ (carried in an ignored folder).
# Writes $OUT/kernels-SHAPE-B.txt (ncu's report) per point and prints the table.
set -u
OUT=${OUT:-/tmp/moejit-kernels}
B=$(cd "${BUILD:-build}" && pwd)
BACKEND=${BACKEND:-wgmma}
: "${POINTS:?POINTS=\"shape:batch ...\" is required}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-} MOEJIT_COMPILE_WORKER=$B/libexec/moejit-compile-worker
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/mj-kernels-cache}
command -v ncu > /dev/null || { echo "kernel_times.sh: ncu is not on PATH" >&2; exit 2; }
shapes=$(for p in $POINTS; do echo "${p%%:*}"; done | sort -u | paste -sd, -)
# compile first, on every core, so that no profiled process compiles
"$B/bin/moejit" warm -j "$(nproc)" $("$B/bin/moejit" bench layer --shapes "$shapes" --backend "$BACKEND" --list-specs) \
  > "$OUT/warm.log" 2>&1
for p in $POINTS; do
  shape=${p%%:*} batch=${p#*:}
  report=$OUT/kernels-$shape-$batch.txt
  # the layer's kernels only (not the bench's fills), one forward's worth after the warm-ups
  timeout "${T_POINT:-120}" ncu --clock-control none -k 'regex:^mj_(gemm|decode|finalize|route|expert|scatter)' \
    --launch-skip "${SKIP:-8}" --launch-count "${COUNT:-8}" \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active \
    "$B/bin/moejit" bench layer --shapes "$shape" --batches "$batch" --backend "$BACKEND" --reps 3 --rotate 1 \
    > "$report" 2>&1
  echo "== $shape B=$batch ($BACKEND; ncu exit $?)"
  # ncu prints each kernel's metrics in name order: duration, block, grid, then active warps
  awk '/^  mj_/ {n = $1}
       /gpu__time_duration/ {d = $NF; u = $(NF - 1)}
       /launch__block_size/ {bs = $NF}
       /launch__grid_size/ {g = $NF}
       /warps_active/ {printf "  %-30s grid %7s block %4s %10s %-8s active warps %s %%\n", n, g, bs, d, u, $NF}' "$report"
done
