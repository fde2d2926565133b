/*
 * moejit.h — the whole public API of moejit.
 *
 * moejit generates, JIT-compiles (NVRTC), caches and loads fused Mixture-of-Experts
 * kernels specialised to a (backend, quantization, activation, arch) tuple.
 *
 * Conventions, written once:
 *  - Every call that can fail returns a moejit_status. On failure, moejit_last_error()
 *    returns a message for the calling thread that names the field and the allowed
 *    values ("activation.limit: must be finite and > 0, got nan"). The message stays
 *    valid until the next failing call on the same thread.
 *  - Handles are opaque. An object returned through `**out` belongs to the caller and is
 *    released with its _destroy function; _destroy(NULL) is a no-op. Kernels returned by
 *    moejit_kernel_get belong to their context and live as long as it does.
 *  - Activations and specs are immutable values: once created they never change, so one
 *    value may be shared between threads freely.
 *  - The library never calls exit() or abort(), and every function is thread-safe.
 *  - Device pointers are plain `void *` (CUdeviceptr values, torch data_ptr()).
 *
 * ABI of the structs a caller fills (moejit_options, moejit_moe_args):
 *  - Each starts with `size_t struct_size`, the sizeof the struct had in the header the caller
 *    was compiled against. Set it with the initializers: MOEJIT_OPTIONS_INIT /
 *    moejit_options_init(&o), MOEJIT_MOE_ARGS_INIT / moejit_moe_args_init(&a).
 *  - Fields are only ever appended, never reordered, resized or removed.
 *  - The library accepts any struct_size from the oldest layout it knows (MOEJIT_OPTIONS_SIZE_V1,
 *    MOEJIT_MOE_ARGS_SIZE_V1) up to its own sizeof; fields past struct_size (a caller built
 *    against an older header) take their defaults, which are the zero values. A smaller or larger
 *    size (a missing initializer, or a caller built against a newer header than the library) is
 *    MOEJIT_ERR_INVALID_ARGUMENT naming the field: "moejit_options.struct_size: ... got 0".
 */
#ifndef MOEJIT_H
#define MOEJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; only what is marked here is exported. */
#if defined(__GNUC__)
#define MOEJIT_API __attribute__((visibility("default")))
#else
#define MOEJIT_API
#endif

#define MOEJIT_VERSION_MAJOR 0
#define MOEJIT_VERSION_MINOR 1
#define MOEJIT_VERSION_PATCH 0
#define MOEJIT_VERSION_STRING "0.1.0"

/* ---- status ------------------------------------------------------------------------ */

/* Persisted in logs and exit codes of tools: numbers are never reused. */
typedef enum moejit_status {
    MOEJIT_OK = 0,
    MOEJIT_ERR_INVALID_ARGUMENT = 1, /* a bad field, value or shape: the message names it */
    MOEJIT_ERR_UNSUPPORTED = 2,      /* valid, but the backend does not support it */
    MOEJIT_ERR_OUT_OF_MEMORY = 3,    /* a host allocation failed */
    MOEJIT_ERR_COMPILE = 4,          /* NVRTC failed, crashed or timed out: see the log */
    MOEJIT_ERR_NO_DRIVER = 5,        /* libcuda.so.1 could not be loaded */
    MOEJIT_ERR_NO_DEVICE = 6,        /* the driver is there but no usable device */
    MOEJIT_ERR_CUDA = 7,             /* a CUDA driver call failed */
    MOEJIT_ERR_IO = 8,               /* a file or process operation failed */
    MOEJIT_ERR_CACHE_MISS = 9,       /* offline cache mode and the kernel is not cached */
    MOEJIT_ERR_INTERNAL = 10,        /* a bug in moejit: please report it */
    MOEJIT_ERR_BUFFER_TOO_SMALL = 11, /* an output buffer is too small; *len says how big */
    MOEJIT_ERR_NOT_WARMED = 12        /* a forward being captured in a CUDA graph needs a module not
                                         loaded yet: run one forward of that batch size, or
                                         moejit_warm, before the capture */
} moejit_status;

