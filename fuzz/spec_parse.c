/*
 * This file fuzzes the spec text parser: any input either is refused or parses to a spec
 * whose canonical form parses again to an equal spec with the same canonical form.
 */
#include "fuzz/fuzz_util.h"
#include "moejit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = mj_fuzz_cstr(data, n);
    moejit_spec *a = NULL, *b = NULL;
    if (moejit_spec_parse(text, &a) == MOEJIT_OK) {
        const char *canon = moejit_spec_canonical(a);
        MJ_FUZZ_REQUIRE(canon != NULL, "no canonical form for '%s'", text);
        MJ_FUZZ_REQUIRE(moejit_spec_parse(canon, &b) == MOEJIT_OK, "canonical '%s' does not parse: %s", canon,
                        moejit_last_error());
        MJ_FUZZ_REQUIRE(moejit_spec_equal(a, b), "'%s' round-trips to a different spec", canon);
        MJ_FUZZ_REQUIRE(strcmp(canon, moejit_spec_canonical(b)) == 0, "'%s' re-canonicalises to '%s'", canon,
                        moejit_spec_canonical(b));
    }
    moejit_spec_destroy(a);
    moejit_spec_destroy(b);
    free(text);
    return 0;
}
