/*
 * This file contains the encoders of the compile worker's wire format (nvrtc_wire.h).
 */
#include "codegen/nvrtc_wire.h"

void mj_wire_put_u32(mj_buf *b, uint32_t v)
{
    unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    mj_buf_append(b, c, 4);
}

void mj_wire_put_str(mj_buf *b, const void *data, size_t n)
{
    mj_wire_put_u32(b, (uint32_t)n);
    mj_buf_append(b, data, n);
}
