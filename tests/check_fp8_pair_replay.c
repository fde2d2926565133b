/*
 * This file contains a CPU replay of the fp8_block pair path's global accesses (templates/
 * wgmma_fp8.cuh on the pair schedule of wgmma_gemm.cuh, the pair order of permute.cuh) against
 * the workspace the host lays out (runtime/launch_tc_fp8.c, launch_common.c) and the weight
 * scales the contract sizes [E, N/128, K/128]: for routings drawn at random (every expert a
 * few tiles, some an odd one, so that clusters pair an expert's own tiles, sharing their weight
 * tile, pair two experts' odd tiles, or leave the second CTA without rows), every byte GEMM1's
 * producer copies (x codes and their 1 x 128 scales), its epilogue writes (the intermediate's
 * codes and scales), GEMM2's producer copies, both consumers' weight scale reads and GEMM2's y
 * rows must fall inside their regions. The device code's index arithmetic is mirrored here
 * line by line, with the shapes of the float64 cases (H 640 = 2.5 column tiles of 256, I 384)
 * and a model's.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/launch_common.h"
#include "runtime/launch_tc_fp8.h"
#include "templates/common/wgmma_params.h"
#include "core/spec.h"
#include "lib/check_main.h"

enum { BM = MJ_WGMMA_BM, BN = MJ_WGMMA_BN, BLK = 128, MAX_E = 64, MAX_TILES = 1024 };

typedef struct { int expert, row0, rows; } tile;

/* Tile j of expert e (rows row0[e] .. row0[e + 1] of the row list), as the table holds it. */
static tile tile_of(int e, int j, const int *row0)
{
    const int first = row0[e] + j * BM, left = row0[e + 1] - first;
    return (tile){e, first, left < BM ? left : BM};
}

/* permute.cuh's pair order (expert_offsets<.., true>): an expert's tiles two by two, then its
 * odd tile with the next odd expert's, a last odd one alone. */
static int pair_order(const int *counts, int E, tile *out)
{
    int tile0[MAX_E + 1] = {0}, row0[MAX_E + 1] = {0};
    for (int e = 0; e < E; e++)
        tile0[e + 1] = tile0[e] + (counts[e] + BM - 1) / BM, row0[e + 1] = row0[e] + counts[e];
    int n = 0;
    for (int e = 0; e < E; e++) /* the pairs of each expert's own tiles */
        for (int j = 0; j + 1 < tile0[e + 1] - tile0[e]; j += 2)
            for (int h = 0; h < 2; h++) out[n++] = tile_of(e, j + h, row0);
    for (int e = 0; e < E; e++) /* the odd tiles in expert order */
        if ((tile0[e + 1] - tile0[e]) % 2) out[n++] = tile_of(e, tile0[e + 1] - tile0[e] - 1, row0);
    return n;
}

typedef struct { size_t at, bytes; const char *name; } region;

static void inside(const region *r, size_t at, size_t bytes)
{
    if (at < r->at || at + bytes > r->at + r->bytes)
        ck_abort_msg("%s: bytes [%zu, %zu) outside the region [%zu, %zu)", r->name, at, at + bytes, r->at,
                     r->at + r->bytes);
}

/* The weight scales a consumer reads for output columns from c1 (wg_fp8_b_scale_offsets), k
 * tiles 0..k_tiles-1, expert e: inside [E, n_rows/128, K/128]. */
static void weight_scales(int e, int c1, int N, int K, int gated, int E)
{
    const int n_blocks = (gated ? 2 * N : N) / BLK, k_blocks = K / BLK;
    for (int g = 0; g < BN / 64; g++) {
        const int c = c1 + 64 * (gated ? g % 2 : g), row = (gated && g >= 2 ? N : 0) + (c < N - 1 ? c : N - 1);
        const long off = ((long)e * n_blocks + row / BLK) * k_blocks;
        for (int kt = 0; kt < (K + BLK - 1) / BLK; kt++)
            if (off + kt < 0 || off + kt >= (long)E * n_blocks * k_blocks)
                ck_abort_msg("weight scale %ld of %d", off + kt, E * n_blocks * k_blocks);
    }
}

