#!/usr/bin/env bash
# This file contains the runner of `make test`'s suites: JOBS of them at a time (most suites
# compile kernels on one core, so a 2-core machine runs two), each one's output printed whole
# when it ends, then "LABEL suites: P passed, F failed". Suites start in the order given, so
# the Makefile lists the longest first and the last to start are short.
#
#   tests/run_suites.sh LABEL JOBS SUITE...
#
# A SUITE is a command line run by bash with pipefail (a path, or a command with arguments and
# pipes); its exit status says whether it passed. The environment passes through.
set -u
label=$1 jobs=$2
shift 2
dir=$(mktemp -d) || exit 2
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0 started=0
names=()

# Prints each suite that has ended and is not printed yet, and counts it.
report() {
  local i
  for ((i = 0; i < started; i++)); do
    [ -e "$dir/$i.rc" ] && [ ! -e "$dir/$i.shown" ] || continue
    echo "== ${names[i]}"
    cat "$dir/$i.log"
    if [ "$(cat "$dir/$i.rc")" = 0 ]; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAILED: ${names[i]}"
    fi
    : > "$dir/$i.shown"
  done
}

for suite in "$@"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    wait -n
    report
  done
  names[started]=$suite
  (
    bash -o pipefail -c "$suite" > "$dir/$started.log" 2>&1
    echo $? > "$dir/$started.rc"
  ) &
  started=$((started + 1))
done
wait
report
echo "$label suites: $pass passed, $fail failed"
test "$fail" = 0
