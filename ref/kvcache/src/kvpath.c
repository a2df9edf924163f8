/* Production data paths: the K/V/Q values an attention kernel multiplies (lowp/kvcache.h).
 *
 * Each path is stated in the header with its source. In short:
 *   exact    cache bytes dequantized exactly; global scales as BMM scales
 *   decode   SGLang/TRT-LLM NVFP4 decode: E2M1 and E4M3 -> BF16, product in BF16 (exact
 *            for NVFP4), global scales as bmm1/bmm2 scales, Q in BF16 (lmsys 2026-09-16)
 *   extend   SGLang FP8 workspace: prefix = torch_e4m3(bf16(fp32(fp32(e * sf) * g))),
 *            current chunk = torch_e4m3(bf16(x)) (ref/notes/kernels.md 1.5), Q in BF16
 *   prefill  every token as the current chunk above (ref/notes/seeds.md 1.1), Q in BF16
 *   fp8kv    FP8 cache read as BF16 tiles, k_scale on scores, v_scale on the output (ref/notes/seeds.md 2)
 *
 * Cached tokens are quantized with the same lowp_block_quantize call lowp_kvcache_write
 * makes (recipe, flags, lowp_global_scale_from_dec of the head's scale), so the bytes are
 * the cache's. Arithmetic that the sources do in binary32 is done in float here; the
 * library is compiled with -ffp-contract=off, so a*b*c is two binary32 roundings.
 */
#include "lowp/bits.h"
#include "lowp/kvcache.h"

#include "lowp/why.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const path_names[LOWP_KV_PATH_COUNT] = {"exact", "decode", "extend", "prefill",
                                                           "fp8kv"};

const char *lowp_kv_path_name(lowp_kv_path p)
{
    return (unsigned)p < LOWP_KV_PATH_COUNT ? path_names[p] : "?";
}

int lowp_kv_path_parse(const char *name, lowp_kv_path *out)
{
    for (int i = 0; i < LOWP_KV_PATH_COUNT; i++)
        if (name && strcmp(name, path_names[i]) == 0) {
            *out = (lowp_kv_path)i;
            return 0;
        }
    return -1;
}

lowp_kv_path_args lowp_kv_path_args_init(lowp_kv_path p, const lowp_kv_config *cfg, size_t ctx,
                                         size_t q_len, size_t num_q_heads, const float *q,
                                         const float *k, const float *v)
{
    lowp_kv_path_args a;
    memset(&a, 0, sizeof a);
    a.path = p;
    a.cfg = *cfg;
    a.ctx = ctx;
    a.q_len = q_len;
    a.num_q_heads = num_q_heads;
    a.q = q;
    a.k = k;
    a.v = v;
    return a;
}

/* Conversions the paths use, set up once per run. The per-element work goes through the
 * codecs' array encoders and tables built from the codecs, so every rounding is the codec's
 * own (lowp/format.h), at table-lookup speed. */
typedef struct path_codecs {
    lowp_codec bf16;       /* __float2bfloat16_rn: (bf16, cuda, rn) */
    lowp_codec e4m3_torch; /* tensor.to(float8_e4m3fn): (e4m3, torch, rn), non-saturating */
    lowp_codec e4m3_sat;   /* __nv_cvt_float_to_fp8 satfinite: (e4m3, cuda, rn, sat) */
    double *ws_of_bf16;    /* [65536]: BF16 code -> value of its torch E4M3 cast (the FP8
                              workspace); a BF16 value is exact in binary32, so this is the
                              binary32 entry point of the cast */
} path_codecs;

static int codecs_init(path_codecs *pc, char *why, size_t why_len)
{
    pc->ws_of_bf16 = NULL;
    if (lowp_codec_init(&pc->bf16, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, why,
                        why_len) ||
        lowp_codec_init(&pc->e4m3_torch, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, why,
                        why_len) ||
        lowp_codec_init(&pc->e4m3_sat, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, why,
                        why_len))
        return -1;
    pc->ws_of_bf16 = malloc(65536 * sizeof(double));
    if (!pc->ws_of_bf16)
        return lowp_why_set(why, why_len, "out of memory");
    for (unsigned c = 0; c < 65536; c++)
        pc->ws_of_bf16[c] = lowp_decode_f64(
            LOWP_E4M3, lowp_encode_f32(&pc->e4m3_torch, lowp_decode_f32(LOWP_BF16, (uint16_t)c)));
    return 0;
}