/* The calling thread's message for its last failed call ("" if none). Never NULL. */
MOEJIT_API const char *moejit_last_error(void);
/* "MOEJIT_ERR_UNSUPPORTED" etc. Never NULL. */
MOEJIT_API const char *moejit_status_name(moejit_status status);

/* ---- activations ---------------------------------------------------------------------- */

/* The integer ABI shared with the CUTLASS / TensorRT-LLM MoE kernels (5 is internal). */
typedef enum moejit_act_kind {
    MOEJIT_ACT_GELU = 0,
    MOEJIT_ACT_RELU = 1,
    MOEJIT_ACT_SILU = 2,
    MOEJIT_ACT_SWIGLU = 3,
    MOEJIT_ACT_GEGLU = 4,
    MOEJIT_ACT_RELU2 = 6,
    MOEJIT_ACT_SWIGLU_STEP = 7,
    MOEJIT_ACT_GEGLU_TANH = 8,
    MOEJIT_ACT_IDENTITY = 9,
    MOEJIT_ACT_SITU = 10
} moejit_act_kind;

typedef struct moejit_activation moejit_activation;

/* An activation of `kind` with every parameter at its default. */
MOEJIT_API moejit_status moejit_activation_create(moejit_act_kind kind, moejit_activation **out);
/* SwiGLU: g' = min(g, limit); u' = clamp(u, -limit, limit); g'·σ(alpha·g')·(u' + beta).
 * alpha, beta finite; limit finite and > 0 (FLT_MAX means no clamp). */
MOEJIT_API moejit_status moejit_activation_swiglu(float alpha, float beta, float limit,
                                       moejit_activation **out);
/* SwiGLUStep: min(silu(g), limit)·clamp(u, -limit, limit); limit finite and > 0. */
MOEJIT_API moejit_status moejit_activation_swiglu_step(float limit, moejit_activation **out);
/* SiTU; linear_scale and clamp_limit may be NULL for "none". All given values finite, > 0. */
MOEJIT_API moejit_status moejit_activation_situ(float gate_scale, const float *linear_scale,
                                     const float *clamp_limit, moejit_activation **out);
/* Parses the human form "swiglu(alpha=1.702,beta=1,limit=7)" or the canonical form. */
MOEJIT_API moejit_status moejit_activation_parse(const char *text, moejit_activation **out);
MOEJIT_API void moejit_activation_destroy(moejit_activation *act);

MOEJIT_API moejit_act_kind moejit_activation_kind(const moejit_activation *act);
MOEJIT_API int moejit_activation_is_gated(const moejit_activation *act);
/* Value of parameter `name`; *present is 0 for a SiTU parameter set to none. Names
 * a parameter the activation does not have: MOEJIT_ERR_INVALID_ARGUMENT. */
MOEJIT_API moejit_status moejit_activation_param(const moejit_activation *act, const char *name,
                                      float *value, int *present);
/* 1 when kind and the bits of every field are equal (-0.0 != +0.0). */
MOEJIT_API int moejit_activation_equal(const moejit_activation *a, const moejit_activation *b);
/* Hash over the kind and the exact bits of every field. */
MOEJIT_API uint64_t moejit_activation_hash(const moejit_activation *act);
/* Canonical text ("swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)"), which
 * moejit_activation_parse turns back into an equal value. Writes a NUL-terminated string
 * when it fits; *len (optional) receives the length without the NUL. */
MOEJIT_API moejit_status moejit_activation_to_string(const moejit_activation *act, char *buf,
                                          size_t cap, size_t *len);

/* ---- specs -------------------------------------------------------------------------- */

/* What identifies one compiled layer. Text form (fields in any order, defaults omitted):
 *   backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a
 * JSON form: {"backend":"simt","quant":"bf16","act":"swiglu(alpha=1.702)","arch":"sm_90a"}
 * (act may also be an object {"kind":"swiglu","alpha":1.702}). Both canonicalise to one
 * string listing every field. arch=native resolves from the current device. JSON numbers pass
 * through a double before becoming floats; give a float as a string ("0x1.b3b646p+0" or
 * "1.702") to have it read exactly as the text form reads it. */
