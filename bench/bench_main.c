/*
 * This file contains a standalone entry for `moejit bench layer` (tools/cmd_bench_layer.c),
 * built by bench/build.sh, so the layer benchmark runs on the device before the CLI's
 * `bench` command dispatches to it. `moejit-bench ARGS` is `moejit bench layer ARGS`.
 */
#include "bench_layer.h"

int main(int argc, char **argv) { return cmd_bench_layer(argc, argv); }
