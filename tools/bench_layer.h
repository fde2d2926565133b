/*
 * bench_layer.h — `moejit bench layer`: whole-layer timings of the model shapes of
 * docs/PERFORMANCE.md on the device (CUDA-graph replay, rotating inputs), their fraction of the
 * roofline floor, and a correctness mode (--check) that compares a backend with simt on the
 * model shapes and with the float64 CPU reference on small shapes for every activation.
 *
 * Declared here rather than in cli.h so that the CLI's `bench` command can dispatch to it
 * (`moejit bench layer ...`), and so that `moejit tune` names the same model shapes.
 */
#ifndef MJ_CLI_BENCH_LAYER_H
#define MJ_CLI_BENCH_LAYER_H

/* A model shape of docs/PERFORMANCE.md, by the name --shapes takes (also `moejit tune`'s). */
typedef struct bench_model_shape {
    const char *name;
    int hidden, inter, experts, topk;
    const char *act;
    const char *quant; /* the spec's weight format fields ("mxfp4", "w4a16,group=128"); NULL: bf16 */
    const char *layer; /* the spec's W1 layout and bias fields (",w1_layout=interleaved,bias=both");
                          NULL: up_gate without biases */
} bench_model_shape;

/* The i-th model shape of bf16 weights (0, 1, ...); NULL past the last. */
const bench_model_shape *bench_layer_shape(int i);

/* argv[0] is "layer" (or the program name); returns an exit code of cli.h. */
int cmd_bench_layer(int argc, char **argv);

#endif
