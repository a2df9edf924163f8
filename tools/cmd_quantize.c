/* tools/cmd_quantize.c: `lowp quantize`, a float tensor -> block-quantized .safetensors.
 *
 *   lowp quantize --format F [--recipe R] [--axis A] [--global-scale G] [--scale-up] [--pad]
 *                 --in X.npy|X.safetensors [--tensor NAME] --out Y.safetensors
 *
 * Input: F32, F64 (rounded to binary32 once; a note says how many changed), F16 or BF16.
 *
 * Blocking: blocks of lowp_block_size(F) consecutive elements along axis A (default the
 * last). The axis is moved last (the other axes keep their order) and every row of that
 * permuted array is quantized as consecutive blocks. The axis length L must be a multiple
 * of the block size unless --pad, which appends zeros to each row up to the next multiple
 * Lp (the metadata keeps L in "shape" and Lp in "padded_axis_size").
 *
 * Layout "lowp-blocked-v1" of the output (P = the input shape without axis A, C order):
 *   codes         shape P + [Lp/2] U8 for NVFP4/MXFP4 (element 2i in the low nibble of
 *                 byte i, element 2i+1 in the high nibble); P + [Lp] F8_E4M3 for MXFP8
 *                 and FP8_E4M3, F8_E5M2 for FP8_E5M2, BF16 for bf16.
 *                 codes[p..., j] is element j of the row: x[... i_A = j ...] for j < L,
 *                 a padding zero for L <= j < Lp.
 *   scales        shape P + [Lp/B], one code per block: F8_E4M3 (NVFP4), F8_E8M0 (MX);
 *                 absent for FP8 and BF16.
 *   global_scale  F32 shape [1], decode-side (x ~= code * scale * global_scale); NVFP4 and
 *                 FP8 only.
 * Metadata (all strings): format, recipe, block_size, axis (>= 0, in the input's axes),
 * shape (the input shape, "[d0, d1]"), padded_axis_size, layout, layout_doc, lowp_version,
 * scale_up, amax (the tensor amax, NaN-propagating like torch.amax, "%.9g"),
 * global_scale_source (amax | given | none), global_scale and global_scale_enc ("%.9g",
 * when the format has one), input_dtype, count_* (lowp_quant_counts: elements, blocks,
 * nan_in, inf_in, saturated, flushed, nan_out, scale_zero, scale_subnormal, scale_nan;
 * the padding zeros are counted as elements, count_padding says how many) and
 * scale_histogram ({"0xCC": n, ...} over the block scale codes, when there are scales).
 *
 * The global scale is lowp_recipe_global_scale(F, R, amax) unless --global-scale G gives
 * the decode-side value (lowp_global_scale_from_dec). NaN and Inf inputs are refused where
 * the global scale would come from their amax (nvfp4 trtllm / exact / modelopt, fp8 exact,
 * without --global-scale); elsewhere they go through the recipe like any value, are
 * counted in the metadata and a note on stderr says so (ref/recipes.md states the choice
 * per recipe). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/block.h"
#include "lowp/tensor.h"

LOWP_COMMAND_DEFINE(quantize, "block-quantize a float tensor (.npy/.safetensors) into .safetensors");

#ifndef LOWP_VERSION
#define LOWP_VERSION "unknown"
#endif

#define LAYOUT_ID "lowp-blocked-v1"
#define LAYOUT_DOC                                                                                  \
    "blocked axis moved last, other axes in order, C order; codes[..., j] = element j of the "      \
    "row (4-bit: two per byte, element 2i in the low nibble); scales[..., b] = block b; "           \
    "x ~= code * scale * global_scale; rows zero-padded from shape[axis] to padded_axis_size"

static void quantize_usage(FILE *f)
{
    fputs("usage: lowp quantize --format FORMAT [--recipe RECIPE] [--axis A] [--global-scale G]\n"
          "                     [--scale-up] [--pad] --in X.npy|X.safetensors [--tensor NAME]\n"
          "                     --out Y.safetensors\n"
          "  FORMAT  nvfp4 mxfp4 mxfp8 fp8_e4m3 fp8_e5m2 bf16\n"
          "  RECIPE  trtllm exact modelopt sglang-kv (nvfp4); ocp rceil trtllm (mx); exact (fp8, bf16)\n"
          "  A       the blocked axis (default -1, the last; negative counts from the end)\n"
          "  G       decode-side global scale (nvfp4, fp8); default: the recipe's, from the tensor amax\n"
          "  --scale-up  round the E4M3 block scale up (nvfp4 exact and modelopt)\n"
          "  --pad       zero-pad each row to a multiple of the block size\n",
          f);
}

static void set_meta(lowp_tensor_file *f, const char *key, const char *value)
{
    char why[256];
    if (lowp_tensor_file_set_meta(f, key, value, why, sizeof why))
        lowp_cli_fail("%s", why);
}

static void set_meta_zu(lowp_tensor_file *f, const char *key, size_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", v);
    set_meta(f, key, buf);
}

static void set_meta_f(lowp_tensor_file *f, const char *key, float v)
{
    char buf[48];
    snprintf(buf, sizeof buf, "%.9g", (double)v); /* 9 digits: the binary32 value exactly recoverable */
    set_meta(f, key, buf);
}

