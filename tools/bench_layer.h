/*
 * bench_layer.h — `moejit bench layer`: whole-layer timings of the model shapes of
 * perf-targets.md on the device (CUDA-graph replay, rotating inputs), their fraction of the
 * roofline floor, and a correctness mode (--check) that compares a backend with simt on the
 * model shapes and with the float64 CPU reference on small shapes for every activation.
 *
 * Declared here rather than in cli.h so that the CLI's `bench` command can dispatch to it
 * (`moejit bench layer ...`).
 */
#ifndef MJ_CLI_BENCH_LAYER_H
#define MJ_CLI_BENCH_LAYER_H

/* argv[0] is "layer" (or the program name); returns an exit code of cli.h. */
int cmd_bench_layer(int argc, char **argv);

#endif