static float rn_bf16(const path_codecs *pc, float x)
{
    return lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&pc->bf16, x));
}

/* Quantize rows [n_tok][H][d] of x into codes [n_tok][H][rb] and scales [n_tok][H][S] as
 * lowp_kvcache_write does (one call per token and head block run). */
static int quantize_rows(const lowp_kv_config *cfg, const float *gs, const float *x, size_t n_tok,
                         size_t d, uint8_t *codes, uint8_t *scales, lowp_quant_counts *cnt,
                         char *why, size_t why_len)
{
    lowp_block_format f = cfg->format;
    lowp_recipe r = cfg->recipe;
    size_t H = cfg->num_heads;
    size_t rb = lowp_block_code_bytes(f, d);
    size_t S = lowp_block_has_scales(f) ? d / lowp_block_size(f) : 0;
    if (cfg->scale_gran == LOWP_KV_SCALE_TENSOR) {
        /* contiguous [n_tok * H * d]; blocks never straddle rows (d % block size == 0) */
        lowp_global_scale g = lowp_global_scale_from_dec(f, r, gs[0]);
        return lowp_block_quantize(f, r, g, cfg->quant_flags, x, n_tok * H * d, codes,
                                   S ? scales : NULL, cnt, why, why_len);
    }
    for (size_t t = 0; t < n_tok; t++)
        for (size_t h = 0; h < H; h++) {
            lowp_global_scale g = lowp_global_scale_from_dec(f, r, gs[h]);
            size_t row = t * H + h;
            if (lowp_block_quantize(f, r, g, cfg->quant_flags, x + row * d, d, codes + row * rb,
                                    S ? scales + row * S : NULL, cnt, why, why_len))
                return -1;
        }
    return 0;
}

static lowp_format scale_format(lowp_block_format f)
{
    return f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
}

/* One side (K or V) of a path. x is [ctx][H][d]; out the same shape; scale[H] the factor
 * the kernel applies (bmm1 for K, bmm2 for V). */
