/* tools/cmd_dequantize.c: `lowp dequantize`, the inverse of `lowp quantize`.
 *
 *   lowp dequantize --in Y.safetensors --out Z.npy [--dtype f32|f64]
 *
 * Reads the layout "lowp-blocked-v1" (tools/cmd_quantize.c states it), checks every
 * tensor and metadata entry it relies on against each other, computes
 * code * scale * global_scale with lowp_block_dequantize_f64 (exact) or _f32 (that exact
 * value rounded once), drops the padding and moves the blocked axis back: Z has the
 * input's shape and axis order. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/block.h"
#include "lowp/tensor.h"

LOWP_COMMAND_DEFINE(dequantize, "dequantize a `lowp quantize` .safetensors file exactly into .npy");

static void dequantize_usage(FILE *f)
{
    fputs("usage: lowp dequantize --in Y.safetensors --out Z.npy [--dtype f32|f64]\n"
          "  f32 (default): the exact product rounded once to binary32; f64: exact\n",
          f);
}

static const char *need_meta(const lowp_tensor_file *f, const char *path, const char *key)
{
    const char *v = lowp_tensor_file_meta(f, key);
    if (v == NULL)
        lowp_cli_fail("'%s' has no metadata \"%s\" (not written by lowp quantize?)", path, key);
    return v;
}

/* A decimal size_t, digits only. */
static int parse_size(const char *s, const char **end, size_t *out)
{
    size_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(v, (size_t)10, &v) || __builtin_add_overflow(v, (size_t)(*p - '0'), &v))
            return -1;
    *end = p;
    *out = v;
    return 0;
}

static size_t meta_size(const lowp_tensor_file *f, const char *path, const char *key)
{
    const char *v = need_meta(f, path, key), *end;
    size_t out;
    if (parse_size(v, &end, &out) || *end != '\0')
        lowp_cli_fail("'%s': metadata %s '%.40s' is not a non-negative integer", path, key, v);
    return out;
}

/* "[d0, d1, ...]" as quantize writes it (1 to 8 dims; spaces after commas optional). */
static int parse_shape(const char *s, int *ndim, size_t *shape)
{
    int nd = 0;
    if (*s++ != '[')
        return -1;
    while (*s == ' ')
        s++;
    while (*s != ']') {
        if (nd == LOWP_TENSOR_MAX_DIMS || parse_size(s, &s, &shape[nd]))
            return -1;
        nd++;
        while (*s == ' ')
            s++;
        if (*s == ',') {
            s++;
            while (*s == ' ')
                s++;
            if (*s == ']')
                return -1;
        } else if (*s != ']') {
            return -1;
        }
    }
    if (s[1] != '\0' || nd == 0)
        return -1;
    *ndim = nd;
    return 0;
}

/* The named tensor, which must have this dtype and shape. */
static const lowp_tensor *need_tensor(const lowp_tensor_file *f, const char *path, const char *name,
                                      lowp_dtype dt, int ndim, const size_t *shape)
{
    const lowp_tensor *t = lowp_tensor_file_find(f, name);
    if (t == NULL)
        lowp_cli_fail("'%s' has no tensor \"%s\"", path, name);
    char want[200], got[200];
    lowp_shape_text(want, sizeof want, ndim, shape, LOWP_SHAPE_JSON);
    lowp_shape_text(got, sizeof got, t->ndim, t->shape, LOWP_SHAPE_JSON);
    if (t->dtype != dt)
        lowp_cli_fail("'%s': tensor \"%s\" is %s, the layout needs %s", path, name, lowp_dtype_name(t->dtype),
                      lowp_dtype_name(dt));
    if (strcmp(want, got) != 0)
        lowp_cli_fail("'%s': tensor \"%s\" has shape %s, the metadata implies %s", path, name, got, want);
    return t;
}

