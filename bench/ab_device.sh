#!/usr/bin/env bash
# This file contains the A/B method of docs/PERFORMANCE.md as one script: whole-layer times of
# two or more builds, every (build, shape, batch) in its own process (a shape timed after
# another in one process can run in another clock/power mode), builds in mirrored order per
# round (A B C C B A ...), then the mean of each build and its difference from the first.
#
#   BUILDS="base:.devbuild-base new:.devbuild-new" POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:16384" \
#   OUT=$OUT ROUNDS=2 BACKEND=wgmma bash bench/ab_device.sh
#
# A build is NAME:DIR with DIR/bin/moejit (what `make all bundle` leaves in build/: carry it in
# an ignored folder). Each build first compiles its layers on every core (`moejit warm` of
# `bench layer --list-specs`), into its own cache, so no timed process compiles. Writes
# $OUT/ab.log (one line per process: shape batch build µs) and $OUT/ab.md (the summary).
set -u
OUT=${OUT:-/tmp/moejit-ab}
ROUNDS=${ROUNDS:-2}
BACKEND=${BACKEND:-wgmma}
REPS=${REPS:-5}
: "${BUILDS:?BUILDS=\"name:dir name:dir ...\" is required}"
: "${POINTS:?POINTS=\"shape:batch ...\" is required}"
mkdir -p "$OUT"
LOG=$OUT/ab.log
: > "$LOG"
names=()
declare -A dirs
for b in $BUILDS; do
  name=${b%%:*} dir=${b#*:}
  if [ ! -x "$dir/bin/moejit" ]; then
    echo "ab_device.sh: BUILDS: $dir/bin/moejit is missing (name:dir, dir as make leaves build/)" >&2
    exit 2
  fi
  names+=("$name")
  dirs[$name]=$dir
done
shapes=$(for p in $POINTS; do echo "${p%%:*}"; done | sort -u | paste -sd,)
for name in "${names[@]}"; do
  dir=${dirs[$name]}
  mapfile -t specs < <("$dir/bin/moejit" bench layer --backend "$BACKEND" --shapes "$shapes" --list-specs)
  MOEJIT_CACHE_DIR=/tmp/mj-ab-cache-$name "$dir/bin/moejit" warm -j "$(nproc)" "${specs[@]}" \
    > "$OUT/warm-$name.log" 2>&1 || echo "ab_device.sh: warm of $name failed (see warm-$name.log)" >&2
done
order=("${names[@]}")
for ((i = ${#names[@]} - 1; i >= 0; i--)); do order+=("${names[i]}"); done
for p in $POINTS; do
  shape=${p%%:*} batch=${p#*:}
  for ((r = 0; r < ROUNDS; r++)); do
    for name in "${order[@]}"; do
      us=$(MOEJIT_CACHE_DIR=/tmp/mj-ab-cache-$name timeout 120 "${dirs[$name]}/bin/moejit" bench layer --backend "$BACKEND" \
        --shapes "$shape" --batches "$batch" --reps "$REPS" 2>&1 | awk '$1 == "time" {print $7}')
      echo "$shape $batch $name ${us:-FAILED}" >> "$LOG"
    done
  done
done
python3 - "$LOG" "${names[@]}" > "$OUT/ab.md" <<'PY'
import collections, sys
log, names = sys.argv[1], sys.argv[2:]
t = collections.OrderedDict()
for line in open(log):
    shape, batch, name, us = line.split()
    if us != "FAILED":
        t.setdefault((shape, batch), {}).setdefault(name, []).append(float(us))
print("| shape | B | " + " | ".join(names) + " |")
print("|---|---:|" + "---:|" * len(names))
for (shape, batch), m in t.items():
    base = m.get(names[0])
    cells = []
    for n in names:
        v = m.get(n)
        if not v:
            cells.append("failed")
            continue
        mean = sum(v) / len(v)
        rel = f" ({100 * (mean / (sum(base) / len(base)) - 1):+.1f} %)" if base and n != names[0] else ""
        cells.append(f"{mean:.1f}{rel}")
    print(f"| {shape} | {batch} | " + " | ".join(cells) + " |")
PY
cat "$OUT/ab.md"
grep -c FAILED "$LOG" | awk '$1 > 0 {print "ab_device.sh: " $1 " runs failed (see ab.log)"}'