static int run_side(const lowp_kv_path_args *a, const path_codecs *pc, const float *gs_in,
                    const float *x, size_t d, double *out, double *scale, lowp_quant_counts *cnt,
                    char *why, size_t why_len)
{
    const lowp_kv_config *cfg = &a->cfg;
    lowp_block_format f = cfg->format;
    size_t H = cfg->num_heads, ctx = a->ctx;
    /* per-head decode-side global scales (1.0 without) */
    float *gs = malloc(H * sizeof(float));
    if (!gs)
        return lowp_why_set(why, why_len, "out of memory");
    for (size_t h = 0; h < H; h++)
        gs[h] = gs_in ? gs_in[cfg->scale_gran == LOWP_KV_SCALE_HEAD ? h : 0] : 1.0f;

    /* Which tokens come from the cache, and which are the current chunk (never quantized) */
    size_t n_cached = ctx;
    if (a->path == LOWP_KV_PATH_EXTEND)
        n_cached = a->chunk_start;
    else if (a->path == LOWP_KV_PATH_PREFILL)
        n_cached = 0;

    size_t rb = lowp_block_code_bytes(f, d);
    size_t S = lowp_block_has_scales(f) ? d / lowp_block_size(f) : 0;
    uint8_t *codes = NULL, *scales = NULL;
    int rc = 0;
    if (n_cached) {
        codes = malloc(n_cached * H * rb);
        scales = malloc(S ? n_cached * H * S : 1);
        if (!codes || !scales) {
            rc = lowp_why_set(why, why_len, "out of memory");
            goto done;
        }
        if (quantize_rows(cfg, gs, x, n_cached, d, codes, scales, cnt, why, why_len)) {
            rc = -1;
            goto done;
        }
    }
    /* binary32 values of every element and scale code (exact: all fit) */
    lowp_format ef = lowp_block_element_format(f), sf = scale_format(f);
    float elem_val[256], scale_val[256];
    for (unsigned c = 0; c < 256; c++) {
        elem_val[c] = lowp_format_bits(ef) <= 8 && c < lowp_format_code_count(ef)
                          ? lowp_decode_f32(ef, (uint16_t)c)
                          : 0.0f;
        scale_val[c] = lowp_block_has_scales(f) ? lowp_decode_f32(sf, (uint16_t)c) : 1.0f;
    }
    size_t bs = lowp_block_size(f);
    unsigned ebits = lowp_format_bits(ef);
    float *tmp = malloc(d * sizeof(float));
    uint16_t *u16 = malloc(d * sizeof(uint16_t));
    if (!tmp || !u16) {
        free(tmp);
        free(u16);
        rc = lowp_why_set(why, why_len, "out of memory");
        goto done;
    }
    for (size_t t = 0; t < ctx; t++)
        for (size_t h = 0; h < H; h++) {
            size_t row = t * H + h;
            double *o = out + row * d;
            if (t >= n_cached) {
                /* current chunk / prefill: the BF16 projection output cast into the FP8
                 * workspace by torch .to(float8_e4m3fn), no scale (ref/notes/kernels.md 1.5) */
                lowp_encode_f32_u16(&pc->bf16, x + row * d, u16, d);
                for (size_t i = 0; i < d; i++)
                    o[i] = pc->ws_of_bf16[u16[i]];
                continue;
            }
            const uint8_t *cr = codes + row * rb;
            const uint8_t *sr = S ? scales + row * S : NULL;
            /* tmp[i] = element * block scale in binary32: exact (<= 4 x 4 significant bits,
             * or a BF16 element times 1; the smallest product, MXFP8's 2^-9 * 2^-127, is a
             * binary32 subnormal with room to spare), except that MXFP8 448 * 2^127
             * overflows to Inf, as BF16 does too */
            for (size_t i = 0; i < d; i++) {
                float e = ebits == 4    ? elem_val[(cr[i / 2] >> (4 * (i & 1))) & 0xfu]
                          : ebits == 8  ? elem_val[cr[i]]
                                        : lowp_f32_from_bf16((uint16_t)(cr[2 * i] | (cr[2 * i + 1] << 8)));
                tmp[i] = sr ? e * scale_val[sr[i / bs]] : e;
            }
            switch (a->path) {
            case LOWP_KV_PATH_EXACT:
            case LOWP_KV_PATH_FP8KV:
                /* no intermediate rounding; the binary64 value of element * block scale
                 * (the binary32 product above is exact whenever it is finite) */
                for (size_t i = 0; i < d; i++) {
                    if (sr && isinf(tmp[i])) { /* MX overflow of binary32: redo in binary64 */
                        unsigned c = ebits == 4 ? (cr[i / 2] >> (4 * (i & 1))) & 0xfu : cr[i];
                        o[i] = (double)elem_val[c] * (double)scale_val[sr[i / bs]];
                    } else {
                        o[i] = (double)tmp[i];
                    }
                }
                break;
            case LOWP_KV_PATH_DECODE:
                /* cvt.rn.bf16x2.e2m1x2 / fp8 -> bf16 and scale -> bf16 are exact (every
                 * E2M1, E4M3, E5M2 value and every E8M0 power 2^-127..2^127 is a BF16
                 * value); the packed BF16 multiply rounds the exact product once: RN_bf16
                 * of the binary32 product, which is exact or Inf where BF16 overflows too */
                lowp_encode_f32_u16(&pc->bf16, tmp, u16, d);
                for (size_t i = 0; i < d; i++)
                    o[i] = (double)lowp_f32_from_bf16(u16[i]);
                break;
            default:
                /* EXTEND prefix: nvfp4_kv_dequantize in fp32, (element * block scale) *
                 * global scale (one binary32 rounding), RN to BF16, then the workspace
                 * cast */
                for (size_t i = 0; i < d; i++)
                    tmp[i] = tmp[i] * gs[h];
                lowp_encode_f32_u16(&pc->bf16, tmp, u16, d);
                for (size_t i = 0; i < d; i++)
                    o[i] = pc->ws_of_bf16[u16[i]];
                break;
            }
        }
    free(tmp);
    free(u16);
    /* The factor the kernel applies after the BMM: the global scale where the path keeps
     * it out of the values (exact, decode, fp8kv), 1 where it is inside (extend prefix:
     * applied in fp32 before the cast; current chunk and prefill: none). */
    for (size_t h = 0; h < H; h++)
        scale[h] = (a->path == LOWP_KV_PATH_EXTEND || a->path == LOWP_KV_PATH_PREFILL)
                       ? 1.0
                       : (double)gs[h];
done:
    free(codes);
    free(scales);
    free(gs);
    return rc;
}

