/*
 * This file contains the tests of the include closure (codegen/include_closure.c) and of the
 * key that hashes it: the scan over-approximates every include form (under #if, in comments,
 * spliced, digraphs, __has_include) and gives up to every header on one it cannot name; an
 * edit of a wgmma-only template leaves a simt key alone and changes a wgmma key; and each
 * backend's source compiles with exactly its closure handed to NVRTC.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "codegen/build_inputs.h"
#include "codegen/emit.h"
#include "codegen/include_closure.h"
#include "codegen/nvrtc_compile.h"
#include "core/spec.h"
#include "core/status.h"

#define MAX_H 8

/* A synthetic header set: names[i] with texts[i]. */
typedef struct hset {
    mj_header h[MAX_H];
    size_t n;
    unsigned char reached[MAX_H];
} hset;

static void add(hset *s, const char *name, const char *text)
{
    ck_assert_uint_lt(s->n, MAX_H);
    s->h[s->n++] = (mj_header){name, text, strlen(text)};
}

/* The closure of source over s, as a string of the reached names ("a.cuh b.cuh "). */
static const char *closure(hset *s, const char *source)
{
    static char out[512];
    ck_assert_int_eq(mj_include_closure(source, strlen(source), s->h, s->n, s->reached), MOEJIT_OK);
    out[0] = '\0';
    for (size_t i = 0; i < s->n; i++)
        if (s->reached[i]) {
            strcat(out, s->h[i].name);
            strcat(out, " ");
        }
    return out;
}

static void base_set(hset *s)
{
    memset(s, 0, sizeof *s);
    add(s, "a.cuh", "#include \"b.cuh\"\nint a;\n");
    add(s, "b.cuh", "#pragma once\n#include \"common/c.h\"\n");
    add(s, "common/c.h", "int c;\n");
    add(s, "d.cuh", "#include \"a.cuh\"\nint d;\n");
    add(s, "e.cuh", "int e;\n");
}

START_TEST(closure_is_transitive_and_leaves_out_unreached_headers)
{
    hset s;
    base_set(&s);
    ck_assert_str_eq(closure(&s, "#include \"a.cuh\"\n"), "a.cuh b.cuh common/c.h ");
    ck_assert_str_eq(closure(&s, "#include \"d.cuh\"\n"), "a.cuh b.cuh common/c.h d.cuh ");
    ck_assert_str_eq(closure(&s, "int main;\n"), "");
    /* A system header that is no template is NVRTC's own (keyed by NVRTC's identity). */
    ck_assert_str_eq(closure(&s, "#include <string.h>\n#include <e.cuh>\n"), "e.cuh ");
}
END_TEST

