/*
 * This file contains the tests of tools/bench_floor.c: the roofline floor `moejit bench layer`
 * reports against, and the count of the experts a benchmark input set routes to (the bytes
 * the floor and the TB/s column are computed on).
 */
#include <check.h>
#include <math.h>

#include "tools/bench_floor.h"
#include "lib/check_main.h"

/* bench_routed_experts succeeds on (B, E, k) and counts `want` experts */
static void routed_is(const float *lg, long long B, int E, int k, int want)
{
    int n = -1;
    ck_assert_int_eq(bench_routed_experts(lg, B, E, k, &n), MOEJIT_OK);
    ck_assert_int_eq(n, want);
}

START_TEST(uniform_count_is_the_expected_distinct_experts)
{
    ck_assert_double_eq_tol(bench_uniform_experts(8, 2, 1), 2.0, 1e-12);
    ck_assert_double_eq_tol(bench_uniform_experts(8, 2, 2), 3.5, 1e-12); /* 8·(1 − 0.75²) */
    ck_assert_double_eq_tol(bench_uniform_experts(128, 8, 1), 8.0, 1e-12);
    ck_assert_double_eq_tol(bench_uniform_experts(8, 8, 5), 8.0, 1e-12);
    ck_assert_double_eq(bench_uniform_experts(8, 2, 0), 0.0);
}
END_TEST

START_TEST(routed_count_is_the_distinct_selected_experts)
{
    /* E = 8, k = 2: token 0 takes {3, 5}, token 1 {5, 1}, token 2 {3, 5} again */
    const float lg[3 * 8] = {
        0, 0, 0, 4, 0, 3, 0, 0, /* */
        0, 2, 0, 0, 0, 5, 0, 0, /* */
        -1, -1, -1, 7, -1, 6, -1, -1,
    };
    routed_is(lg, 1, 8, 2, 2);
    routed_is(lg, 2, 8, 2, 3);
    routed_is(lg, 3, 8, 2, 3);
    routed_is(lg, 0, 8, 2, 0);
}
END_TEST

START_TEST(routed_count_breaks_ties_to_the_lower_id)
{
    /* all logits equal: the kernels take experts 0 and 1, so two tokens read two experts */
    const float lg[2 * 4] = {1, 1, 1, 1, 1, 1, 1, 1};
    routed_is(lg, 2, 4, 2, 2);
    routed_is(lg, 1, 4, 4, 4); /* k = E: every expert */
}
END_TEST

START_TEST(routed_count_rejects_shapes_the_routing_does_not_take)
{
    const float lg[4] = {0, 1, 2, 3};
    int n = -1;
    ck_assert_int_eq(bench_routed_experts(lg, 1, 4, 5, &n), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(bench_routed_experts(lg, 1, 4, 0, &n), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bench_routed_experts(lg, 1, 0, 1, &n), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(bench_routed_experts(lg, -1, 4, 1, &n), MOEJIT_ERR_INVALID_ARGUMENT);
}
END_TEST

static double bf16_bytes(int H, int I, int gated) { return bench_expert_weight_bytes(H, I, gated, 2.0, -1); }

START_TEST(floor_is_bandwidth_or_compute_bound)
{
    /* Mixtral-8x7B at B = 1: two experts' W1 (2I x H) and W2 (H x I) in bf16 over 4.48 TB/s */
    bench_floor f = bench_floor_of(4096, 14336, 8, 2, 1, 1, 2.0, bf16_bytes(4096, 14336, 1), 4.48, 790.0);
    ck_assert_double_eq_tol(f.weight_bytes, 2.0 * 3 * 14336 * 4096 * 2, 0.5);
    ck_assert_double_eq_tol(f.floor_us, f.weight_bytes / 4.48e6, 1e-9);
    ck_assert_double_eq_tol(f.e_uniform, 2.0, 1e-12);
    ck_assert_double_eq(f.e_read, 2.0);
    /* the bytes follow the experts read, not the uniform count */
    bench_floor g = bench_floor_of(4096, 14336, 8, 2, 1, 2, 3.75, bf16_bytes(4096, 14336, 1), 4.48, 790.0);
    ck_assert_double_eq_tol(g.e_uniform, 3.5, 1e-12);
    ck_assert_double_eq_tol(g.weight_bytes / f.weight_bytes, 3.75 / 2.0, 1e-12);
    /* ungated (relu2): W1 has I rows; at 16384 tokens the floor is the FLOPs' */
    bench_floor h = bench_floor_of(2688, 1856, 128, 6, 0, 16384, 128.0, bf16_bytes(2688, 1856, 0), 4.48, 790.0);
    ck_assert_double_eq_tol(h.flops, 2.0 * 16384 * 6 * 2 * 1856 * 2688, 1.0);
    ck_assert_double_eq_tol(h.floor_us, h.flops / 790e6, 1e-9);
    ck_assert(h.floor_us > h.weight_bytes / 4.48e6);
}
END_TEST

START_TEST(fp8_floor_counts_one_byte_per_weight_and_the_scales)
{
    /* DeepSeek-V3 (H 7168, I 2048, gated): W1 4096 x 7168, W2 7168 x 2048 */
    const double w = (2.0 * 2048 + 2048) * 7168;
    ck_assert_double_eq_tol(bench_expert_weight_bytes(7168, 2048, 1, 2.0, -1), 2.0 * w, 0.5);
    ck_assert_double_eq_tol(bench_expert_weight_bytes(7168, 2048, 1, 1.0, 0), w + 8.0, 0.5);
    /* 128 x 128 blocks: W1 32 x 56, W2 56 x 16 */
    ck_assert_double_eq_tol(bench_expert_weight_bytes(7168, 2048, 1, 1.0, 128), w + 4.0 * (32 * 56 + 56 * 16), 0.5);
    /* a partial block counts whole: H 264 -> 3 blocks, I 200 ungated -> 2 */
    ck_assert_double_eq_tol(bench_expert_weight_bytes(264, 200, 0, 1.0, 128), 400.0 * 264 + 4.0 * (2 * 3 + 3 * 2),
                            0.5);
    /* half the bf16 bytes (and a little): the floor of a bandwidth-bound point about halves */
    bench_floor b = bench_floor_of(7168, 2048, 256, 8, 1, 64, 220.75, bf16_bytes(7168, 2048, 1), 4.48, 790.0);
    bench_floor e = bench_floor_of(7168, 2048, 256, 8, 1, 64, 220.75,
                                   bench_expert_weight_bytes(7168, 2048, 1, 1.0, 128), 4.48, 790.0);
    ck_assert(e.weight_bytes > 0.5 * b.weight_bytes && e.weight_bytes < 0.501 * b.weight_bytes);
    ck_assert_double_eq_tol(e.floor_us, e.weight_bytes / 4.48e6, 1e-9);
    ck_assert_double_eq_tol(e.flops, b.flops, 1e-3);
}
END_TEST

static Suite *bench_floor_suite(void)
{
    Suite *s = suite_create("bench_floor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, uniform_count_is_the_expected_distinct_experts);
    tcase_add_test(tc, routed_count_is_the_distinct_selected_experts);
    tcase_add_test(tc, routed_count_breaks_ties_to_the_lower_id);
    tcase_add_test(tc, routed_count_rejects_shapes_the_routing_does_not_take);
    tcase_add_test(tc, floor_is_bandwidth_or_compute_bound);
    tcase_add_test(tc, fp8_floor_counts_one_byte_per_weight_and_the_scales);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(bench_floor_suite)