typedef struct moejit_spec moejit_spec;

MOEJIT_API moejit_status moejit_spec_parse(const char *text, moejit_spec **out);
MOEJIT_API moejit_status moejit_spec_from_json(const char *json, moejit_spec **out);
MOEJIT_API void moejit_spec_destroy(moejit_spec *spec);
/* The canonical text form (every field, floats as exact hex). */
MOEJIT_API const char *moejit_spec_canonical(const moejit_spec *spec);
/* The JSON form, written into buf as for moejit_activation_to_string. */
MOEJIT_API moejit_status moejit_spec_to_json(const moejit_spec *spec, char *buf, size_t cap, size_t *len);
MOEJIT_API const moejit_activation *moejit_spec_activation(const moejit_spec *spec);
MOEJIT_API int moejit_spec_equal(const moejit_spec *a, const moejit_spec *b);

/* MOEJIT_OK when the spec's backend supports it; otherwise MOEJIT_ERR_UNSUPPORTED with a
 * message such as "backend simt does not support quant fp8_block; supported: bf16, fp16". */
MOEJIT_API moejit_status moejit_check_support(const moejit_spec *spec);

/* ---- context and kernels ---------------------------------------------------------------- */

typedef struct moejit_options {
    size_t struct_size;        /* sizeof(moejit_options) as the caller was built: MOEJIT_OPTIONS_INIT */
    const char *cache_dir;     /* NULL: $MOEJIT_CACHE_DIR, $XDG_CACHE_HOME/moejit, ~/.cache/moejit */
    const char *cache_mode;    /* NULL: $MOEJIT_CACHE_MODE or "read-write"; also "read-only",
                                  "offline" (a miss is an error), "off" */
    int64_t cache_max_bytes;   /* 0: $MOEJIT_CACHE_MAX_BYTES or the default */
    double compile_timeout_s;  /* 0: $MOEJIT_COMPILE_TIMEOUT or 300 s */
    int device;                /* CUDA device ordinal used by arch=native and for loading */
    /* ---- appended after the first layout (MOEJIT_OPTIONS_SIZE_V1 bytes end before it) ---- */
    int64_t allow_unvalidated; /* 0: $MOEJIT_ALLOW_UNVALIDATED or no; 1: run kernel tuples built
                                  but not yet validated on hardware; -1: never, whatever the
                                  environment says */
    const char *compile_worker; /* NULL: $MOEJIT_COMPILE_WORKER, else found beside the library
                                   or the executable, else in the install's libexec */
    int64_t compile_only;      /* 0: kernels load on the device when there is one; 1: compile and
                                  cache only, never touching the CUDA driver (warming a cache on a
                                  build machine, or before a server starts): moejit_moe_forward
                                  then refuses the kernels with MOEJIT_ERR_INVALID_ARGUMENT */
} moejit_options;

/* The first layout's size (struct_size .. device): the oldest struct_size accepted. */
#define MOEJIT_OPTIONS_SIZE_V1 offsetof(moejit_options, allow_unvalidated)
/* Every field at its default, struct_size set. */
#ifdef __cplusplus
#define MOEJIT_OPTIONS_INIT {sizeof(moejit_options)}
#else
#define MOEJIT_OPTIONS_INIT {.struct_size = sizeof(moejit_options)}
#endif
MOEJIT_API void moejit_options_init(moejit_options *opts);

typedef struct moejit_context moejit_context;
typedef struct moejit_kernel moejit_kernel;

/* opts may be NULL for every default (else its struct_size must be set: see the top). Works
 * without a GPU. */
MOEJIT_API moejit_status moejit_context_create(const moejit_options *opts, moejit_context **out);
MOEJIT_API void moejit_context_destroy(moejit_context *ctx);

