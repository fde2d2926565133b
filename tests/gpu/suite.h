/*
 * suite.h — the pieces of the GPU suite shared by its files: a case (one spec on one shape),
 * an entry (one spec with its cases and its compiled kernel), the run-wide settings, a case's
 * inputs and device tensors, and the functions that make, run and check a case.
 *
 * This file contains declarations only. gpu_suite.c has main() (CLI, compile pool, the loop);
 * suite_inputs.c makes a case's inputs; suite_device.c its device tensors and runs;
 * suite_case.c the bars, the verdict, the dry-run model and the controls' mechanics;
 * suite_matrix.c builds the activation matrix, the format matrix and the fuzz configurations,
 * and their negative controls. Everything that depends on how the kernels read a format or
 * round (the ASSUMPTIONs A1-A4 the lead reconciles with the kernels) is in suite_inputs.c.
 */
#ifndef MJ_GPU_SUITE_H
#define MJ_GPU_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "tools/gpu_harness.h"
#include "moejit.h"
#include "lib/quant_ref.h"
#include "reference/reference.h"
#include "core/spec.h"

/* Bytes past the end of out that must stay poisoned (out-of-bounds writes). */
#define GUARD_BYTES 4096

typedef enum part { PART_ACTIVATIONS = 0, PART_FORMATS, PART_FUZZ, PART_COUNT } part;
extern const char *const part_names[PART_COUNT];

typedef struct shape {
    int64_t T, H, I, E, k;
    int64_t offset, local; /* expert parallelism; local = 0: all experts */
} shape;

/* One run of a spec: a shape and the per-run inputs the spec does not fix. */
typedef struct gcase {
    shape s;
    int overrides;    /* per-expert activation parameter arrays (act_param) */
    int routing_bias; /* deepseek_v3: pass a selection bias */
    int graph;        /* also replay through a CUDA graph and compare bit for bit */
} gcase;

typedef struct entry {
    part part;
    char text[384];   /* the spec as written: what FILTER matches and reruns name */
    char label[256];  /* for the PASS/FAIL line */
    gcase cases[8];
    int ncases;
    moejit_spec *spec;
    moejit_kernel *kernel;
    moejit_status status; /* of moejit_kernel_get */
    char error[1024];
    double compile_s;
    int done;
} entry;

/* Run-wide settings. */
typedef struct suite {
    mj_gpu g;
    int dry;          /* --dry-run: no device; a model of an exact kernel stands in */
    CUstream stream;
    int threads;      /* for the float64 reference */
    uint64_t seed;
    const char *arch; /* "native" (device) or "sm_90a" (dry run and wgmma) */
    const char *backend; /* of every spec the suite builds: simt (default), mma or wgmma */
    const char *argv0;
} suite;

typedef struct result {
    double err, err_replay; /* worst against the ideal and the replay reference */
    double err_p90;         /* fp8: worst 90th-percentile token replay error (0 otherwise) */
    int amax_side;          /* fp8: cases that passed against a side of an ambiguous amax */
    char why[1536]; /* empty when passed */
} result;

typedef struct tally {
    int passed, failed, skipped;
} tally;

/* ---- suite_case.c ------------------------------------------------------------------------------ */

/* "T=17 H=288 I=160 E=24 k=3 ep=8+8 ovr=1 rbias=1": the form --case reads back. */
void gcase_format(const gcase *c, char *buf, size_t cap);
/* Parses gcase_format's form (any order; missing keys 0; H, I, E, k required). */
int gcase_parse(const char *text, gcase *c);

/* The multiple every dimension must be of for the spec's format (ASSUMPTION per format). */
int64_t spec_granule(const moejit_spec *spec);
/* Adjusts E and k of a shape to what the spec's routing admits (deepseek_v3: E a multiple of
 * n_group, k <= topk_group · E/n_group; llama4: k = 1), keeping an EP shard inside E. */
void fit_routing(const moejit_spec *spec, shape *s);

/* Runs one case: inputs, reference, the device (or the dry-run model), every check. Fills r
 * (worst errors so far; why on failure) and returns 0 when it passed. */
int run_case(const suite *S, const entry *e, const gcase *c, result *r);

/* The checker's measure: max over tokens of max|out - ref| / max|ref| (infinity for any
 * non-finite output; a token whose reference is exactly zero must be exactly zero). */
double suite_max_error(const float *out, const double *ref, int64_t T, int64_t H);

