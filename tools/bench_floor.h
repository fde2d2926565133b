/*
 * bench_floor.h — the roofline floor of one layer forward (docs/PERFORMANCE.md, "Floor") and the experts
 * whose weights that forward reads.
 *
 * docs/PERFORMANCE.md states the floor for uniform routing through the expected count of experts
 * touched, E_act = E·(1 − (1 − k/E)^B). A benchmark's inputs route to a definite set instead,
 * and at a few tokens of a few experts the two differ by several percent (Mixtral-8x7B at
 * B = 2: E_act 3.5, the benchmark's eight seeded input sets 3.75 on average), so the bytes a
 * timed forward had to read are counted from its own inputs: the distinct experts of each set,
 * averaged over the sets the timed replays rotate through. The uniform count is kept beside
 * it, so every table can say how far the inputs are from the formula.
 */
#ifndef MJ_CLI_BENCH_FLOOR_H
#define MJ_CLI_BENCH_FLOOR_H

#include "moejit.h"

/* E·(1 − (1 − k/E)^B): experts touched by B tokens under uniform routing (0 when B <= 0). */
double bench_uniform_experts(int E, int k, long long B);

/* The number of distinct experts the B tokens of one input set route to: renormalize routing
 * (the k largest logits of each token, ties to the lower id, as the kernels and the float64
 * reference select) on logits [B, E] in fp32. Writes it to *experts; MOEJIT_ERR_INVALID_ARGUMENT
 * for a shape the reference does not route (E outside 1..MJ_REF_MAX_EXPERTS, k outside 1..E or
 * past MJ_REF_MAX_TOPK, B < 0), MOEJIT_ERR_OUT_OF_MEMORY. */
moejit_status bench_routed_experts(const float *logits, long long B, int E, int k, int *experts);

/* The bytes of one expert's W1 (rows1 x H: 2I rows gated, I ungated) and W2 (H x I) as its format
 * stores them: elem_bytes per weight (2: bf16, fp16; 1: e4m3) and its fp32 scales: none
 * (scale_block < 0), one per matrix (0: fp8_tensor), or one per scale_block x scale_block block
 * (fp8_block: 128, partial blocks counted whole). */
double bench_expert_weight_bytes(int H, int I, int gated, double elem_bytes, int scale_block);

typedef struct bench_floor {
    double e_uniform;    /* bench_uniform_experts */
    double e_read;       /* experts the timed inputs route to (mean over the rotated sets) */
    double weight_bytes; /* e_read · expert_bytes: the weight bytes (and scales) the forwards read */
    double flops;        /* 2 · B · k · (rows1 + I) · H */
    double floor_us;     /* max(weight_bytes / bw, flops / peak) */
} bench_floor;

/* The floor of a forward of B tokens over the shape (H, I, E, k; gated: W1 has 2I rows) whose
 * inputs read e_read experts' weights of expert_bytes each (bench_expert_weight_bytes), with the
 * ceilings bw (TB/s) and peak (TFLOP/s). */
bench_floor bench_floor_of(int H, int I, int E, int k, int gated, long long B, double e_read, double expert_bytes,
                           double bw, double peak);

#endif