static int check_scales(const float *g, size_t n, const char *name, int has_global,
                        char *why, size_t why_len)
{
    if (!g)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!(isfinite(g[i]) && g[i] > 0.0f))
            return lowp_why_set(why, why_len, "a.%s[%zu] = %g is not a finite positive scale", name,
                                i, (double)g[i]);
        if (!has_global && g[i] != 1.0f)
            return lowp_why_set(why, why_len,
                                "a.%s[%zu] = %g but the format has no global scale (only 1.0)",
                                name, i, (double)g[i]);
    }
    return 0;
}

int lowp_kv_path_run(const lowp_kv_path_args *a, int fold, double *q_eff, double *k_eff,
                     double *v_eff, double *k_scale, double *v_scale, lowp_kv_path_result *res,
                     char *why, size_t why_len)
{
    if (!a)
        return lowp_why_set(why, why_len, "a is NULL");
    if ((unsigned)a->path >= LOWP_KV_PATH_COUNT)
        return lowp_why_set(why, why_len, "a.path %d is not a data path", (int)a->path);
    /* The storage part of the config: pages, layout and scale order do not matter here. */
    lowp_kv_config cfg = a->cfg;
    cfg.num_pages = 1;
    cfg.page_size = 1;
    cfg.layout = LOWP_KV_NHD;
    cfg.k_sf_order = cfg.v_sf_order = LOWP_KV_SF_LINEAR;
    if (lowp_kv_config_check(&cfg, why, why_len))
        return -1;
    lowp_block_format f = cfg.format;
    if (a->path == LOWP_KV_PATH_EXTEND && f != LOWP_NVFP4)
        return lowp_why_set(why, why_len,
                            "the extend path dequantizes an NVFP4 prefix into the FP8 workspace; "
                            "a.cfg.format is %s",
                            lowp_block_format_name(f));
    if (a->path == LOWP_KV_PATH_FP8KV && f != LOWP_FP8_E4M3 && f != LOWP_FP8_E5M2)
        return lowp_why_set(why, why_len, "the fp8kv path reads an FP8 cache; a.cfg.format is %s",
                            lowp_block_format_name(f));
    if (a->ctx == 0)
        return lowp_why_set(why, why_len, "a.ctx is 0");
    if (a->path == LOWP_KV_PATH_EXTEND && a->chunk_start > a->ctx)
        return lowp_why_set(why, why_len, "a.chunk_start %zu is past a.ctx %zu", a->chunk_start,
                            a->ctx);
    if (a->path == LOWP_KV_PATH_PREFILL && a->chunk_start != 0)
        return lowp_why_set(why, why_len,
                            "a.chunk_start is %zu but prefill has no cached prefix (it must be 0)",
                            a->chunk_start);
    if (!a->k || !a->v)
        return lowp_why_set(why, why_len, "a.%s is NULL", !a->k ? "k" : "v");
    if (!k_eff || !v_eff)
        return lowp_why_set(why, why_len, "%s is NULL", !k_eff ? "k_eff" : "v_eff");
    if (!fold && (!k_scale || !v_scale))
        return lowp_why_set(why, why_len, "%s is NULL and fold is 0 (the scales must go somewhere)",
                            !k_scale ? "k_scale" : "v_scale");
    if (q_eff && a->q && (a->q_len == 0 || a->num_q_heads == 0))
        return lowp_why_set(why, why_len,
                            "a.q_len and a.num_q_heads must be nonzero when Q is given");
    if ((unsigned)a->q_type > LOWP_KV_Q_FP8)
        return lowp_why_set(why, why_len, "a.q_type %d is not a Q type", (int)a->q_type);
    size_t H = cfg.num_heads;
    size_t ng = cfg.scale_gran == LOWP_KV_SCALE_HEAD ? H : 1;
    int has_global = lowp_block_has_global_scale(f);
    if (check_scales(a->k_gs, ng, "k_gs", has_global, why, why_len) ||
        check_scales(a->v_gs, ng, "v_gs", has_global, why, why_len))
        return -1;
    float q_scale = a->q_scale == 0.0f ? 1.0f : a->q_scale;
    if (a->q_type == LOWP_KV_Q_FP8 && !(isfinite(q_scale) && q_scale > 0.0f))
        return lowp_why_set(why, why_len, "a.q_scale = %g is not a finite positive scale",
                            (double)q_scale);

    path_codecs pc;
    if (codecs_init(&pc, why, why_len)) {
        free(pc.ws_of_bf16);
        return -1;
    }
    lowp_kv_path_result r;
    memset(&r, 0, sizeof r);
    double *ks = k_scale, *vs = v_scale, *own = NULL;
    if (!ks || !vs) {
        own = malloc(2 * H * sizeof(double));
        if (!own)
            return lowp_why_set(why, why_len, "out of memory");
        ks = own;
        vs = own + H;
    }
    if (run_side(a, &pc, a->k_gs, a->k, cfg.qk_dim, k_eff, ks, &r.k_counts, why, why_len) ||
        run_side(a, &pc, a->v_gs, a->v, cfg.vo_dim, v_eff, vs, &r.v_counts, why, why_len)) {
        free(own);
        free(pc.ws_of_bf16);
        return -1;
    }
    free(pc.ws_of_bf16);

    /* Q */
    lowp_kv_qtype qt = a->q_type;
    if (qt == LOWP_KV_Q_DEFAULT)
        qt = a->path == LOWP_KV_PATH_EXACT ? LOWP_KV_Q_F32 : LOWP_KV_Q_BF16;
    r.q_scale = qt == LOWP_KV_Q_FP8 ? (double)q_scale : 1.0;
    size_t nq = a->q_len * a->num_q_heads * cfg.qk_dim;
    if (q_eff && a->q) {
        float inv = 1.0f / q_scale; /* TRT-LLM multiplies by the reciprocal (ref/notes/kernels.md 2.1) */
        for (size_t i = 0; i < nq; i++) {
            float x = a->q[i];
            switch (qt) {
            case LOWP_KV_Q_BF16: q_eff[i] = (double)rn_bf16(&pc, x); break;
            case LOWP_KV_Q_FP8:
                q_eff[i] = lowp_decode_f64(LOWP_E4M3, lowp_encode_f32(&pc.e4m3_sat, x * inv));
                break;
            default: q_eff[i] = (double)x; break;
            }
        }
    }

    /* Fold: every product is exact in binary64 (an effective value has at most 8
     * significant bits, a scale at most 24; the exponents stay far inside binary64). */
    size_t nk = a->ctx * H * cfg.qk_dim, nv = a->ctx * H * cfg.vo_dim;
    if (fold) {
        for (size_t i = 0; i < nk; i++)
            k_eff[i] *= ks[(i / cfg.qk_dim) % H];
        for (size_t i = 0; i < nv; i++)
            v_eff[i] *= vs[(i / cfg.vo_dim) % H];
        if (q_eff && a->q)
            for (size_t i = 0; i < nq; i++)
                q_eff[i] *= r.q_scale;
        for (size_t h = 0; h < H; h++) {
            ks[h] = 1.0;
            vs[h] = 1.0;
        }
        r.q_scale = 1.0;
    }
    for (size_t i = 0; i < nk; i++) {
        r.k_nan += isnan(k_eff[i]) != 0;
        r.k_inf += isinf(k_eff[i]) != 0;
    }
    for (size_t i = 0; i < nv; i++) {
        r.v_nan += isnan(v_eff[i]) != 0;
        r.v_inf += isinf(v_eff[i]) != 0;
    }
    if (q_eff && a->q)
        for (size_t i = 0; i < nq; i++)
            r.q_nan += isnan(q_eff[i]) != 0;
    free(own);
    if (res)
        *res = r;
    return 0;
}