/* A negative control's change to the reference (or to the output). */
typedef struct mutation {
    const moejit_activation *act;  /* non-NULL: reference with this activation */
    int layout;                    /* >= 0: reference with this W1 layout */
    int swap_nibbles;              /* reference with the 4-bit elements of each pair swapped */
    int zero_points_ignored;       /* reference decoding w4a16 with zp 8 */
    int no_group_masking;          /* deepseek_v3 reference with n_group = topk_group = 1 */
    int drop_b2;                   /* reference without b2 */
    int act_quant;                 /* >= 0: replay quantizing activations this way (mj_ref_act_quant) */
    int zero_out;                  /* the output replaced by zeros */
} mutation;
/* A mutation with nothing changed (layout and act_quant -1). */
mutation mutation_none(void);

/* Runs case c of e (which must pass its own checks), then requires that the suite's whole
 * verdict (every bar, against the mutated ideal and replay references) REJECT the output.
 * Prints and tallies. */
void run_control(const suite *S, const entry *e, const gcase *c, const mutation *m,
                 const char *what, tally *t);

/* ---- suite_inputs.c (the kernels' conventions and a case's inputs) ------------------------------- */

/* A1: how the kernel quantizes activations for the spec (MJ_REF_AQ_NONE: not at all). */
mj_ref_act_quant act_quant_of(const moejit_spec *spec);
/* fp8_tensor with fp8_act=static: x is handed over in e4m3 with args.x_scale. */
int static_x(const moejit_spec *spec);
/* The static x scale: 1.375 · 2^-7 has 4 significant bits, so e4m3 · scale is exact in
 * float, and the kernel's multiplication by it is not a mere exponent shift. */
#define STATIC_X_SCALE 0.0107421875

/* The inputs of one case, as the reference sees them and as the device gets them. */
typedef struct case_data {
    gcase c;
    const moejit_spec *spec;
    mj_qref_format fmt;
    int gated;
    int64_t rows, local;
    float *x, *logits, *rbias, *topk_weights, *b1, *b2;
    float *act_param[MJ_ACT_MAX_PARAMS];
    int32_t *topk_ids;
    mj_qref_weights w1, w2;
    float *alt_w1, *alt_w2; /* controls: mutated weights for the reference */
} case_data;

/* Seeded inputs for case gc of e (depending on the seed, the spec text and the case only,
 * so --case reruns them); 0 on success. case_free releases them (also after a failure). */
int case_make(const suite *S, const entry *e, const gcase *gc, case_data *c);
void case_free(case_data *c);
/* The reference layer of the inputs. */
mj_ref_layer case_layer(const case_data *c);

/* ---- suite_device.c ------------------------------------------------------------------------------- */

/* The device buffers of a case (0 where the spec does not use one). */
enum { B_X, B_LOGITS, B_IDS, B_WEIGHTS, B_RBIAS, B_W1, B_W1S, B_W1Z, B_W2, B_W2S, B_W2Z, B_B1, B_B2,
       B_AP0, B_AP1, B_AP2, B_XSCALE, B_OUT, B_WS, B_COUNT };

typedef struct device_case {
    CUdeviceptr p[B_COUNT];
    size_t out_bytes, ws_bytes;
    moejit_moe_args args;
} device_case;

/* The forward's arguments of shape s, no tensors yet: what a run passes and what the compile
 * pool plans the case's modules from (gpu_suite.c). */
moejit_moe_args shape_args(const shape *s);
/* Uploads every tensor of c that e's spec uses and fills d->args and the workspace. */
moejit_status device_upload(const mj_gpu *g, const entry *e, const case_data *c, device_case *d);
/* Poisons out (and its guard) with 0xFF and the workspace with ws_byte, runs the layer
 * eagerly or through a captured graph, and downloads out and the guard into host. */
moejit_status device_run(const mj_gpu *g, const entry *e, device_case *d, CUstream stream,
                         unsigned char ws_byte, int graph, unsigned char *host);
void device_free(const mj_gpu *g, device_case *d);
/* 1 when the GUARD_BYTES after out_bytes are still 0xFF. */
int guard_intact(const unsigned char *host, size_t out_bytes);

/* ---- suite_matrix.c ------------------------------------------------------------------------------ */

/* Appends the part's entries for S's backend and arch to es (capacity cap) whose text contains
 * filter; returns the new count. Fuzz configurations come from S's seed and number `count`;
 * on a tensor-core backend each is drawn again until the backend supports it (the other
 * parts' unsupported entries are dropped after parsing, gpu_suite.c). */
int build_activation_cases(entry *es, int n, int cap, const suite *S, const char *filter);
int build_format_cases(entry *es, int n, int cap, const suite *S, const char *filter);
int build_fuzz(entry *es, int n, int cap, const suite *S, const char *filter, int count);
/* Whether the backend is a tensor-core one (mma, wgmma). */
int suite_tensor_cores(const suite *S);

/* The negative controls of a part, on the entries that ran (entries whose kernel is NULL
 * after a failure are skipped). */
void controls_activations(const suite *S, entry *es, int n, tally *t);
void controls_formats(const suite *S, entry *es, int n, tally *t);

#endif
