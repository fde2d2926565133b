/*
 * This file fuzzes the activation parser: any input either is refused or gives an activation
 * whose canonical text parses back to an equal activation.
 */
#include "fuzz/fuzz_util.h"
#include "moejit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *text = mj_fuzz_cstr(data, n);
    moejit_activation *a = NULL, *b = NULL;
    if (moejit_activation_parse(text, &a) == MOEJIT_OK) {
        char canon[1024];
        MJ_FUZZ_REQUIRE(moejit_activation_to_string(a, canon, sizeof canon, NULL) == MOEJIT_OK, "to_string: %s",
                        moejit_last_error());
        MJ_FUZZ_REQUIRE(moejit_activation_parse(canon, &b) == MOEJIT_OK, "canonical '%s' does not parse: %s", canon,
                        moejit_last_error());
        MJ_FUZZ_REQUIRE(moejit_activation_equal(a, b), "'%s' round-trips to a different activation", canon);
    }
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);
    free(text);
    return 0;
}
