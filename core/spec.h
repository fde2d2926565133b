/*
 * spec.h — the specialisation a compiled layer is made for, and the name tables of its
 * enumerated fields.
 *
 * Enum numbers are internal (the canonical text is what identifies a kernel, not these
 * numbers), but each enum's name table is the one spelling used by the parser, the
 * canonical printer, the capability matrix and the CLI.
 */
#ifndef MJ_SPEC_H
#define MJ_SPEC_H

#include <stdint.h>

#include "core/activation.h"
#include "moejit.h"

typedef enum mj_backend { MJ_BACKEND_SIMT = 0, MJ_BACKEND_MMA, MJ_BACKEND_WGMMA, MJ_BACKEND_COUNT } mj_backend;

/* Weight (and for fp8, activation) quantization. */
typedef enum mj_quant {
    MJ_QUANT_BF16 = 0, MJ_QUANT_FP16, MJ_QUANT_FP8_TENSOR, MJ_QUANT_FP8_BLOCK, MJ_QUANT_W4A16,
    MJ_QUANT_MXFP4, MJ_QUANT_COUNT
} mj_quant;

/* The 4-bit weight formats (packed two per byte, dequantized in the kernel). */
static inline int mj_quant_is_4bit(mj_quant q) { return q == MJ_QUANT_W4A16 || q == MJ_QUANT_MXFP4; }

/* Element type of x, out, biases (and of the weights for bf16/fp16 quant). */
typedef enum mj_dtype { MJ_DTYPE_BF16 = 0, MJ_DTYPE_FP16, MJ_DTYPE_FP32, MJ_DTYPE_COUNT } mj_dtype;

typedef enum mj_arch {
    MJ_ARCH_SM80 = 0, MJ_ARCH_SM86, MJ_ARCH_SM89, MJ_ARCH_SM90A, MJ_ARCH_SM100A, MJ_ARCH_SM120A,
    MJ_ARCH_COUNT
} mj_arch;

typedef enum mj_routing {
    MJ_ROUTING_SOFTMAX_TOPK = 0, MJ_ROUTING_RENORMALIZE, MJ_ROUTING_SIGMOID_TOPK,
    MJ_ROUTING_SIGMOID_RENORM, MJ_ROUTING_DEEPSEEK_V3, MJ_ROUTING_LLAMA4, MJ_ROUTING_PRECOMPUTED,
    MJ_ROUTING_COUNT
} mj_routing;

typedef enum mj_w1_layout { MJ_W1_UP_GATE = 0, MJ_W1_GATE_UP, MJ_W1_INTERLEAVED, MJ_W1_LAYOUT_COUNT } mj_w1_layout;

typedef enum mj_bias { MJ_BIAS_NONE = 0, MJ_BIAS_B1, MJ_BIAS_B2, MJ_BIAS_BOTH, MJ_BIAS_COUNT } mj_bias;

/* Whether a forward may pass per-expert activation overrides (moejit_moe_args.act_param): the
 * tensor-core layers apply them only where the spec asks (their epilogue otherwise keeps the
 * activation's parameters as compile-time constants); simt's kernels apply them either way. */
typedef enum mj_act_overrides { MJ_OVERRIDES_NONE = 0, MJ_OVERRIDES_PER_EXPERT, MJ_OVERRIDES_COUNT } mj_act_overrides;

/* quant=fp8_tensor: how x becomes e4m3 — a dynamic scale per tensor or per token (amax/448,
 * computed in the kernel), or x handed over already in e4m3 with a static fp32 scale
 * (moejit_moe_args.x_scale). */
typedef enum mj_fp8_act { MJ_FP8_ACT_TENSOR = 0, MJ_FP8_ACT_TOKEN, MJ_FP8_ACT_STATIC, MJ_FP8_ACT_COUNT } mj_fp8_act;

