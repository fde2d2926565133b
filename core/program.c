/*
 * This file contains the compiled-program value (mj_program): freeing it, and reading each
 * kernel's resources (registers, static shared memory, stack, spills) out of ptxas' verbose
 * report, which NVRTC copies into its log when compiled with --ptxas-options=--verbose.
 *
 * The report, as NVRTC 13.0 writes it (one block per entry function, in no fixed order;
 * non-inlined device functions get a "Function properties" block of their own, with mangled
 * names, and no "Used" line):
 *
 *   ptxas info    : 0 bytes gmem
 *   ptxas info    : Compiling entry function 'k_smem' for 'sm_80'
 *   ptxas info    : Function properties for k_smem
 *   ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size,
 *                   1024 bytes smem, 364 bytes cmem[0]            (one line in the log)
 *   ptxas info    : Compile time = 20.393 ms
 *
 * "N bytes smem" is left out when a kernel has no static shared memory (and "cmem" is left
 * out from sm_90 on), so a "Used" line without smem means 0 bytes, not unknown.
 */
#include "core/program.h"

#include <stdlib.h>
#include <string.h>

void mj_program_free(mj_program *p)
{
    if (!p) return;
    free(p->canonical_spec);
    free(p->arch);
    free(p->log);
    free(p->cubin);
    /* Zeroed so that a second free (or a free after a failed compile) is harmless. */
    memset(p, 0, sizeof *p);
}

/* The kernel of p named by [name, name + len), or NULL (a device function, or a kernel the
 * program does not list). */
static mj_kernel_info *find_kernel(mj_program *p, const char *name, size_t len)
{
    for (int i = 0; i < p->n_kernels && i < MJ_MAX_KERNELS; i++) {
        const char *k = p->kernels[i].name;
        if (strlen(k) == len && memcmp(k, name, len) == 0) return &p->kernels[i];
    }
    return NULL;
}

/* The integer just before " <unit>" in [line, end), e.g. before " bytes smem"; -1 when the
 * unit is not on the line. ptxas writes every quantity as "<digits> <unit>". */
static int number_before(const char *line, const char *end, const char *unit)
{
    size_t ulen = strlen(unit);
    for (const char *s = line; s + ulen <= end; s++) {
        if (memcmp(s, unit, ulen) != 0) continue;
        const char *d = s;
        while (d > line && d[-1] >= '0' && d[-1] <= '9') d--;
        if (d == s) continue; /* the unit without a number before it */
        long v = 0;
        for (const char *q = d; q < s && v <= 0x7fffffff; q++) v = v * 10 + (*q - '0');
        return v > 0x7fffffff ? -1 : (int)v;
    }
    return -1;
}

/* The name after `prefix` in [line, end), ending at `stop` (or at the end of the line);
 * returns its length and sets *name, or 0 when the line does not start that way. */
static size_t name_after(const char *line, const char *end, const char *prefix, char stop,
                         const char **name)
{
    const char *s = memmem(line, (size_t)(end - line), prefix, strlen(prefix));
    if (!s) return 0;
    s += strlen(prefix);
    const char *e = s;
    while (e < end && *e != stop && *e != ' ' && *e != '\r') e++;
    *name = s;
    return (size_t)(e - s);
}

void mj_program_parse_resources(mj_program *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_kernels && i < MJ_MAX_KERNELS; i++) {
        mj_kernel_info *k = &p->kernels[i];
        k->registers = k->shared_bytes = k->stack_bytes = -1;
        k->spill_store_bytes = k->spill_load_bytes = -1;
    }
    if (!p->log) return;

    /* "Used" lines belong to the entry function being compiled; "." lines belong to the
     * function of the last "Function properties" line, which may be a device function. */
    mj_kernel_info *entry = NULL, *props = NULL;
    for (const char *line = p->log; *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        const char *name;
        size_t len;
        if (end - line < 5 || memcmp(line, "ptxas", 5) != 0) {
            /* not part of the report (NVRTC warnings); leaves the state alone */
        } else if ((len = name_after(line, end, "Compiling entry function '", '\'', &name))) {
            entry = find_kernel(p, name, len);
            props = NULL;
        } else if ((len = name_after(line, end, "Function properties for ", '\n', &name))) {
            props = find_kernel(p, name, len);
        } else if (props && number_before(line, end, " bytes stack frame") >= 0) {
            props->stack_bytes = number_before(line, end, " bytes stack frame");
            props->spill_store_bytes = number_before(line, end, " bytes spill stores");
            props->spill_load_bytes = number_before(line, end, " bytes spill loads");
            props = NULL;
        } else if (entry && memmem(line, (size_t)(end - line), ": Used ", 7)) {
            entry->registers = number_before(line, end, " registers");
            int smem = number_before(line, end, " bytes smem");
            entry->shared_bytes = smem >= 0 ? smem : 0;
            entry = NULL;
        }
        line = *end ? end + 1 : end;
    }
}
