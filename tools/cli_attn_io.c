/* tools/cli_attn_io.c: option parsing and tensor I/O shared by the attention commands
 * (`lowp attn`, `lowp gpu attn`). Every failure is one line through lowp_cli_fail. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lowp/tensor.h"

/* A float tensor of rank 3 with finite values, as a malloc'ed copy. */
float *lowp_cli_load_f32_3(const char *opt, const char *path, size_t dims[3], const char *expect)
{
    lowp_tensor t;
    char why[256];
    if (lowp_tensor_load_float(path, NULL, &t, NULL, NULL, why, sizeof why))
        lowp_cli_fail("%s %s: %s", opt, path, why);
    if (t.ndim != 3) {
        char sh[128] = "";
        size_t used = 0;
        for (int k = 0; k < t.ndim && used + 24 < sizeof sh; k++)
            used += (size_t)snprintf(sh + used, sizeof sh - used, "%s%zu", k ? ", " : "", t.shape[k]);
        lowp_cli_fail("%s %s: shape [%s] is not %s", opt, path, sh, expect);
    }
    for (int k = 0; k < 3; k++) {
        dims[k] = t.shape[k];
        if (dims[k] == 0)
            lowp_cli_fail("%s %s: shape [%zu, %zu, %zu] has a zero dimension (expected %s)", opt, path,
                          t.shape[0], t.shape[1], t.shape[2], expect);
    }
    const float *x = (const float *)(const void *)t.data;
    for (size_t i = 0; i < t.count; i++)
        if (!isfinite(x[i])) {
            size_t d = i % dims[2], h = (i / dims[2]) % dims[1], r = i / dims[2] / dims[1];
            lowp_cli_fail("%s %s: element [%zu, %zu, %zu] is %s (inputs must be finite)", opt, path, r, h, d,
                          isnan(x[i]) ? "NaN" : "infinite");
        }
    /* the tensor's own buffer (calloc'ed by lowp_tensor_alloc), handed over: no second copy */
    float *out = (float *)(void *)t.data;
    t.data = NULL;
    lowp_tensor_free(&t);
    return out;
}

/* An integer vector (any integer dtype), each entry checked into int32. */
int32_t *lowp_cli_load_page_table(const char *path, size_t *n)
{
    lowp_tensor_file tf;
    lowp_tensor_file_init(&tf);
    char why[256];
    if (lowp_tensor_file_kind_of(path) != LOWP_FILE_NPY)
        lowp_cli_fail("--page-table %s: expected a .npy file of integers", path);
    if (lowp_tensor_file_read(path, &tf, why, sizeof why))
        lowp_cli_fail("--page-table %s: %s", path, why);
    const lowp_tensor *t = &tf.tensors[0];
    if (t->ndim != 1)
        lowp_cli_fail("--page-table %s: expected a vector of page indices, got %d dimensions", path, t->ndim);
    int is_signed;
    switch (t->dtype) {
    case LOWP_DT_I8: case LOWP_DT_I16: case LOWP_DT_I32: case LOWP_DT_I64: is_signed = 1; break;
    case LOWP_DT_U8: case LOWP_DT_U16: case LOWP_DT_U32: case LOWP_DT_U64: is_signed = 0; break;
    default:
        lowp_cli_fail("--page-table %s: dtype %s is not an integer type", path, lowp_dtype_name(t->dtype));
    }
    size_t es = lowp_dtype_size(t->dtype);
    int32_t *out = malloc((t->count ? t->count : 1) * sizeof *out);
    if (out == NULL)
        lowp_cli_fail("out of memory for --page-table");
    /* A bad entry frees everything before failing: a failing run leaks nothing (the
     * sanitized CLI tests check the exit paths too). */
    char bad[256] = "";
    for (size_t i = 0; i < t->count && bad[0] == '\0'; i++) {
        const unsigned char *p = t->data + i * es;
        uint64_t u = 0;
        for (size_t b = 0; b < es; b++)
            u |= (uint64_t)p[b] << (8 * b);
        int64_t v;
        if (is_signed) {
            if (es < 8 && (u >> (8 * es - 1)) & 1u) /* sign-extend */
                u |= ~(uint64_t)0 << (8 * es);
            memcpy(&v, &u, sizeof v);
        } else if (u > (uint64_t)INT64_MAX) {
            snprintf(bad, sizeof bad, "entry %zu (%llu) is out of range", i, (unsigned long long)u);
            break;
        } else {
            v = (int64_t)u;
        }
        if (v < 0)
            snprintf(bad, sizeof bad, "entry %zu is page %lld, a negative page index", i, (long long)v);
        else if (v > INT32_MAX)
            snprintf(bad, sizeof bad, "entry %zu is page %lld, beyond int32 page indices", i, (long long)v);
        else
            out[i] = (int32_t)v;
    }
    if (bad[0] != '\0') {
        free(out);
        lowp_tensor_file_free(&tf);
        lowp_cli_fail("--page-table %s: %s", path, bad);
    }
    *n = t->count;
    lowp_tensor_file_free(&tf);
    return out;
}

/* A tensor output: .npy or .safetensors by extension (anything else is refused, so that
 * a name never promises a format the bytes are not in), writable by lowp_out_open's rules.
 * Checked before any work, so that a second output that cannot be written never leaves
 * the first one behind. */
void lowp_cli_check_writable(const char *opt, const char *path)
{
    if (lowp_tensor_file_kind_of(path) == LOWP_FILE_UNKNOWN)
        lowp_cli_fail("%s %s: the name ends neither in .npy nor in .safetensors", opt, path);
    lowp_out_check(opt, path);
}

void lowp_cli_write_tensor(const char *path, lowp_dtype dt, const void *x, int ndim, const size_t *shape)
{
    lowp_tensor_file tf;
    char why[256];
    lowp_tensor_file_init(&tf);
    lowp_tensor *t = lowp_tensor_file_add(&tf, "out", dt, ndim, shape, why, sizeof why);
    if (t == NULL)
        lowp_cli_fail("%s", why);
    memcpy(t->data, x, t->nbytes);
    lowp_tensor_file_kind kind = lowp_tensor_file_kind_of(path);
    if (kind == LOWP_FILE_UNKNOWN)
        lowp_cli_fail("%s: the name ends neither in .npy nor in .safetensors", path);
    FILE *o = lowp_out_open(path, 1);
    if (kind == LOWP_FILE_NPY ? lowp_npy_emit(o, t, why, sizeof why)
                              : lowp_safetensors_emit(o, &tf, why, sizeof why))
        lowp_cli_fail("cannot write '%s': %s", path, why);
    lowp_out_commit(o);
    lowp_tensor_file_free(&tf);
}

void lowp_cli_write_f32_3(const char *path, const float *x, size_t d0, size_t d1, size_t d2)
{
    size_t shape[3] = {d0, d1, d2};
    lowp_cli_write_tensor(path, LOWP_DT_F32, x, 3, shape);
}
