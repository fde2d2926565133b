/*
 * json_out.h — the CLI's JSON output: documents built with cJSON, every string made valid
 * UTF-8 first (cJSON copies bytes as they are, and a path or an environment value may hold
 * any byte), numbers printed exactly as the text output prints them.
 *
 * A failed allocation anywhere is remembered, and cli_json_print then reports it instead of
 * printing a document with a field missing.
 */
#ifndef MJ_TOOLS_JSON_OUT_H
#define MJ_TOOLS_JSON_OUT_H

#include <cJSON.h>

/* A string item holding s with ill-formed UTF-8 replaced by U+FFFD; NULL s gives null. */
cJSON *cli_json_str(const char *s);
/* An integer item, exact (cJSON's doubles round above 2^53). */
cJSON *cli_json_int(long long v);
/* A number item with `decimals` digits after the point (printf's %.*f); null when not finite. */
cJSON *cli_json_fixed(double v, int decimals);
/* Adds item to o under name (to the array o when name is NULL) and returns it; NULL (and
 * item deleted) when o or item is NULL or the add fails. */
cJSON *cli_json_add(cJSON *o, const char *name, cJSON *item);
/* Prints root on stdout as one line and deletes it; MJ_EXIT_OK, or MJ_EXIT_FAIL after an
 * error when any allocation of the document failed. */
int cli_json_print(cJSON *root);

#endif
