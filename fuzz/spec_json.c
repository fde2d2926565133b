/*
 * This file fuzzes the JSON spec parser: any input either is refused or gives a spec whose
 * canonical text parses to an equal spec, and whose JSON form parses back to an equal spec.
 */
#include "fuzz/fuzz_util.h"
#include "moejit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = mj_fuzz_cstr(data, n);
    moejit_spec *a = NULL, *b = NULL, *c = NULL;
    if (moejit_spec_from_json(text, &a) == MOEJIT_OK) {
        const char *canon = moejit_spec_canonical(a);
        MJ_FUZZ_REQUIRE(moejit_spec_parse(canon, &b) == MOEJIT_OK, "canonical '%s' does not parse: %s", canon,
                        moejit_last_error());
        MJ_FUZZ_REQUIRE(moejit_spec_equal(a, b), "'%s' round-trips to a different spec", canon);
        char json[4096];
        size_t len = 0;
        if (moejit_spec_to_json(a, json, sizeof json, &len) == MOEJIT_OK) {
            MJ_FUZZ_REQUIRE(moejit_spec_from_json(json, &c) == MOEJIT_OK, "its JSON '%s' does not parse: %s", json,
                            moejit_last_error());
            MJ_FUZZ_REQUIRE(moejit_spec_equal(a, c), "its JSON '%s' gives a different spec", json);
        }
    }
    moejit_spec_destroy(a);
    moejit_spec_destroy(b);
    moejit_spec_destroy(c);
    free(text);
    return 0;
}