START_TEST(conditional_and_commented_includes_count)
{
    hset s;
    base_set(&s);
    ck_assert_str_eq(closure(&s, "#if 0\n#include \"e.cuh\"\n#endif\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#ifndef __CUDACC_RTC__\n#  include \"e.cuh\"\n#else\n#endif\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "// #include \"e.cuh\"\n/* #include \"common/c.h\" */\n"), "common/c.h e.cuh ");
    /* A header that includes another only under a macro still reaches it. */
    s.h[4] = (mj_header){"e.cuh", "#ifdef WANT_C\n#include \"common/c.h\"\n#endif\n", 0};
    s.h[4].size = strlen(s.h[4].data);
    ck_assert_str_eq(closure(&s, "#include \"e.cuh\"\n"), "common/c.h e.cuh ");
}
END_TEST

START_TEST(every_spelling_of_an_include_counts)
{
    hset s;
    base_set(&s);
    ck_assert_str_eq(closure(&s, "  #\tinclude \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "# /* c */ include /* c */ \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "%:include \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#inc\\\nlude \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#include \"e.\\\r\ncuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#include_next \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#import \"e.cuh\"\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#include \"./e.cuh\"\n"), "e.cuh ");
    /* __has_include reads whether a header is there, so the header set decides it. */
    ck_assert_str_eq(closure(&s, "#if __has_include(\"e.cuh\")\n#endif\n"), "e.cuh ");
    ck_assert_str_eq(closure(&s, "#if defined(__has_include)\n#endif\n"), "");
    /* Not an include: a macro's stringizing, a longer directive name. */
    ck_assert_str_eq(closure(&s, "#define S(x) #x\n#includes \"e.cuh\"\n"), "");
}
END_TEST

START_TEST(a_name_matches_relative_to_any_folder)
{
    hset s;
    base_set(&s);
    /* "c.h" from anywhere may resolve to common/c.h (relative to the including file). */
    ck_assert_str_eq(closure(&s, "#include \"c.h\"\n"), "common/c.h ");
    /* ... but "on/c.h" is not common/c.h, nor is "ommon/c.h". */
    ck_assert_str_eq(closure(&s, "#include \"on/c.h\"\n#include \"ommon/c.h\"\n"), "");
}
END_TEST

START_TEST(an_include_the_scan_cannot_name_reaches_every_header)
{
    const char *unnamable[] = {
        "#include HEADER_NAME\n",      "#include \"../e.cuh\"\n", "#include \"/abs/e.cuh\"\n",
        "#include \"e.cuh\n",           "#if __has_include(NAME)\n#endif\n", "#include \"a//e.cuh\"\n",
    };
    for (size_t i = 0; i < sizeof unnamable / sizeof unnamable[0]; i++) {
        hset s;
        base_set(&s);
        ck_assert_msg(strcmp(closure(&s, unnamable[i]), "a.cuh b.cuh common/c.h d.cuh e.cuh ") == 0,
                      "%s", unnamable[i]);
    }
    /* The same from inside a reached header. */
    hset s;
    base_set(&s);
    s.h[2] = (mj_header){"common/c.h", "#include MACRO\n", 15};
    ck_assert_str_eq(closure(&s, "#include \"a.cuh\"\n"), "a.cuh b.cuh common/c.h d.cuh e.cuh ");
    ck_assert_str_eq(closure(&s, "#include \"e.cuh\"\n"), "e.cuh ");
}
END_TEST

START_TEST(include_cycles_end)
{
    hset s;
    memset(&s, 0, sizeof s);
    add(&s, "x.cuh", "#include \"y.cuh\"\n");
    add(&s, "y.cuh", "#include \"x.cuh\"\n#include \"y.cuh\"\n");
    add(&s, "z.cuh", "");
    ck_assert_str_eq(closure(&s, "#include \"y.cuh\"\n"), "x.cuh y.cuh ");
}
END_TEST

/* ---- the embedded templates ------------------------------------------------------------- */

static size_t embedded_index(const char *name)
{
    for (size_t i = 0; i < mj_embedded_headers_len; i++)
        if (strcmp(mj_embedded_headers[i].name, name) == 0) return i;
    ck_abort_msg("no embedded header %s", name);
    return 0;
}

static int has_header(const mj_build_inputs *in, const char *name)
{
    for (size_t i = 0; i < in->n_headers; i++)
        if (strcmp(in->headers[i].name, name) == 0) return 1;
    return 0;
}

static void inputs(const char *spec_text, mj_build_inputs *in, const mj_header *h, size_t n)
{
    moejit_spec *spec = NULL;
    ck_assert_int_eq(moejit_spec_parse(spec_text, &spec), MOEJIT_OK);
    ck_assert_int_eq(moejit_check_support(spec), MOEJIT_OK);
    moejit_status st = h ? mj_build_inputs_make_with(spec, h, n, in) : mj_build_inputs_make(spec, in);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", spec_text, moejit_last_error());
    moejit_spec_destroy(spec);
}

static const char *const SIMT = "backend=simt,arch=sm_90a";
static const char *const MMA = "backend=mma,arch=sm_90a";
static const char *const WGMMA = "backend=wgmma,arch=sm_90a";

START_TEST(each_backend_reads_only_its_templates)
{
    mj_build_inputs s, m, w;
    inputs(SIMT, &s, NULL, 0);
    inputs(MMA, &m, NULL, 0);
    inputs(WGMMA, &w, NULL, 0);
    ck_assert_uint_gt(s.n_headers, 0);
    ck_assert_uint_lt(s.n_headers, mj_embedded_headers_len);
    ck_assert_uint_lt(m.n_headers, mj_embedded_headers_len);
    ck_assert_uint_lt(w.n_headers, mj_embedded_headers_len);
    ck_assert(has_header(&s, "simt_layer.cuh") && has_header(&s, "common/types.cuh"));
    ck_assert(!has_header(&s, "wgmma_ptx.cuh") && !has_header(&s, "mma_layer.cuh"));
    ck_assert(has_header(&m, "mma_layer.cuh") && !has_header(&m, "wgmma_ptx.cuh"));
    ck_assert(has_header(&w, "wgmma_ptx.cuh") && !has_header(&w, "simt_layer.cuh"));
    /* The preimage lists exactly these headers, in the embedded order. */
    const mj_build_inputs *all[] = {&s, &m, &w};
    for (int k = 0; k < 3; k++) {
        const char *p = all[k]->preimage.data;
        size_t lines = 0;
        for (const char *q = p; (q = strstr(q, "\nheader ")); q++) lines++;
        ck_assert_uint_eq(lines, all[k]->n_headers);
        for (size_t i = 0; i + 1 < all[k]->n_headers; i++)
            ck_assert_uint_lt(embedded_index(all[k]->headers[i].name), embedded_index(all[k]->headers[i + 1].name));
    }
    mj_build_inputs_free(&s);
    mj_build_inputs_free(&m);
    mj_build_inputs_free(&w);
}
END_TEST

START_TEST(keys_are_stable_for_the_same_inputs)
{
    mj_build_inputs a, b, c;
    inputs(WGMMA, &a, NULL, 0);
    inputs(WGMMA, &b, NULL, 0);
    /* A copy of the embedded table (hashed here, not prewarmed) gives the same key. */
    inputs(WGMMA, &c, mj_embedded_headers, mj_embedded_headers_len);
    mj_header *copy = malloc(mj_embedded_headers_len * sizeof *copy);
    memcpy(copy, mj_embedded_headers, mj_embedded_headers_len * sizeof *copy);
    mj_build_inputs d;
    inputs(WGMMA, &d, copy, mj_embedded_headers_len);
    ck_assert_str_eq(a.key.hex, b.key.hex);
    ck_assert_str_eq(a.key.hex, c.key.hex);
    ck_assert_str_eq(a.key.hex, d.key.hex);
    ck_assert_str_eq(a.preimage.data, d.preimage.data);
    mj_build_inputs_free(&a);
    mj_build_inputs_free(&b);
    mj_build_inputs_free(&c);
    mj_build_inputs_free(&d);
    free(copy);
}
END_TEST

/* An edit of name (one byte appended) in a copy of the embedded templates. */
static mj_header *edited_templates(const char *name, char **text)
{
    mj_header *copy = malloc(mj_embedded_headers_len * sizeof *copy);
    memcpy(copy, mj_embedded_headers, mj_embedded_headers_len * sizeof *copy);
    mj_header *h = &copy[embedded_index(name)];
    *text = malloc(h->size + 2);
    memcpy(*text, h->data, h->size);
    (*text)[h->size] = '\n';
    (*text)[h->size + 1] = '\0';
    h->data = *text;
    h->size++;
    return copy;
}

/* 1 when an edit of template name changes the key of spec_text. */
static int edit_changes_key(const char *name, const char *spec_text)
{
    char *text;
    mj_header *copy = edited_templates(name, &text);
    mj_build_inputs before, after;
    inputs(spec_text, &before, NULL, 0);
    inputs(spec_text, &after, copy, mj_embedded_headers_len);
    int changed = strcmp(before.key.hex, after.key.hex) != 0;
    mj_build_inputs_free(&before);
    mj_build_inputs_free(&after);
    free(copy);
    free(text);
    return changed;
}

START_TEST(editing_a_template_changes_only_the_keys_that_read_it)
{
    ck_assert(edit_changes_key("wgmma_ptx.cuh", WGMMA));
    ck_assert(!edit_changes_key("wgmma_ptx.cuh", SIMT));
    ck_assert(!edit_changes_key("wgmma_ptx.cuh", MMA));
    ck_assert(edit_changes_key("common/wgmma_params.h", WGMMA));
    ck_assert(!edit_changes_key("common/wgmma_params.h", SIMT));
    ck_assert(edit_changes_key("simt_mainloop.cuh", SIMT));
    ck_assert(!edit_changes_key("simt_mainloop.cuh", WGMMA));
    ck_assert(edit_changes_key("mma_layer.cuh", MMA));
    ck_assert(!edit_changes_key("mma_layer.cuh", WGMMA));
    /* A header every backend reads changes every key. */
    ck_assert(edit_changes_key("common/types.cuh", SIMT));
    ck_assert(edit_changes_key("common/types.cuh", MMA));
    ck_assert(edit_changes_key("common/types.cuh", WGMMA));
}
END_TEST

/* ---- NVRTC reads no more than the closure -------------------------------------------------- */

static void compile_with_closure(const char *spec_text)
{
    mj_build_inputs in;
    inputs(spec_text, &in, NULL, 0);
    mj_compile_request req = {&in.source, in.arch, in.headers, in.n_headers, 600};
    mj_program prog;
    moejit_status st = mj_nvrtc_compile(&req, &prog);
    ck_assert_msg(st == MOEJIT_OK, "%s with its %zu closure headers: %s", spec_text, in.n_headers,
                  moejit_last_error());
    ck_assert_uint_gt(prog.cubin_len, 0);
    mj_program_free(&prog);
    /* Without the layer header (in the closure) it does not compile: the set is what is read. */
    size_t k = 0;
    for (size_t i = 0; i < in.n_headers; i++)
        if (strstr(in.headers[i].name, "_layer.cuh") == NULL) in.headers[k++] = in.headers[i];
    ck_assert_uint_lt(k, in.n_headers);
    req.n_headers = k;
    ck_assert_int_eq(mj_nvrtc_compile(&req, &prog), MOEJIT_ERR_COMPILE);
    mj_program_free(&prog);
    mj_build_inputs_free(&in);
}

START_TEST(simt_compiles_with_exactly_its_closure) { compile_with_closure(SIMT); }
END_TEST
START_TEST(mma_compiles_with_exactly_its_closure) { compile_with_closure(MMA); }
END_TEST
START_TEST(wgmma_compiles_with_exactly_its_closure) { compile_with_closure(WGMMA); }
END_TEST

static Suite *include_closure_suite(void)
{
    Suite *s = suite_create("include_closure");
    TCase *tc = tcase_create("scan");
    tcase_add_test(tc, closure_is_transitive_and_leaves_out_unreached_headers);
    tcase_add_test(tc, conditional_and_commented_includes_count);
    tcase_add_test(tc, every_spelling_of_an_include_counts);
    tcase_add_test(tc, a_name_matches_relative_to_any_folder);
    tcase_add_test(tc, an_include_the_scan_cannot_name_reaches_every_header);
    tcase_add_test(tc, include_cycles_end);
    suite_add_tcase(s, tc);
    TCase *key = tcase_create("key");
    tcase_add_test(key, each_backend_reads_only_its_templates);
    tcase_add_test(key, keys_are_stable_for_the_same_inputs);
    tcase_add_test(key, editing_a_template_changes_only_the_keys_that_read_it);
    suite_add_tcase(s, key);
    TCase *nvrtc = tcase_create("nvrtc");
    tcase_set_timeout(nvrtc, 1200);
    tcase_add_test(nvrtc, simt_compiles_with_exactly_its_closure);
    if (!mj_test_quick()) {
        tcase_add_test(nvrtc, mma_compiles_with_exactly_its_closure);
        tcase_add_test(nvrtc, wgmma_compiles_with_exactly_its_closure);
    }
    suite_add_tcase(s, nvrtc);
    return s;
}

MJ_CHECK_MAIN(include_closure_suite)
