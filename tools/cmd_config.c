/*
 * This file contains `moejit config`: every setting of the one settings table (core/settings.h)
 * with its resolved value, where that value came from, its variable, default, allowed values
 * and reason, as text or as JSON.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/settings.h"
#include "core/strbuf.h"
#include "tools/cache_remote.h"
#include "tools/cli.h"
#include "tools/json_out.h"

static const char config_usage[] =
    "usage: moejit config [--json] [--cache-dir DIR]\n"
    "       moejit config --markdown\n"
    "\n"
    "Lists every setting moejit reads: its value, where the value came from (default,\n"
    "environment, command line), its environment variable, its scope (context: read once per\n"
    "moejit_context; cache: the disk cache's; process: one per process) and why it exists.\n"
    "A bad value is listed with the error that a context would refuse it with (exit 2).\n"
    "\n"
    "Options:\n"
    "  --json            one JSON document: {\"settings\": [{\"key\", \"env\", \"value\", \"origin\", ...}]}\n"
    "  --cache-dir DIR   the cache directory, as the other commands take it\n"
    "  --markdown        the table itself (no values): the README's settings table\n"
    "\n"
    "Example:\n"
    "  MOEJIT_DECODE=chain moejit config --json\n";

/* The value, origin and error (NULL when fine) of one setting, resolved alone so that one bad
 * value does not hide the others. */
typedef struct row {
    char *value;
    const char *origin;
    char *error;
} row;

static int resolve_rows(mj_settings *s, row *rows)
{
    int bad = 0;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const mj_setting_info *info = &mj_settings_table[i];
        moejit_status st = mj_settings_resolve_one((mj_setting_id)i, NULL, cli_settings(), s);
        rows[i].origin = mj_setting_origin_name(s->origin[i]);
        if (st != MOEJIT_OK) {
            bad = 1;
            rows[i].error = strdup(moejit_last_error());
            const char *given = s->origin[i] == MJ_ORIGIN_COMMAND_LINE ? cli_settings()[i] : getenv(info->env);
            rows[i].value = strdup(given ? given : "");
            continue;
        }
        mj_buf b = MJ_BUF_INIT;
        mj_settings_format(s, (mj_setting_id)i, &b);
        rows[i].value = strdup(b.data ? b.data : "");
        mj_buf_free(&b);
    }
    return bad;
}

static int print_json(const row *rows)
{
    cJSON *doc = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(doc, "settings");
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const mj_setting_info *info = &mj_settings_table[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "key", cli_json_str(info->key));
        cJSON_AddItemToObject(o, "env", cli_json_str(info->env));
        cJSON_AddItemToObject(o, "value", cli_json_str(rows[i].value ? rows[i].value : ""));
        cJSON_AddItemToObject(o, "origin", cli_json_str(rows[i].origin));
        cJSON_AddItemToObject(o, "type", cli_json_str(info->type));
        cJSON_AddItemToObject(o, "default", cli_json_str(info->default_text));
        cJSON_AddItemToObject(o, "allowed", cli_json_str(info->allowed));
        cJSON_AddItemToObject(o, "scope", cli_json_str(info->scope));
        cJSON_AddItemToObject(o, "option", info->option ? cli_json_str(info->option) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "why", cli_json_str(info->why));
        if (rows[i].error) cJSON_AddItemToObject(o, "error", cli_json_str(rows[i].error));
        cJSON_AddItemToArray(list, o);
    }
    /* Whether the remote tier is on, off or refused follows from several rows together. */
    mj_buf remote = MJ_BUF_INIT;
    cli_remote_state(&remote);
    cJSON_AddItemToObject(doc, "remote", cli_json_str(remote.data ? remote.data : ""));
    mj_buf_free(&remote);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (!text) {
        cli_error("config: out of memory");
        return MJ_EXIT_FAIL;
    }
    puts(text);
    free(text);
    return MJ_EXIT_OK;
}

static void print_text(const row *rows)
{
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const mj_setting_info *info = &mj_settings_table[i];
        printf("%-17s = %-40s (%s, %s, %s)\n    %s\n", info->key, rows[i].value ? rows[i].value : "", rows[i].origin,
               info->env, info->scope, info->why);
        if (rows[i].error) printf("    error: %s\n", rows[i].error);
    }
    mj_buf remote = MJ_BUF_INIT;
    cli_remote_state(&remote);
    printf("remote cache tier: %s\n", remote.data ? remote.data : "");
    mj_buf_free(&remote);
}

/* Appends text with '|' escaped, for a markdown table cell. */
static void cell(mj_buf *b, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++) {
        if (*p == '|') mj_buf_puts(b, "\\|");
        else mj_buf_append(b, p, 1);
    }
}

/* The table as markdown: what the README shows, generated so that it cannot drift. */
void cli_settings_markdown(mj_buf *b)
{
    mj_buf_puts(b, "| setting | environment | `moejit_options` | default | allowed | why |\n|---|---|---|---|---|---|\n");
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        const mj_setting_info *info = &mj_settings_table[i];
        mj_buf_printf(b, "| %s | `%s` | %s%s%s | ", info->key, info->env, info->option ? "`" : "",
                      info->option ? info->option : "-", info->option ? "`" : "");
        cell(b, info->default_text);
        mj_buf_puts(b, " | ");
        cell(b, info->allowed);
        mj_buf_puts(b, " | ");
        cell(b, info->why);
        mj_buf_puts(b, " |\n");
    }
}

int cmd_config(int argc, char **argv)
{
    static const struct option long_options[] = {{"json", no_argument, NULL, 'j'},
                                                 {"cache-dir", required_argument, NULL, 'C'},
                                                 {"help", no_argument, NULL, 'h'},
                                                 {"markdown", no_argument, NULL, 'm'},
                                                 {NULL, 0, NULL, 0}};
    int json = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'm': {
            mj_buf b = MJ_BUF_INIT;
            cli_settings_markdown(&b);
            fputs(b.data ? b.data : "", stdout);
            mj_buf_free(&b);
            return MJ_EXIT_OK;
        }
        case 'C': cli_set_cache_dir(optarg); break;
        case 'h': fputs(config_usage, stdout); return MJ_EXIT_OK;
        default: return cli_bad_option("config", c, argv);
        }
    }
    if (optind != argc) {
        cli_error("config: unexpected argument '%s' (see moejit config --help)", argv[optind]);
        return MJ_EXIT_USAGE;
    }
    mj_settings *s = calloc(1, sizeof *s);
    row *rows = calloc(MJ_SETTING_COUNT, sizeof *rows);
    if (!s || !rows) {
        free(s), free(rows);
        cli_error("config: out of memory");
        return MJ_EXIT_FAIL;
    }
    const int bad = resolve_rows(s, rows);
    int rc = MJ_EXIT_OK;
    if (json) rc = print_json(rows);
    else print_text(rows);
    for (int i = 0; i < MJ_SETTING_COUNT; i++) {
        if (rows[i].error) cli_error("config: %s", rows[i].error);
        free(rows[i].value), free(rows[i].error);
    }
    free(rows), free(s);
    return rc == MJ_EXIT_OK && bad ? MJ_EXIT_USAGE : rc;
}