static lowp_dtype codes_dtype(lowp_block_format f)
{
    switch (f) {
    case LOWP_MXFP8: case LOWP_FP8_E4M3: return LOWP_DT_F8_E4M3;
    case LOWP_FP8_E5M2: return LOWP_DT_F8_E5M2;
    case LOWP_BF16_PASS: return LOWP_DT_BF16;
    default: return LOWP_DT_U8; /* packed E2M1 */
    }
}

static size_t mul_or_fail(size_t a, size_t b)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        lowp_cli_fail("the padded tensor size overflows size_t");
    return r;
}

int lowp_cmd_quantize(int argc, char **argv)
{
    const char *format = NULL, *recipe = NULL, *axis_s = NULL, *gs_s = NULL, *in_path = NULL,
               *tensor = NULL, *out_path = NULL;
    int scale_up = 0, pad = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--format") == 0)
            format = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--recipe") == 0)
            recipe = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--axis") == 0)
            axis_s = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--global-scale") == 0)
            gs_s = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--in") == 0)
            in_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--tensor") == 0)
            tensor = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--out") == 0)
            out_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--scale-up") == 0)
            scale_up = 1;
        else if (strcmp(a, "--pad") == 0)
            pad = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            quantize_usage(stdout);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("quantize: unknown argument '%s' (see lowp quantize --help)", a);
    }
    if (format == NULL)
        lowp_cli_fail("quantize: --format is required (nvfp4 mxfp4 mxfp8 fp8_e4m3 fp8_e5m2 bf16)");
    if (in_path == NULL || out_path == NULL)
        lowp_cli_fail("quantize: --in and --out are required");
    lowp_cli_check_not_input("--out", out_path, "--in", in_path);
    lowp_block_format f;
    if (lowp_block_format_parse(format, &f))
        lowp_cli_fail("unknown block format '%s' (nvfp4 mxfp4 mxfp8 fp8_e4m3 fp8_e5m2 bf16)", format);
    lowp_recipe r = lowp_recipe_default(f);
    if (recipe != NULL && lowp_recipe_parse(recipe, &r))
        lowp_cli_fail("unknown recipe '%s' (%s)", recipe, lowp_recipe_names());
    char why[1024];
    if (lowp_recipe_check(f, r, why, sizeof why))
        lowp_cli_fail("%s --recipe %s: %s", format, lowp_recipe_name(r), why);
    if (scale_up && !(f == LOWP_NVFP4 && (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT)))
        lowp_cli_fail("--scale-up applies to nvfp4 with the exact or modelopt recipe only");
    float g_given = 0.0f;
    if (gs_s != NULL) {
        if (!lowp_block_has_global_scale(f))
            lowp_cli_fail("%s has no global scale; drop --global-scale", format);
        char *end;
        errno = 0;
        g_given = strtof(gs_s, &end);
        if (end == gs_s || *end != '\0')
            lowp_cli_fail("--global-scale '%s' is not a number", gs_s);
        if (!(g_given > 0.0f) || !isfinite(g_given))
            lowp_cli_fail("--global-scale %s must be a positive finite binary32 value", gs_s);
    }
    if (lowp_tensor_file_kind_of(out_path) != LOWP_FILE_SAFETENSORS)
        lowp_cli_fail("--out '%s' must be a .safetensors file (codes, scales and metadata need names)", out_path);

    lowp_tensor x;
    size_t rounded = 0;
    lowp_dtype in_dtype;
    if (lowp_tensor_load_float(in_path, tensor, &x, &in_dtype, &rounded, why, sizeof why))
        lowp_cli_fail("%s", why);
    if (rounded > 0)
        fprintf(stderr, "lowp: note: %zu of %zu F64 inputs were rounded to binary32 (the quantizers take binary32)\n",
                rounded, x.count);
    if (x.ndim == 0)
        lowp_cli_fail("'%s' holds a 0-d array (a scalar): there is no axis to block", in_path);

    long axis = -1;
    if (axis_s != NULL)
        axis = (long)lowp_cli_parse_i64("--axis", axis_s, -LOWP_TENSOR_MAX_DIMS, LOWP_TENSOR_MAX_DIMS - 1);
    if (axis < -(long)x.ndim || axis >= (long)x.ndim)
        lowp_cli_fail("--axis %ld is out of range for a %d-dimensional tensor", axis, x.ndim);
    int a = (int)(axis < 0 ? axis + x.ndim : axis);

    /* Rows: hi over the axes before a, lo over the axes after a; row = hi * inner + lo. */
    size_t L = x.shape[a], bs = lowp_block_size(f), outer_hi = 1, inner = 1;
    for (int d = 0; d < a; d++) /* may overflow when L is 0: the file is then empty */
        outer_hi = mul_or_fail(outer_hi, x.shape[d]);
    for (int d = a + 1; d < x.ndim; d++)
        inner = mul_or_fail(inner, x.shape[d]);
    size_t rows = mul_or_fail(outer_hi, inner);
    size_t Lp = L;
    if (L % bs != 0) {
        if (!pad)
            lowp_cli_fail("axis %d has size %zu, not a multiple of the %s block size %zu (use --pad to zero-pad)",
                          a, L, lowp_block_format_name(f), bs);
        Lp = mul_or_fail(L / bs + 1, bs);
    }
    size_t n = mul_or_fail(rows, Lp);
    mul_or_fail(n, sizeof(float));

    const float *xs = (const float *)(const void *)x.data;
    float amax = 0.0f; /* NaN-propagating, like torch.amax(x.abs()) */
    size_t n_nonfinite = 0, first_nonfinite = 0;
    for (size_t i = 0; i < x.count; i++) {
        float v = fabsf(xs[i]);
        if (!isfinite(v) && n_nonfinite++ == 0)
            first_nonfinite = i;
        if (isnan(v) || isnan(amax))
            amax = NAN;
        else if (v > amax)
            amax = v;
    }
    /* A global scale taken from a NaN or Inf amax (nvfp4 trtllm, exact, modelopt; fp8
     * exact) is NaN, 0, Inf or the uncalibrated 1.0, and every finite element decodes to
     * garbage or saturates: refused (ref/recipes.md, "NaN and Inf inputs"). Recipes
     * without one (nvfp4 sglang-kv, mx, bf16) and a given --global-scale take such inputs
     * through the recipe's block rules, counted in the metadata. */
    int scale_from_amax = gs_s == NULL && lowp_block_has_global_scale(f) &&
                          !(f == LOWP_NVFP4 && r == LOWP_RECIPE_SGLANG_KV);
    if (scale_from_amax && n_nonfinite > 0)
        lowp_cli_fail("--in '%s': %zu NaN or Inf inputs (the first is element %zu, %g): the %s %s "
                      "global scale comes from the tensor amax, which they make %s; pass "
                      "--global-scale G or clean the input",
                      in_path, n_nonfinite, first_nonfinite, (double)xs[first_nonfinite],
                      lowp_block_format_name(f), lowp_recipe_name(r), isnan(amax) ? "NaN" : "Inf");
    lowp_global_scale gs = gs_s != NULL ? lowp_global_scale_from_dec(f, r, g_given)
                                        : lowp_recipe_global_scale(f, r, amax);

    /* The permuted, padded input; the input itself when the axis is last and unpadded. */
    const float *xp = xs;
    float *perm = NULL;
    if ((a != x.ndim - 1 || Lp != L) && n > 0) {
        perm = calloc(n ? n : 1, sizeof *perm);
        if (perm == NULL)
            lowp_cli_fail("out of memory for %zu values", n);
        for (size_t hi = 0; hi < outer_hi; hi++)
            for (size_t j = 0; j < L; j++)
                for (size_t lo = 0; lo < inner; lo++)
                    perm[(hi * inner + lo) * Lp + j] = xs[(hi * L + j) * inner + lo];
        xp = perm;
    }

    /* Output tensors; P is the input shape without axis a. */
    size_t pshape[LOWP_TENSOR_MAX_DIMS];
    int pd = 0;
    for (int d = 0; d < x.ndim; d++)
        if (d != a)
            pshape[pd++] = x.shape[d];
    lowp_tensor_file out;
    lowp_tensor_file_init(&out);
    pshape[pd] = lowp_block_element_format(f) == LOWP_E2M1 ? Lp / 2 : Lp;
    if (lowp_tensor_file_add(&out, "codes", codes_dtype(f), pd + 1, pshape, why, sizeof why) == NULL)
        lowp_cli_fail("%s", why);
    if (lowp_block_has_scales(f)) {
        pshape[pd] = Lp / bs;
        if (lowp_tensor_file_add(&out, "scales", f == LOWP_NVFP4 ? LOWP_DT_F8_E4M3 : LOWP_DT_F8_E8M0,
                                 pd + 1, pshape, why, sizeof why) == NULL)
            lowp_cli_fail("%s", why);
    }
    if (lowp_block_has_global_scale(f)) {
        size_t one = 1;
        lowp_tensor *tg = lowp_tensor_file_add(&out, "global_scale", LOWP_DT_F32, 1, &one, why, sizeof why);
        if (tg == NULL)
            lowp_cli_fail("%s", why);
        memcpy(tg->data, &gs.dec, sizeof gs.dec);
    }
    /* The tensor list is complete: pointers into it are stable from here on. */
    const lowp_tensor *tc = lowp_tensor_file_find(&out, "codes");
    const lowp_tensor *ts = lowp_tensor_file_find(&out, "scales");
    if (tc->nbytes != lowp_block_code_bytes(f, n))
        lowp_cli_fail("internal error: codes are %zu bytes, the quantizer writes %zu", tc->nbytes,
                      lowp_block_code_bytes(f, n));
    uint8_t *codes = tc->data;
    uint8_t *scales = ts != NULL ? ts->data : NULL;
    size_t nscales = ts != NULL ? ts->count : 0;

    lowp_quant_counts counts;
    memset(&counts, 0, sizeof counts);
    unsigned flags = scale_up ? LOWP_BLOCK_SCALE_UP : 0u;
    if (lowp_block_quantize(f, r, gs, flags, xp, n, codes, scales, &counts, why, sizeof why))
        lowp_cli_fail("quantize: %s", why);

    set_meta(&out, "format", lowp_block_format_name(f));
    set_meta(&out, "recipe", lowp_recipe_name(r));
    set_meta_zu(&out, "block_size", bs);
    set_meta_zu(&out, "axis", (size_t)a);
    char shape_s[256];
    size_t k = (size_t)snprintf(shape_s, sizeof shape_s, "[");
    for (int d = 0; d < x.ndim; d++)
        k += (size_t)snprintf(shape_s + k, sizeof shape_s - k, d ? ", %zu" : "%zu", x.shape[d]);
    snprintf(shape_s + k, sizeof shape_s - k, "]");
    set_meta(&out, "shape", shape_s);
    set_meta_zu(&out, "padded_axis_size", Lp);
    set_meta(&out, "layout", LAYOUT_ID);
    set_meta(&out, "layout_doc", LAYOUT_DOC);
    set_meta(&out, "lowp_version", LOWP_VERSION);
    set_meta(&out, "input_dtype", lowp_dtype_name(in_dtype));
    set_meta(&out, "scale_up", scale_up ? "1" : "0");
    set_meta_f(&out, "amax", amax);
    if (lowp_block_has_global_scale(f)) {
        set_meta(&out, "global_scale_source", gs_s != NULL ? "given" : "amax");
        set_meta_f(&out, "global_scale", gs.dec);
        set_meta_f(&out, "global_scale_enc", gs.enc);
    } else {
        set_meta(&out, "global_scale_source", "none");
    }
    set_meta_zu(&out, "count_elements", counts.elements);
    set_meta_zu(&out, "count_blocks", counts.blocks);
    set_meta_zu(&out, "count_padding", n - x.count);
    set_meta_zu(&out, "count_nan_in", counts.nan_in);
    set_meta_zu(&out, "count_inf_in", counts.inf_in);
    set_meta_zu(&out, "count_saturated", counts.saturated);
    set_meta_zu(&out, "count_flushed", counts.flushed);
    set_meta_zu(&out, "count_nan_out", counts.nan_out);
    set_meta_zu(&out, "count_scale_zero", counts.scale_zero);
    set_meta_zu(&out, "count_scale_subnormal", counts.scale_subnormal);
    set_meta_zu(&out, "count_scale_nan", counts.scale_nan);
    if (scales != NULL) {
        size_t hist[256] = {0};
        for (size_t i = 0; i < nscales; i++)
            hist[scales[i]]++;
        char hs[256 * 32];
        size_t h = (size_t)snprintf(hs, sizeof hs, "{");
        for (int c = 0; c < 256; c++)
            if (hist[c])
                h += (size_t)snprintf(hs + h, sizeof hs - h, "%s\"0x%02x\": %zu", h > 1 ? ", " : "", c, hist[c]);
        snprintf(hs + h, sizeof hs - h, "}");
        set_meta(&out, "scale_histogram", hs);
    }

    FILE *o = lowp_out_open(out_path, 1);
    if (lowp_safetensors_emit(o, &out, why, sizeof why))
        lowp_cli_fail("cannot write '%s': %s", out_path, why);
    lowp_out_commit(o);

    if (counts.nan_in || counts.inf_in)
        fprintf(stderr, "lowp: note: %zu NaN and %zu Inf inputs (amax %g); %zu elements decode to NaN, %zu saturated, %zu scales NaN; counts are in the metadata\n",
                counts.nan_in, counts.inf_in, (double)amax, counts.nan_out, counts.saturated, counts.scale_nan);
    free(perm);
    lowp_tensor_free(&x);
    lowp_tensor_file_free(&out);
    return LOWP_EXIT_OK;
}