struct moejit_spec {
    mj_backend backend;
    mj_quant quant;
    mj_dtype dtype;          /* x / out / bias element type */
    moejit_activation act;
    mj_arch arch;            /* always resolved: "native" never survives parsing */
    mj_routing routing;
    mj_dtype logits_dtype;   /* router logits: fp32 or bf16 */
    mj_w1_layout w1_layout;
    mj_bias bias;
    mj_act_overrides act_overrides;
    int group_size;          /* w4a16: 32, 64, 128; otherwise 0 */
    int zero_point;          /* w4a16: 0 or 1; otherwise 0 */
    mj_fp8_act fp8_act;      /* fp8_tensor: tensor (default), token, static; otherwise tensor */
    int n_group, topk_group; /* deepseek_v3 routing; otherwise 0 */
    float routed_scaling;    /* deepseek_v3 routing; otherwise 1.0 */
    int hidden, inter, experts, topk; /* pinned shape; 0 = given at run time */
    char tile[32];           /* "auto" or an explicit tile configuration name */
    int backend_auto;        /* 1: backend was chosen by backend=auto (not part of the canonical form) */
    char *canonical;         /* cached canonical text (the spec is immutable) */
    uint64_t hash;           /* FNV-1a of canonical, for the in-process registry */
};

/* Name tables, indexed by the enums above. */
extern const char *const mj_backend_names[MJ_BACKEND_COUNT];
extern const char *const mj_quant_names[MJ_QUANT_COUNT];
extern const char *const mj_dtype_names[MJ_DTYPE_COUNT];
extern const char *const mj_arch_names[MJ_ARCH_COUNT];    /* "sm_80" ... "sm_120a" */
extern const char *const mj_routing_names[MJ_ROUTING_COUNT];
extern const char *const mj_w1_layout_names[MJ_W1_LAYOUT_COUNT];
extern const char *const mj_bias_names[MJ_BIAS_COUNT];
extern const char *const mj_act_overrides_names[MJ_OVERRIDES_COUNT];
extern const char *const mj_fp8_act_names[MJ_FP8_ACT_COUNT];

/* NVRTC's name for the arch ("sm_90a" for MJ_ARCH_SM90A). */
const char *mj_arch_target(mj_arch arch);
/* Arch for a compute capability, e.g. (9, 0) -> sm_90a; error names the allowed archs. */
moejit_status mj_arch_from_cc(int major, int minor, mj_arch *out);

/* Appends the canonical text of all fields (what moejit_spec_canonical caches). */
void mj_spec_format(const moejit_spec *spec, mj_buf *b);
/* Deep copy (for the registry, which outlives the caller's spec). */
moejit_status mj_spec_clone(const moejit_spec *spec, moejit_spec **out);

/* Resolves arch=native to the current device's arch. The parser calls it last, after every
 * other field is checked, so that a machine without a GPU reports the spec's own mistakes
 * first. Asking the driver is the runtime's business: the public parsers pass its resolver,
 * and NULL refuses arch=native. */
typedef moejit_status (*mj_native_arch_fn)(mj_arch *out);
/* Resolves backend=auto: given the spec with every other field read, sets spec->backend to
 * the backend to use (the capability matrix's question, so the caller answers it). */
typedef moejit_status (*mj_auto_backend_fn)(moejit_spec *spec);
/* What the parser asks its caller; a NULL member refuses that value. */
typedef struct mj_spec_resolvers {
    mj_native_arch_fn native;
    mj_auto_backend_fn auto_backend;
} mj_spec_resolvers;
moejit_status mj_spec_parse(const char *text, const mj_spec_resolvers *resolve, moejit_spec **out);
moejit_status mj_spec_parse_json(const char *json, const mj_spec_resolvers *resolve, moejit_spec **out);

/* The offset of the first \u0000 escape inside a JSON string of json, or -1. cJSON ends a
 * decoded string at a NUL, which would silently cut a value or a key ("simt\u0000mma" read as
 * simt), so every JSON reader refuses such text instead. */
long mj_json_nul_escape(const char *json);

#endif