/* Returns the compiled layer for spec: from memory, else the disk cache, else NVRTC.
 * Concurrent first calls for one spec compile once. Without a GPU the kernel is compiled
 * but not loaded; moejit_moe_forward then fails with MOEJIT_ERR_NO_DRIVER / _NO_DEVICE (and
 * MOEJIT_ERR_INVALID_ARGUMENT in a compile-only context, which never loads). A failed compile
 * keeps its spec, source, NVRTC options and log in <cache>/failed/<key>/ when the cache is
 * read-write; a later successful compile of that key removes the folder.
 * A tensor-core layer (backend mma, wgmma) is split into modules, one per GEMM path and
 * routing stage: this call compiles none of them; each forward compiles (or loads) the
 * modules of the path it takes, and moejit_warm every module. */
MOEJIT_API moejit_status moejit_kernel_get(moejit_context *ctx, const moejit_spec *spec,
                                moejit_kernel **out);

typedef struct moejit_kernel_resources {
    const char *name;       /* the kernel's entry name */
    int registers;          /* per thread */
    int shared_bytes;       /* static shared memory per block */
    int stack_bytes;        /* stack frame per thread */
    int spill_store_bytes;
    int spill_load_bytes;
} moejit_kernel_resources;

MOEJIT_API const moejit_spec *moejit_kernel_spec(const moejit_kernel *k);
/* The cache key: lowercase hex SHA-256 of the full preimage (64 characters). */
MOEJIT_API const char *moejit_kernel_key(const moejit_kernel *k);
/* Seconds NVRTC took for this kernel (0 when it came from the disk cache). */
MOEJIT_API double moejit_kernel_compile_seconds(const moejit_kernel *k);
/* 1 when the cubin is loaded on a device and moejit_moe_forward can run. */
MOEJIT_API int moejit_kernel_is_loaded(const moejit_kernel *k);
MOEJIT_API int moejit_kernel_count(const moejit_kernel *k);
MOEJIT_API moejit_status moejit_kernel_resources_get(const moejit_kernel *k, int index,
                                          moejit_kernel_resources *out);

/* ---- running a layer ---------------------------------------------------------------------- */

/* Tensors of one MoE layer. Shapes use T tokens, H hidden, I intermediate, E experts,
 * k experts per token; rows(W1) = 2I for a gated activation, I otherwise. Every tensor is
 * row-major, contiguous, on the device; x, w1, w2, b1, b2 and out have the spec's dtype. */
typedef struct moejit_moe_args {
    size_t struct_size;        /* sizeof(moejit_moe_args) as the caller was built: MOEJIT_MOE_ARGS_INIT */
    int64_t num_tokens;        /* T >= 0 (0 is a valid no-op) */
    int64_t hidden;            /* H, multiple of 8 */
    int64_t inter;             /* I, multiple of 8 */
    int64_t num_experts;       /* E: global experts, width of the router (<= 512) */
    int64_t topk;              /* k (1..32, <= E) */
    int64_t expert_offset;     /* first expert this rank owns (expert parallelism); 0 */
    int64_t num_local_experts; /* experts this rank owns; 0 means all E */
    const void *x;             /* [T, H] */
    const void *router_logits; /* [T, E] (spec logits dtype); unused for precomputed routing */
    const int32_t *topk_ids;   /* [T, k] global expert ids, for routing=precomputed */
    const float *topk_weights; /* [T, k], for routing=precomputed */
    const float *routing_bias; /* [E] fp32, selection-only bias (deepseek_v3) */
    const void *w1;            /* [E_local, rows, H] in the spec's w1_layout */
    const void *w2;            /* [E_local, H, I] */
    const void *b1;            /* [E_local, rows] when the spec has bias b1/both */
    const void *b2;            /* [E_local, H] when the spec has bias b2/both */
    const void *w1_scale;      /* quantization scales (formats other than bf16/fp16) */
    const void *w2_scale;
    const void *w1_zero;       /* int4 zero points (w4a16 with zero_point=1) */
    const void *w2_zero;
    const float *act_param[3]; /* per-expert [E_local] fp32 overrides of activation
                                  parameters, in the activation's parameter order; NULL: none */
    void *out;                 /* [T, H], fully written */
    const float *x_scale;      /* [1] fp32 dequant scale of an e4m3 x (quant=fp8_tensor,
                                  fp8_act=static only; x is then [T, H] e4m3) */
} moejit_moe_args;

