#!/usr/bin/env bash
# Builds build/bin/moejit-bench (the layer benchmark as its own program) from the objects
# `make all build/tests/gpu_suite` leaves in build/, so the benchmark can run before the
# CLI's `bench` command dispatches to it. Run from the repository root after make.
set -euo pipefail
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC=${CC:-cc}
FLAGS="-D_GNU_SOURCE -Iruntime/include -Iruntime -Icodegen -Icache -Itemplates -Itests/lib -Itools -Ibuild/gen
       -isystem $CUDA_HOME/include $(pkg-config --cflags libcjson 2>/dev/null) -std=c11 -O2 -g
       -Wall -Wextra -Werror -Wno-missing-field-initializers -pthread"
mkdir -p build/bench
for f in tools/cmd_bench_layer.c tools/bench_layer_run.c tools/cli.c bench/bench_main.c \
         tests/lib/reference.c tests/lib/halfconv.c tests/lib/gpu_harness.c; do
  $CC $FLAGS -c -o build/bench/$(basename ${f%.c}).o $f
done
$CC -o build/bin/moejit-bench build/bench/*.o build/lib/libmoejit.a \
    -Wl,-rpath,'$ORIGIN/../lib' -Wl,-rpath,$CUDA_HOME/lib64 \
    $(pkg-config --libs libcjson libcrypto) -L$CUDA_HOME/lib64 -lnvrtc -ldl -lpthread -lm
echo "built build/bin/moejit-bench"