int lowp_cmd_dequantize(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL, *dtype = "f32";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--in") == 0)
            in_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--out") == 0)
            out_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--dtype") == 0)
            dtype = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            dequantize_usage(stdout);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("dequantize: unknown argument '%s' (see lowp dequantize --help)", a);
    }
    if (in_path == NULL || out_path == NULL)
        lowp_cli_fail("dequantize: --in and --out are required");
    lowp_cli_check_not_input("--out", out_path, "--in", in_path);
    int f64;
    if (strcmp(dtype, "f32") == 0)
        f64 = 0;
    else if (strcmp(dtype, "f64") == 0)
        f64 = 1;
    else
        lowp_cli_fail("--dtype '%s' is not f32 or f64", dtype);
    if (lowp_tensor_file_kind_of(in_path) != LOWP_FILE_SAFETENSORS)
        lowp_cli_fail("--in '%s' must be a .safetensors file written by lowp quantize", in_path);
    if (lowp_tensor_file_kind_of(out_path) != LOWP_FILE_NPY)
        lowp_cli_fail("--out '%s' must be an .npy file", out_path);

    char why[1024];
    lowp_tensor_file in;
    if (lowp_tensor_file_read(in_path, &in, why, sizeof why))
        lowp_cli_fail("%s", why);

    /* The metadata, each entry checked and then checked against the others. */
    const char *layout = need_meta(&in, in_path, "layout");
    if (strcmp(layout, "lowp-blocked-v1") != 0)
        lowp_cli_fail("'%s': layout '%.40s' is not lowp-blocked-v1", in_path, layout);
    const char *fs = need_meta(&in, in_path, "format"), *rs = need_meta(&in, in_path, "recipe");
    lowp_block_format f;
    lowp_recipe r;
    if (lowp_block_format_parse(fs, &f))
        lowp_cli_fail("'%s': unknown block format '%.40s' in the metadata", in_path, fs);
    if (lowp_recipe_parse(rs, &r) || lowp_recipe_check(f, r, why, sizeof why))
        lowp_cli_fail("'%s': recipe '%.40s' is not a recipe of %s", in_path, rs, lowp_block_format_name(f));
    size_t bs = meta_size(&in, in_path, "block_size");
    if (bs != lowp_block_size(f))
        lowp_cli_fail("'%s': block_size %zu is not the %s block size %zu", in_path, bs, lowp_block_format_name(f),
                      lowp_block_size(f));
    int ndim;
    size_t shape[LOWP_TENSOR_MAX_DIMS];
    const char *shape_s = need_meta(&in, in_path, "shape");
    if (parse_shape(shape_s, &ndim, shape))
        lowp_cli_fail("'%s': metadata shape '%.60s' is not a list of 1 to %d sizes", in_path, shape_s,
                      LOWP_TENSOR_MAX_DIMS);
    size_t total;
    if (lowp_shape_size(ndim, shape, sizeof(double), &total, NULL))
        lowp_cli_fail("'%s': metadata shape %s overflows size_t", in_path, shape_s);
    size_t axis = meta_size(&in, in_path, "axis");
    if (axis >= (size_t)ndim)
        lowp_cli_fail("'%s': axis %zu is out of range for shape %s", in_path, axis, shape_s);
    int a = (int)axis;
    size_t L = shape[a], Lp = meta_size(&in, in_path, "padded_axis_size");
    if (Lp < L || Lp % bs != 0 || Lp - L >= bs)
        lowp_cli_fail("'%s': padded_axis_size %zu is not shape[axis] %zu rounded up to a multiple of %zu", in_path,
                      Lp, L, bs);
    size_t outer_hi = 1, inner = 1;
    int ovf = 0;
    for (int d = 0; d < a; d++) /* may overflow when L is 0, although the total does not */
        ovf |= __builtin_mul_overflow(outer_hi, shape[d], &outer_hi);
    for (int d = a + 1; d < ndim; d++)
        ovf |= __builtin_mul_overflow(inner, shape[d], &inner);
    size_t rows, n, nbytes;
    if (ovf || __builtin_mul_overflow(outer_hi, inner, &rows) || __builtin_mul_overflow(rows, Lp, &n) ||
        __builtin_mul_overflow(n, sizeof(double), &nbytes))
        lowp_cli_fail("'%s': the padded shape overflows size_t", in_path);

    /* The tensors the layout names, and nothing else. */
    size_t pshape[LOWP_TENSOR_MAX_DIMS];
    int pd = 0;
    for (int d = 0; d < ndim; d++)
        if (d != a)
            pshape[pd++] = shape[d];
    lowp_format ef = lowp_block_element_format(f);
    pshape[pd] = ef == LOWP_E2M1 ? Lp / 2 : Lp;
    lowp_dtype cdt = ef == LOWP_E2M1 ? LOWP_DT_U8 : ef == LOWP_E4M3 ? LOWP_DT_F8_E4M3
                   : ef == LOWP_E5M2 ? LOWP_DT_F8_E5M2 : LOWP_DT_BF16;
    const lowp_tensor *tc = need_tensor(&in, in_path, "codes", cdt, pd + 1, pshape);
    const uint8_t *scales = NULL;
    size_t expected = 1;
    if (lowp_block_has_scales(f)) {
        pshape[pd] = Lp / bs;
        scales = need_tensor(&in, in_path, "scales", f == LOWP_NVFP4 ? LOWP_DT_F8_E4M3 : LOWP_DT_F8_E8M0,
                             pd + 1, pshape)->data;
        expected++;
    }
    /* Values quantize never writes are refused, not decoded: a global scale that is not
     * positive and finite (NaN, Inf, 0, -0, negative) and an E4M3 block scale with the
     * sign bit set (quantize's are e4m3 of a non-negative value: 0x00..0x7F, 0x7F the NaN
     * of a NaN block). Every E8M0 code is one quantize may write (0xFF for a NaN block). */
    float g = 1.0f;
    if (lowp_block_has_global_scale(f)) {
        size_t one = 1;
        memcpy(&g, need_tensor(&in, in_path, "global_scale", LOWP_DT_F32, 1, &one)->data, sizeof g);
        if (!(g > 0.0f) || !isfinite(g))
            lowp_cli_fail("'%s': the global_scale tensor holds %g, not a positive finite value", in_path,
                          (double)g);
        expected++;
    }
    if (f == LOWP_NVFP4)
        for (size_t i = 0; i < rows * (Lp / bs); i++)
            if (scales[i] & 0x80)
                lowp_cli_fail("'%s': block scale %zu is E4M3 code 0x%02x, negative (quantize writes "
                              "non-negative scales)", in_path, i, scales[i]);
    /* Metadata quantize writes about these tensors must agree with them where present:
     * the global scale ("%.9g", so it reads back to the same binary32 value), the element
     * count (rows x padded_axis_size) and the padding count (rows x (padded - shape)). */
    const char *gm = lowp_tensor_file_meta(&in, "global_scale");
    if (gm != NULL && !lowp_block_has_global_scale(f))
        lowp_cli_fail("'%s': metadata global_scale '%.40s', but %s has no global scale", in_path, gm,
                      lowp_block_format_name(f));
    if (gm != NULL) {
        char *end;
        float gv = strtof(gm, &end);
        if (end == gm || *end != '\0' || memcmp(&gv, &g, sizeof g) != 0)
            lowp_cli_fail("'%s': metadata global_scale '%.40s' disagrees with the global_scale tensor's "
                          "%.9g", in_path, gm, (double)g);
    }
    if (lowp_tensor_file_meta(&in, "count_elements") != NULL &&
        meta_size(&in, in_path, "count_elements") != n)
        lowp_cli_fail("'%s': metadata count_elements %zu disagrees with the %zu elements of the codes", in_path,
                      meta_size(&in, in_path, "count_elements"), n);
    if (lowp_tensor_file_meta(&in, "count_padding") != NULL &&
        meta_size(&in, in_path, "count_padding") != rows * (Lp - L))
        lowp_cli_fail("'%s': metadata count_padding %zu disagrees with %zu rows padded from %zu to %zu", in_path,
                      meta_size(&in, in_path, "count_padding"), rows, L, Lp);
    if (in.n_tensors != expected)
        lowp_cli_fail("'%s' holds %zu tensors; the %s layout has %zu", in_path, in.n_tensors,
                      lowp_block_format_name(f), expected);

    /* Dequantize the padded rows, then drop the padding and move the axis back. */
    size_t es = f64 ? sizeof(double) : sizeof(float);
    unsigned char *deq = malloc(n ? n * es : 1);
    lowp_tensor out;
    if (deq == NULL)
        lowp_cli_fail("out of memory for %zu values", n);
    if (lowp_tensor_alloc(&out, "", f64 ? LOWP_DT_F64 : LOWP_DT_F32, ndim, shape, why, sizeof why))
        lowp_cli_fail("%s", why);
    if (f64)
        lowp_block_dequantize_f64(f, g, tc->data, scales, n, (double *)(void *)deq);
    else
        lowp_block_dequantize_f32(f, g, tc->data, scales, n, (float *)(void *)deq);
    for (size_t hi = 0; hi < outer_hi && L > 0; hi++)
        for (size_t j = 0; j < L; j++)
            for (size_t lo = 0; lo < inner; lo++)
                memcpy(out.data + ((hi * L + j) * inner + lo) * es, deq + ((hi * inner + lo) * Lp + j) * es, es);
    free(deq);

    FILE *o = lowp_out_open(out_path, 1);
    if (lowp_npy_emit(o, &out, why, sizeof why))
        lowp_cli_fail("cannot write '%s': %s", out_path, why);
    lowp_out_commit(o);
    lowp_tensor_free(&out);
    lowp_tensor_file_free(&in);
    return LOWP_EXIT_OK;
}