/* One forward of T tokens, top-k of E, through the pair path of an fp8_block layer H x I. */
static void replay(int H, int I, int E, int k, long T, unsigned seed)
{
    moejit_spec *spec = NULL;
    ck_assert_int_eq(moejit_spec_parse("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a,tile=pair", &spec),
                     MOEJIT_OK);
    moejit_moe_args a;
    moejit_moe_args_init(&a);
    a.num_tokens = T, a.hidden = H, a.inter = I, a.num_experts = E, a.topk = k;
    mj_ws_layout w;
    mj_launch_layout(spec, &a, 0, 1, 2, &w);
    mj_tc_fp8_layout(spec, &a, &w);
    const long P = T * k;
    const region xq = {w.xq, w.xscale - w.xq, "xq"}, xs = {w.xscale, w.interq - w.xscale, "xscale"};
    const region iq = {w.interq, w.interscale - w.interq, "interq"}, is = {w.interscale, w.total - w.interscale, "interscale"};
    const region y = {w.y, w.xq - w.y, "y"};
    int counts[MAX_E] = {0}, *rows = malloc((size_t)P * sizeof *rows), *cur = calloc((size_t)E, sizeof *cur);
    int *ids = malloc((size_t)P * sizeof *ids);
    srand(seed);
    for (long t = 0; t < T; t++) /* k distinct experts per token */
        for (int j = 0; j < k; j++) {
            int e, dup;
            do {
                e = rand() % E, dup = 0;
                for (int i = 0; i < j; i++) dup |= ids[t * k + i] == e;
            } while (dup);
            ids[t * k + j] = e, counts[e]++;
        }
    int off[MAX_E + 1] = {0};
    for (int e = 0; e < E; e++) off[e + 1] = off[e] + counts[e];
    for (long i = 0; i < P; i++) rows[off[ids[i]] + cur[ids[i]]++] = (int)i;
    tile *tab = malloc(MAX_TILES * sizeof *tab);
    const int row_tiles = pair_order(counts, E, tab), units = (row_tiles + 1) / 2;
    ck_assert_int_le(row_tiles, MAX_TILES);
    for (int u = 0; u < units; u++)
        for (int rank = 0; rank < 2; rank++) {
            const int has2 = 2 * u + 1 < row_tiles, shared = !has2 || tab[2 * u + 1].expert == tab[2 * u].expert;
            const tile rt = rank == 0 ? tab[2 * u] : has2 ? tab[2 * u + 1] : (tile){tab[2 * u].expert, tab[2 * u].row0, 0};
            const int b_expert = shared ? tab[2 * u].expert : rt.expert;
            for (int col = 0; col < (I + BN / 2 - 1) / (BN / 2); col++) /* GEMM1: 128 columns per tile */
                weight_scales(b_expert, col * BN / 2, I, H, 1, E);
            for (int col = 0; col < (H + BN - 1) / BN; col++) weight_scales(b_expert, col * BN, H, I, 0, E);
            for (int m = 0; m < rt.rows; m++) {
                const long pos = rt.row0 + m, tok = rows[pos] / k;
                for (int kt = 0; kt < H / BLK; kt++) { /* GEMM1's producer: wg_fp8_copy_rows / _stage */
                    inside(&xq, w.xq + (size_t)(tok * H + kt * BLK), BLK);
                    inside(&xs, w.xscale + 4 * (size_t)(tok * (H / BLK) + kt), 4);
                }
                for (int g = 0; g < I / BLK; g++) { /* GEMM1's epilogue, GEMM2's producer */
                    inside(&iq, w.interq + (size_t)(pos * I + g * BLK), BLK);
                    inside(&is, w.interscale + 4 * (size_t)(pos * (I / BLK) + g), 4);
                }
                inside(&y, w.y + 2 * (size_t)rows[pos] * (size_t)H, 2 * (size_t)H); /* GEMM2's epilogue */
            }
        }
    free(rows), free(cur), free(ids), free(tab);
    moejit_spec_destroy(spec);
}

START_TEST(fp8_block_pair_path_stays_inside_its_buffers)
{
    static const long ts[] = {1024, 1000, 1100, 640, 300, 5};
    for (unsigned s = 0; s < 40; s++) replay(640, 384, 8, 2, ts[s % 6], s);
    for (unsigned s = 0; s < 4; s++) replay(7168, 2048, 64, 8, 512 + 37 * s, 100 + s);
}
END_TEST

static Suite *fp8_pair_replay_suite(void)
{
    Suite *s = suite_create("fp8_pair_replay");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fp8_block_pair_path_stays_inside_its_buffers);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(fp8_pair_replay_suite)