/* The first layout's size (every field above): the oldest struct_size accepted. */
#define MOEJIT_MOE_ARGS_SIZE_V1 (offsetof(moejit_moe_args, x_scale) + sizeof(const float *))
/* Every field zero (no tensors), struct_size set. */
#ifdef __cplusplus
#define MOEJIT_MOE_ARGS_INIT {sizeof(moejit_moe_args)}
#else
#define MOEJIT_MOE_ARGS_INIT {.struct_size = sizeof(moejit_moe_args)}
#endif
MOEJIT_API void moejit_moe_args_init(moejit_moe_args *args);

/* Device workspace bytes moejit_moe_forward needs for args' shape (pointers unused): enough for
 * every batch of at most args->num_tokens tokens, so one buffer sized for the largest batch
 * serves all smaller ones (a decode batch may need more than a larger one's own layout). */
MOEJIT_API moejit_status moejit_workspace_size(const moejit_kernel *k, const moejit_moe_args *args,
                                    size_t *bytes);
/* Runs the layer on `stream` (a CUstream; NULL = the legacy default stream). Allocates
 * nothing, never synchronises, and can be captured in a CUDA graph. A tensor-core layer's
 * first forward of a path compiles or loads that path's modules first, except while the
 * stream is capturing a graph: it then fails with MOEJIT_ERR_NOT_WARMED (warm first, or run
 * one forward of that batch size before the capture). The workspace must be
 * at least moejit_workspace_size bytes and 256-byte aligned. The caller's current CUDA
 * context must be the one of the device the kernel was loaded on. */
MOEJIT_API moejit_status moejit_moe_forward(const moejit_kernel *k, const moejit_moe_args *args,
                                 void *workspace, size_t workspace_bytes, void *stream);

/* ---- warming -------------------------------------------------------------------------- */

/* One spec's outcome, handed to the progress callback. Valid during the callback only; new
 * fields are only ever appended. */
typedef struct moejit_warm_result {
    size_t index;              /* into the specs array */
    const moejit_spec *spec;
    moejit_status status;      /* of moejit_kernel_get for this spec */
    const char *message;       /* the library's message when status is not MOEJIT_OK, else "" */
    int compiled;              /* 1: NVRTC compiled it now; 0: it came from memory or the cache */
    double seconds;            /* wall time of this spec */
    size_t done, total;        /* specs finished so far (this one included), and all of them */
    const char *failed_dir;    /* a failed compile's <cache>/failed/<key>/ folder, holding what NVRTC
                                  was given and said (spec.txt, source.cu, options.txt, log.txt);
                                  "" when none was kept (a read-only or disabled cache, or no
                                  compile failed) */
} moejit_warm_result;

/* Called once per spec as it finishes, one call at a time (never concurrently). */
typedef void (*moejit_warm_progress_fn)(void *user, const moejit_warm_result *result);

/* Gets every spec's kernel (compiled or loaded from the cache; on a GPU also loaded, unless the
 * context is compile-only), `jobs` at a time, so a serving process can warm its layers at
 * start-up; for a tensor-core layer, every module of every path (in parallel, `jobs` at a
 * time), so no later forward compiles. Each compile runs in its own worker process, so `jobs`
 * scales like processes. Every spec is attempted; a failed compile's folder is named in its
 * result (failed_dir). *failed (optional) counts the specs that failed, and the call then
 * returns the first failure's status. progress may be NULL. */
MOEJIT_API moejit_status moejit_warm(moejit_context *ctx, const moejit_spec *const *specs, size_t n, int jobs,
                                     moejit_warm_progress_fn progress, void *user, size_t *failed);

/* ---- versions ------------------------------------------------------------------------- */

MOEJIT_API const char *moejit_version(void);
/* NVRTC's version (always available; NVRTC is linked). */
MOEJIT_API moejit_status moejit_nvrtc_version(int *major, int *minor);
/* The CUDA driver's version (e.g. 13000); MOEJIT_ERR_NO_DRIVER without libcuda. */
MOEJIT_API moejit_status moejit_driver_version(int *version);

#ifdef __cplusplus
}
#endif
#endif /* MOEJIT_H */
