#!/usr/bin/env bash
# This file contains the one batched device run of the layer benchmark (bench/README.md):
# correctness (--check: every activation against the float64 CPU reference on small shapes,
# both GEMM paths; each model shape and batch against simt, poisoned output, bit-identical
# rerun), the timed sweep, the torch._grouped_mm baseline in the same run, with CEILINGS=1 the
# device's own ceilings at each point (bench/ceilings.py), the merged table, and a SASS summary
# of the GEMM kernels. Everything lands under $OUT; the table prints last.
#
#   OUT=/tmp/out SHAPES=... BATCHES=... EXTRA='--tile auto' bash bench/run_device.sh
#
# PACK=NAME: at the end, everything but merged.md goes into $OUT/NAME.tar.gz (a device call
# returns at most 8 files, and one run writes 7, or 9 with CEILINGS=1).
set -u
OUT=${OUT:-/tmp/moejit-bench-out}
mkdir -p "$OUT" /tmp/mj-cubins
export MOEJIT_CACHE_DIR=/tmp/mj-cache PYTHONUNBUFFERED=1
SHAPES=${SHAPES:-mixtral-8x7b,qwen3-30b-a3b,qwen3-235b-a22b,deepseek-v3,nemotron}
BATCHES=${BATCHES:-1,8,64,512,4096}
EXTRA=${EXTRA:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv > "$OUT/bench.log" 2>&1
BENCH="build/bin/moejit bench layer"
# The bench compiles its layers one after another (about 8 s each; the float64 cases alone
# are ~50 small layers per backend); warm compiles them all into the cache first on every core.
mapfile -t SPECS < <($BENCH --check --shapes "$SHAPES" $EXTRA --list-specs)
echo "== moejit warm: ${#SPECS[@]} layers ($(date -u +%FT%TZ))" >> "$OUT/bench.log"
timeout "${T_WARM:-300}" build/bin/moejit warm -j "$(nproc)" "${SPECS[@]}" >> "$OUT/bench.log" 2>&1
echo "warm exit: $?" >> "$OUT/bench.log"
echo "== moejit bench layer --check ($(date -u +%FT%TZ))" >> "$OUT/bench.log"
timeout "${T_BENCH:-240}" $BENCH --check --shapes "$SHAPES" --batches "$BATCHES" \
  --reps "${REPS:-10}" --json "$OUT/moejit.json" --cubin-dir /tmp/mj-cubins $EXTRA >> "$OUT/bench.log" 2>&1
echo "moejit-bench exit: $?" >> "$OUT/bench.log"
echo "== torch baseline ($(date -u +%FT%TZ))" > "$OUT/torch.log"
timeout "${T_TORCH:-150}" python3 bench/torch_baseline.py --shapes "$SHAPES" --batches "$BATCHES" \
  --json "$OUT/torch.json" >> "$OUT/torch.log" 2>&1
echo "torch exit: $?" >> "$OUT/torch.log"
CEIL=()
if [ -n "${CEILINGS:-}" ]; then
  echo "== ceilings ($(date -u +%FT%TZ))" > "$OUT/ceilings.log"
  timeout "${T_CEIL:-150}" python3 bench/ceilings.py --shapes "$SHAPES" --batches "$BATCHES" \
    --json "$OUT/ceilings.json" >> "$OUT/ceilings.log" 2>&1
  echo "ceilings exit: $?" >> "$OUT/ceilings.log"
  CEIL=(--ceilings "$OUT/ceilings.json")
fi
python3 bench/merge.py "$OUT/moejit.json" "$OUT/torch.json" "${CEIL[@]}" > "$OUT/merged.md" 2>&1
: > "$OUT/sass.txt"
for c in /tmp/mj-cubins/*.cubin; do
  [ -f "$c" ] || continue
  cuobjdump --dump-sass "$c" > /tmp/mj.sass 2>&1
  for f in mj_gemm1_act mj_gemm2 mj_gemm1_act_small mj_gemm1_act_small_routed mj_gemm2_small mj_gemm2_finalize_t1 mj_gemm2_finalize_t1_shallow mj_decode_persistent mj_decode_persistent_shallow mj_gemm1_act_tall mj_gemm2_tall mj_gemm1_act_pair mj_gemm2_pair; do
    awk -v f="Function : $f\$" '$0 ~ f {p=1; next} /Function :/ {p=0} p' /tmp/mj.sass > /tmp/mj.fn
    [ -s /tmp/mj.fn ] || continue # the tall and pair GEMMs are wgmma's only
    printf '%s %-26s SASS lines %5d HMMA %3d HGMMA %3d LDSM %3d LDGSTS.128 %3d BAR %2d LDL/STL %d\n' \
      "$(basename "$c" .cubin)" "$f" "$(wc -l < /tmp/mj.fn)" "$(grep -c ' HMMA' /tmp/mj.fn)" "$(grep -c HGMMA /tmp/mj.fn)" \
      "$(grep -c LDSM /tmp/mj.fn)" "$(grep -c 'LDGSTS.E.BYPASS.128' /tmp/mj.fn)" \
      "$(grep -c 'BAR.SYNC' /tmp/mj.fn)" "$(grep -cE 'LDL|STL' /tmp/mj.fn)" >> "$OUT/sass.txt"
  done
done
grep -E "^(reference|check).*FAIL|FAILED|error|moejit:" "$OUT/bench.log" | head -20
grep -E "reference checks|checks:" "$OUT/bench.log"
cat "$OUT/sass.txt" | head -8
cat "$OUT/merged.md"
if [ -n "${PACK:-}" ]; then
  (cd "$OUT" && files=$(ls | grep -vxE "merged\.md|$PACK\.tar\.gz") &&
    tar -czf "$PACK.tar.gz" $files && rm -f $files)
fi
