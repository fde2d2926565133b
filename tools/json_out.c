/*
 * This file contains the CLI's JSON output helpers (tools/json_out.h).
 */
#include "tools/json_out.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "core/strbuf.h"

/* Set when an allocation of the document being built failed; cli_json_print reports it. */
static atomic_int g_failed;

static cJSON *checked(cJSON *item)
{
    if (!item) atomic_store(&g_failed, 1);
    return item;
}

cJSON *cli_json_str(const char *s)
{
    if (!s) return checked(cJSON_CreateNull());
    mj_buf b = MJ_BUF_INIT;
    mj_buf_put_utf8(&b, s, strlen(s));
    cJSON *item = mj_buf_ok(&b) ? cJSON_CreateString(b.data ? b.data : "") : NULL;
    mj_buf_free(&b);
    return checked(item);
}

cJSON *cli_json_int(long long v)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", v);
    return checked(cJSON_CreateRaw(text));
}

cJSON *cli_json_fixed(double v, int decimals)
{
    if (!isfinite(v)) return checked(cJSON_CreateNull());
    char text[400];
    snprintf(text, sizeof text, "%.*f", decimals, v);
    return checked(cJSON_CreateRaw(text));
}

cJSON *cli_json_add(cJSON *o, const char *name, cJSON *item)
{
    int ok = o && item && (name ? cJSON_AddItemToObject(o, name, item) : cJSON_AddItemToArray(o, item));
    if (ok) return item;
    cJSON_Delete(item);
    atomic_store(&g_failed, 1);
    return NULL;
}

int cli_json_print(cJSON *root)
{
    char *text = atomic_exchange(&g_failed, 0) || !root ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) {
        cli_error("out of memory writing the JSON output");
        return MJ_EXIT_FAIL;
    }
    puts(text);
    free(text);
    return MJ_EXIT_OK;
}
