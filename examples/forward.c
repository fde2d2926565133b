/*
 * forward.c — a complete moejit program: build a SwiGLU MoE layer, fill its inputs, run one
 * forward on the GPU and check it against a small CPU reference.
 *
 * Build against an installed moejit (the CUDA runtime only allocates and copies here; moejit
 * itself needs no CUDA at link time):
 *
 *   cc forward.c $(pkg-config --cflags --libs moejit) -L$CUDA_HOME/lib64 -lcudart_static \
 *      -lrt -ldl -lpthread -lm -o forward
 *
 * Without a GPU it still compiles the layer (for sm_90a), prints "no CUDA device: ..." and
 * exits 0, so the build and the JIT path can be checked anywhere.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <moejit.h>

enum { T = 5, H = 128, I = 64, E = 8, K = 2 };

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even (inputs here are finite) */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float frand(unsigned *s, float scale)
{
    *s = *s * 1664525u + 1013904223u;
    return scale * ((float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f);
}

/* The layer in float on the host: renormalized top-k of the softmax, W1 = [up; gate] rows,
 * SwiGLU with its defaults (silu(gate) * up), the intermediate rounded to bf16 as moejit does. */
static void reference(const uint16_t *x, const float *logits, const uint16_t *w1, const uint16_t *w2, float *out)
{
    for (int t = 0; t < T; t++) {
        int ids[K];
        float w[K], sum = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int q = 0; q < j; q++) taken |= ids[q] == e;
                if (!taken && (best < 0 || logits[t * E + e] > logits[t * E + best])) best = e;
            }
            ids[j] = best;
            w[j] = expf(logits[t * E + best]); /* softmax's denominator cancels in the renorm */
            sum += w[j];
        }
        for (int h = 0; h < H; h++) out[t * H + h] = 0;
        for (int j = 0; j < K; j++) {
            const uint16_t *W1 = w1 + (size_t)ids[j] * 2 * I * H, *W2 = w2 + (size_t)ids[j] * H * I;
            float inter[I];
            for (int i = 0; i < I; i++) {
                float up = 0, gate = 0;
                for (int h = 0; h < H; h++) {
                    up += from_bf16(W1[(size_t)i * H + h]) * from_bf16(x[t * H + h]);
                    gate += from_bf16(W1[(size_t)(I + i) * H + h]) * from_bf16(x[t * H + h]);
                }
                inter[i] = from_bf16(to_bf16(gate / (1.0f + expf(-gate)) * up));
            }
            for (int h = 0; h < H; h++) {
                float y = 0;
                for (int i = 0; i < I; i++) y += from_bf16(W2[(size_t)h * I + i]) * inter[i];
                out[t * H + h] += w[j] / sum * y;
            }
        }
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "forward: %s: %s\n", what, moejit_last_error());
    return 1;
}

int main(void)
{
    int devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&devices);
    int have_gpu = ce == cudaSuccess && devices > 0;
    const char *text = have_gpu ? "backend=simt,quant=bf16,act=swiglu,routing=renormalize,arch=native"
                                : "backend=simt,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a";
    moejit_spec *spec = NULL;
    moejit_context *ctx = NULL;
    moejit_kernel *kernel = NULL;
    if (moejit_spec_parse(text, &spec) != MOEJIT_OK) return fail("spec");
    if (moejit_context_create(NULL, &ctx) != MOEJIT_OK) return fail("context");
    if (moejit_kernel_get(ctx, spec, &kernel) != MOEJIT_OK) return fail("kernel");
    printf("layer %s\nkey %s\n", moejit_spec_canonical(spec), moejit_kernel_key(kernel));
    if (!have_gpu) {
        printf("no CUDA device: %s; the layer compiled, the forward is skipped\n",
               ce == cudaSuccess ? "none found" : cudaGetErrorString(ce));
        moejit_context_destroy(ctx);
        moejit_spec_destroy(spec);
        return 0;
    }

    /* Inputs on the host, then on the device. */
    static uint16_t x[T * H], w1[E * 2 * I * H], w2[E * H * I], out[T * H];
    static float logits[T * E], want[T * H];
    unsigned seed = 1;
    for (int i = 0; i < T * H; i++) x[i] = to_bf16(frand(&seed, 1.0f));
    for (int i = 0; i < E * 2 * I * H; i++) w1[i] = to_bf16(frand(&seed, 0.1f));
    for (int i = 0; i < E * H * I; i++) w2[i] = to_bf16(frand(&seed, 0.1f));
    for (int i = 0; i < T * E; i++) logits[i] = frand(&seed, 2.0f);
    void *dx, *dw1, *dw2, *dlogits, *dout, *ws = NULL;
    if (cudaMalloc(&dx, sizeof x) || cudaMalloc(&dw1, sizeof w1) || cudaMalloc(&dw2, sizeof w2) ||
        cudaMalloc(&dlogits, sizeof logits) || cudaMalloc(&dout, sizeof out)) {
        fprintf(stderr, "forward: cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemcpy(dw1, w1, sizeof w1, cudaMemcpyHostToDevice);
    cudaMemcpy(dw2, w2, sizeof w2, cudaMemcpyHostToDevice);
    cudaMemcpy(dlogits, logits, sizeof logits, cudaMemcpyHostToDevice);

    moejit_moe_args args = MOEJIT_MOE_ARGS_INIT;
    args.num_tokens = T;
    args.hidden = H;
    args.inter = I;
    args.num_experts = E;
    args.topk = K;
    args.x = dx;
    args.router_logits = dlogits;
    args.w1 = dw1;
    args.w2 = dw2;
    args.out = dout;
    size_t bytes = 0;
    if (moejit_workspace_size(kernel, &args, &bytes) != MOEJIT_OK) return fail("workspace size");
    if (bytes && cudaMalloc(&ws, bytes)) {
        fprintf(stderr, "forward: cudaMalloc of the workspace failed\n");
        return 1;
    }
    if (moejit_moe_forward(kernel, &args, ws, bytes, NULL) != MOEJIT_OK) return fail("forward");
    if (cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost) != cudaSuccess) {
        fprintf(stderr, "forward: the layer failed on the device\n");
        return 1;
    }

    reference(x, logits, w1, w2, want);
    double worst = 0;
    for (int i = 0; i < T * H; i++) {
        double err = fabs(from_bf16(out[i]) - want[i]) / (fabs(want[i]) + 1e-2);
        if (err > worst) worst = err;
    }
    printf("%d tokens: worst relative error %.3g against the host reference\n", T, worst);
    cudaFree(ws);
    cudaFree(dout);
    cudaFree(dlogits);
    cudaFree(dw2);
    cudaFree(dw1);
    cudaFree(dx);
    moejit_context_destroy(ctx);
    moejit_spec_destroy(spec);
    return worst < 0.05 ? 0 : 1;
}
