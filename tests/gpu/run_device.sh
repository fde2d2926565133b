#!/usr/bin/env bash
# This file contains the GPU validation of one build in one device call: the GPU suite (simt
# against the float64 reference), the tensor-core backends against the float64 reference and
# against simt (`bench layer --check`, every routing method, unvalidated tuples allowed so that
# they can earn their mark), the Python package's GPU tests, and the cold-start times of each
# backend on the host's cores. Logs land under $OUT; a summary prints last.
#
#   OUT=/tmp/out BUILD=.device/new bash tests/gpu/run_device.sh
#
# BUILD is a build folder as `make all bundle` leaves build/ (bin, lib with libcjson beside
# libmoejit, libexec, tests/gpu_suite). PARTS picks the parts (default: suite tc w4 python jit;
# `extras`, the W1 layouts, biases and overrides of the tensor-core backends, and `tcsuite`, the
# GPU suite on the tensor-core backends, only when named).
set -u
OUT=${OUT:-/tmp/moejit-gpu-out}
B=$(cd "${BUILD:-build}" && pwd)
PARTS=${PARTS:-suite tc w4 python jit}
mkdir -p "$OUT"
export MOEJIT_CACHE_DIR=${MOEJIT_CACHE_DIR:-/tmp/mj-validate-cache} MOEJIT_COMPILE_WORKER=$B/libexec/moejit-compile-worker
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
CLI=$B/bin/moejit
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv > "$OUT/device.txt" 2>&1
"$CLI" --version >> "$OUT/device.txt" 2>&1

note() { echo "$*" | tee -a "$SUMMARY"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# Warms the layers `bench layer ARGS` compiles on every core (the bench would compile them one
# after another: the float64 cases alone are ~100 small layers), logging to $OUT/LOG.
warm_layers() {
  local what=$1 log=$2 specs t0
  shift 2
  mapfile -t specs < <(MOEJIT_ALLOW_UNVALIDATED=1 "$CLI" bench layer "$@" --list-specs)
  t0=$(date +%s)
  MOEJIT_ALLOW_UNVALIDATED=1 timeout "${T_WARM:-240}" "$CLI" warm -j "$(nproc)" "${specs[@]}" > "$OUT/$log" 2>&1
  note "$what: exit $? (${#specs[@]} layers, $(($(date +%s) - t0)) s)"
}

# Runs `bench layer ARGS` (checks) into $OUT/LOG and notes its counts; the summary repeats the
# log's lines that match PATTERN.
check_layers() {
  local what=$1 log=$2 pattern=$3 t0 rc
  shift 3
  t0=$(date +%s)
  MOEJIT_ALLOW_UNVALIDATED=1 timeout "${T_TC:-300}" "$CLI" bench layer "$@" > "$OUT/$log" 2>&1
  rc=$?
  note "$what: exit $rc ($(($(date +%s) - t0)) s): $(grep -cE ' ok$' "$OUT/$log") ok," \
    "$(grep -cE 'FAIL' "$OUT/$log") failed; $(grep -E 'checks:' "$OUT/$log" | tail -1)"
  grep -E "$pattern" "$OUT/$log" | head -20 | tee -a "$SUMMARY"
}

# The tensor-core backends' float64 cases and model shapes, warmed first (checked after the suite).
TC_ARGS=(--check --no-time --backend mma,wgmma --routing all --batches "${TC_BATCHES:-1,2,5,64,512,4096}")
has tc && warm_layers warm warm.log "${TC_ARGS[@]}"

# The W1 layouts, biases and per-expert overrides on the tensor-core backends (--extras), with
# their negative controls.
EX_ARGS=(--check --no-time --backend mma,wgmma --extras --batches "${TC_BATCHES:-1,2,5,64,512,4096}")
if has extras; then
  warm_layers "warm extras" warm-extras.log "${EX_ARGS[@]}"
  check_layers "extras checks" extras-check.log 'negative control|FAIL' "${EX_ARGS[@]}"
fi

if has suite; then
  t0=$(date +%s)
  timeout "${T_SUITE:-200}" "$B/tests/gpu_suite" > "$OUT/gpu-suite.log" 2>&1
  note "gpu suite: exit $? ($(($(date +%s) - t0)) s): $(grep -E '^[0-9]+ passed' "$OUT/gpu-suite.log" | tail -1)"
fi

# The GPU suite on the tensor-core backends (every format the backend takes, its controls, and
# a seeded fuzz over formats, routing methods, layouts, biases, overrides, tiles and shapes):
# TC_SUITE_BACKENDS (default wgmma mma), TC_SUITE_ARGS (default --fuzz 320).
if has tcsuite; then
  for b in ${TC_SUITE_BACKENDS:-wgmma mma}; do
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "${T_TC_SUITE:-500}" "$B/tests/gpu_suite" --backend "$b" ${TC_SUITE_ARGS:---fuzz 320} \
      > "$OUT/gpu-suite-$b.log" 2>&1
    note "gpu suite on $b: exit $? ($(($(date +%s) - t0)) s): $(grep -E '^[0-9]+ passed' "$OUT/gpu-suite-$b.log" | tail -1)"
    grep -E '^(FAIL|SKIP)' "$OUT/gpu-suite-$b.log" | head -10 | tee -a "$SUMMARY"
  done
fi

has tc && check_layers "tensor-core checks" tc-check.log 'FAIL' "${TC_ARGS[@]}"

# The 4-bit formats on the tensor-core backends: their float64 cases (every group with and
# without zero points, mxfp4, each routing method, wgmma's tall tiles) and the model shapes in
# w4a16 and mxfp4 against simt.
W4_ARGS=(--check --no-time --backend mma,wgmma --routing all --quant w4a16,mxfp4 --batches "${W4_BATCHES:-1,4,64,512,4096}")
if has w4; then
  warm_layers "warm 4-bit" warm-w4.log "${W4_ARGS[@]}"
  check_layers "4-bit checks" w4-check.log 'FAIL|skipped' "${W4_ARGS[@]}"
fi

if has python; then
  t0=$(date +%s)
  MOEJIT_LIBRARY=$B/lib/libmoejit.so.0 PYTHONPATH=$PWD/python timeout "${T_PY:-200}" \
    python3 -m pytest -q python/tests/test_gpu.py > "$OUT/python-gpu.log" 2>&1
  note "python gpu tests: exit $? ($(($(date +%s) - t0)) s): $(tail -1 "$OUT/python-gpu.log")"
fi

if has jit; then
  # Cold start on the host's own cores: every backend, the default layer (Qwen3-30B-A3B).
  for b in simt mma wgmma; do
    "$CLI" bench jit --backend "$b" --arch sm_90a --cold 2 --loads 5 --hits 10000 >> "$OUT/jit.log" 2>&1
  done
  note "bench jit: $(grep -c 'cold compile' "$OUT/jit.log") backends measured"
  grep -E 'bench jit:|cold compile|disk-cache load' "$OUT/jit.log" | sed 's/,quant=.*//' | tee -a "$SUMMARY"
fi
cat "$SUMMARY"
