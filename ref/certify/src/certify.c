/* ref/certify/src/certify.c: lowp/certify.h, a per-element certificate of a third-party
 * paged-decode attention kernel against the arithmetic it declares.
 *
 * ---- Layouts: the owners' memory order ------------------------------------------------
 * Each adapter copies the bytes of the pages the page table references into a lowp paged
 * cache (lowp/kvcache.h, NHD, linear scales), placing every code row and block scale by
 * the owner's address formula (below) and lowp's own offsets; nothing is converted, so the
 * cache's exact read (element x block scale x global scale) is the value the kernel read.
 *   vllm-fp8      vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend.
 *                 get_kv_cache_shape: (2, num_blocks, block_size, num_kv_heads, head_size),
 *                 K = [0], V = [1]; FP8 stored as uint8 (STR_DTYPE_TO_TORCH_DTYPE "fp8" ->
 *                 torch.uint8); csrc/cache_kernels.cu reshape_and_cache_flash writes
 *                 fp8 = cvt(x / scale), so the decode-side value is fp8 * k_scale.
 *                 Block (page) p, slot t, head h, dim d at ((p*P + t)*H + h)*D + d.
 *   flashinfer    docs/tutorials/kv_layout.rst: NHD (page_size, num_heads, head_dim) or HND
 *                 (num_heads, page_size, head_dim) per page; CSR kv_indptr / kv_indices /
 *                 kv_last_page_len, int32; flashinfer/decode.py folds k_scale into sm_scale
 *                 and applies v_scale to the output (`out *= v_scale`).
 *   sglang-nvfp4  python/sglang/srt/layers/quantization/fp4_kv_cache_quant_method.py
 *                 NVFP4KVCacheMethod.create_buffers: k_buffer (size, heads, dim // 2),
 *                 native_k_scale_buffer (size // page_size, heads, page_size, dim // 16)
 *                 (shapes pinned by its unit test), V's native scales through
 *                 nvfp4_v_scale_swizzle_indices (the TRT-LLM order below).
 *   trtllm        cpp/tensorrt_llm/kernels/kvCacheUtils.h KVBlockArray::getKVLocalIdx:
 *                 headIdx * tokensPerBlock * dimsPerHead + localToken * dimsPerHead +
 *                 channel (HND blocks); unfusedAttentionKernels_2_template.h
 *                 quantizeAndWriteFP4KVCache: K scale at the linear index, V scale at
 *                 (tok/4)*4*NUM_SFS_PER_HEAD + dimIdx*4 + tok%4 ("interleaved layout
 *                 (num_tokens/4, num_sfs_per_head, 4) ... only used by trtllm-gen").
 * The 4-token interleave of a [page_size][S] scale tile, written here from TRT-LLM's
 * formula (lowp/kvcache.h states the same map as lowp_kv_sf_interleave):
 *   (t, s) -> flat (t/4)*4*S + s*4 + t%4,  tile position (flat / S, flat % S).
 *
 * ---- The declared arithmetic and its bound (lowp_certify_row_bound) ------------------
 * The kernel is assumed to compute, for one query row over n visible keys (any order of
 * summation, any split of the work, any placement of the running max):
 *   q^     the query rounded as declared (computed here exactly, so it is no error term);
 *   s^_j   = fl32(fl32(sm_scale [x q_scale x k_scale] [x log2 e]) x fl32-sum_d q^_d k_jd):
 *          K elements enter exactly (FP8, BF16, E2M1 x E4M3 values are exact MMA inputs),
 *          products are exact or rounded once, the D terms are summed in fp32;
 *   p~_j   = exp(s^_j - m) for some running max m (exp or exp2 with log2 e folded);
 *   P_j    = p~_j rounded to p_dtype;  o = fp32-sum_j P_j v_j,  l = fp32-sum_j p~_j (or
 *          of P_j), with online-softmax rescales by alpha = exp(m_old - m_new);
 *   split-K: splits of split_tokens positions give (m_c, l_c, o_c), o_c / l_c possibly
 *          stored in partial_dtype, merged with w_c = exp(m_c - M);
 *   out    = RN_out(fl32(o / l) x v_scale), or RN_out(RN_out(o / l) x v_scale).
 * Unit roundoffs: u = 2^-24 (binary32 RN); u_acc = 2^-22 per accumulation step, which covers
 * RN (u), truncation (2u) and the H200 MMA's alignment truncation (at most 36u per 16
 * terms, lowp/mma.h and gpu/check/conform.c, i.e. 2.25u per term); u_exp = 2^-21 for exp
 * and exp2 approximations (ex2.approx.f32: 2^-22 relative; the rounding of its argument is
 * counted in the 6u term below). u_x, x_min: the unit roundoff and smallest normal of
 * dtype x (F32 2^-24, 2^-126; BF16 2^-8, 2^-126; F16 2^-11, 2^-14; E4M3 2^-4, 2^-6): a value
 * v rounded to x is off by at most u_x max(|v|, x_min) (subnormal spacing is 2 u_x x_min).
 *
 * Exact quantities (binary64 here; their own rounding, < 1e-15 relative, is inside the
 * factor 2 below): s_j = sm q^.k_j, A_j = sm sum_d |q^_d k_jd|, m = max_j s_j, p_j =
 * exp(s_j - m) (max 1), L = sum_j p_j >= 1, o_d = sum_j p_j v_jd / L (the exact output),
 * V_d = sum_j p_j |v_jd| / L (the probability-weighted |v|), W_d = sum_j max(p_j, p_min)
 * |v_jd| / L, W_l = sum_j max(p_j, p_min) / L, vmax_d = max_j |v_jd|, n keys, D = qk_dim.
 *
 * 1. Scores: a fp32 sum of D exact or once-rounded products in any order is off by at most
 *    D u_acc sum|terms| (Higham 3.5 with u_acc per step), the scale by at most 2 roundings
 *    forming it, 1 applying it and 2 for log2 e, the subtraction s^ - m by 1:
 *      |(s^_j - m^) - (s_j - m)|  <=  a_j + 6u (|s_j| + |s_j - m|)  (+ the common
 *    shift, which cancels in o / l), a_j = D u_acc A_j. Products rounded to prod_dtype add
 *    u_x A_j + D u_x x_min |sm| to a_j. Tensor-core steps (mma_frac f, fo = min(f, 23)): a
 *    step adding g terms to its accumulator C is off by at most (g + 1) 2^-f max + 2^-fo |C'|
 *    <= ((g + 1) 2^-f + 2^-fo) M (M = |C| + the |terms|, >= the largest and >= |C'|); over the
 *    S = ceil(D / g) steps of the dot, M <= sum|terms| and S (g + 1) <= 2 D + 2 for every
 *    1 <= g <= D, so a_j = max(D u_acc, (2 D + 2) 2^-f + D 2^-fo) A_j, whatever the width.
 *    With exp's error and the split merge's w_c (one more exp of the same kind), each
 *    weight is p_j c (1 + d_j) with one common c and
 *      |d_j| <= delta = max_j [a_j + 6u (|s_j| + |s_j - m|)] + 2 u_exp.
 *    Weights p(1+d) in both sums move o by sum_j p_j d_j (v_j - o) / sum_j p_j (1 + d_j):
 *      E1 = delta (V_d + |o_d|).
 * 2. P rounded to p_dtype: each P_j is off by u_p max(p~_j, p_min) (p~_j <= 1 relative to
 *    the running max; a later rescale by alpha <= 1 only shrinks it), in the numerator,
 *    and in the denominator if l sums the rounded P: E2 = u_p (W_d + W_l |o_d|), without
 *    the W_l term when l_unrounded declares that l sums the weights before the rounding.
 * 3. Accumulation of o and l: a chain of at most c = ceil(len / b) + b + C + 2 steps per
 *    term (len = split_tokens or n, b = mma_k positions summed per step, C splits merged,
 *    the rescale and the division), each one add (u_acc) and one rescale multiply (u):
 *      E3 = 2 c u_acc (V_d + |o_d|).
 *    Tensor-core steps (mma_frac): each of the S = ceil(len / b) steps of o's chain is off
 *    by at most e_b M_s, e_b = (b + 1) 2^-f + 2^-fo (item 1), M_s <= sum_j P_j |v_jd| (its
 *    accumulator and its terms), so o / l moves by at most S e_b V_d more: E3 += S e_b V_d
 *    (kept beside the chain term, which still charges the rescales and the merge).
 * 4. Split-K partials stored in partial_dtype (not F32): E4 = u_part (V_d + part_min).
 * 5. The division o / l and the V scale (its product and the rounding of a folded bmm2
 *    scale): E5 = 4u |o_d|.
 * 6. fp32 underflow (ftz) of weights and accumulators below 2^-126: E6 = (n + c) 2^-126
 *    vmax_d (L >= 1 in units of the largest weight).
 * 7. Output rounding: E7 = u_o max(|o_d|, o_min); with v_scale_after_output, plus the
 *    rounding before the scale: u_o max(|o_d| / v_scale, o_min) v_scale.
 * All terms are first-order; when the relative ones are small, delta + u_p W_l + 2 c u_acc
 * [+ S e_b] + 4u <= 1/8 (else -1: the analysis does not apply; u_p W_l only when l may sum
 * the rounded P), the second-order remainder is below
 * (1 - 1/8)^-2 - 1 < 1/3 of the first-order sum, so
 *      B_d = 2 (E1 + E2 + E3 + E4 + E5 + E6 + E7)
 * is an upper bound on |out_d - o_d|. tests/test_certify.c holds emulations of every
 * declared arithmetic (random and adversarial cases) to B and checks that a kernel doing
 * one more rounding than it declares is caught.
 *
 * ---- Extend / prefill: the same bound per query row ------------------------------------
 * With qo_indptr, query i of sequence b (position P_b + i, P_b = n_b - q_len_b) is certified
 * as a decode over its visible prefix of n = P_b + i + 1 keys: exact value, bound and
 * verdict of that row alone. lowp_certify_row_bound needs nothing else, because every term
 * above is a property of one row: a row's scores, max, weights, sums and division involve
 * only its own query and its visible keys, whatever the kernel packs into one MMA tile
 * (other rows of the tile are other rows of the M dimension: their products never enter
 * this row's sums). What a causal kernel adds, per row, is
 *   - masked positions (past P_b + i) in a partially visible key tile: their score is -Inf
 *     and their weight exp(-Inf - m) = +0 exactly, so they add exact zeros to l and o (x + 0
 *     = x in binary32) and leave the running max, hence alpha, unchanged: no error term, and
 *     no extra step in the chain c (b positions per step over positions 0 .. n - 1 from 0
 *     is still ceil(n / b) steps however the tile boundaries fall, each tile aligned at 0);
 *   - key tiles processed entirely past the row (a warp streaming to its last row's
 *     prefix): m' = m, p = +0 and alpha = exp(0). A value of alpha other than 1 would be a
 *     factor common to o and l (it cancels in o / l) plus one rounding of each rescale per
 *     such tile, which the chain does not charge; the bound takes alpha(0) = 1 exactly as
 *     part of the declaration (exp, exp2, ex2.approx.f32 and lowp's exp2_sw give 1 at 0;
 *     lowp/attn_gpu_extend.h's kernel streams such tiles and is certified in
 *     tests/test_certify.c);
 *   - a split of a row's key range across CTAs (split-KV prefill): that is split-K, and
 *     the kernel declares it with split_tokens (each split's length at most split_tokens,
 *     C = ceil(n / split_tokens) splits, counted per row).
 * A kernel that lets a row see a key past P_b + i is not covered by any bound: its exact
 * attention is another function, and the certificate reports the row outside.
 *
 * ---- Verdicts ---------------------------------------------------------------------------
 * The exact output lies within r of the binary64 reference ref (r = lowp_attn_ref_bounds,
 * widened by two binary64 ulps). EXACT when every value of [ref - r, ref + r] rounds (RN,
 * in out_dtype) to got; WITHIN when |got - ref| + r <= B; OUTSIDE when |got - ref| - r > B.
 * Anything else is open, and the query group (G rows of one KV head) goes to the MPFR
 * oracle (lowp_attn_oracle_mpfr, binary64 correctly rounded: r = half an ulp); what is
 * still open after it (|got - exact| within 2^-53 relative of B, or of a rounding
 * boundary) is called WITHIN.
 */
#include "lowp/names.h"
#include "lowp/certify.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn.h"
#include "lowp/format.h"
#include "lowp/why.h"

/* ---- names --------------------------------------------------------------------------- */
static const char *const layout_names[LOWP_CERTIFY_LAYOUT_COUNT] = {"vllm-fp8", "flashinfer", "sglang-nvfp4",
                                                                     "trtllm"};
static const char *const dtype_names[LOWP_CERTIFY_DTYPE_COUNT] = {"f32", "bf16", "f16", "e4m3"};
static const char *const verdict_names[LOWP_CERTIFY_VERDICT_COUNT] = {"exact", "within", "outside",
                                                                       "nan-mismatch"};

const char *lowp_certify_layout_name(lowp_certify_layout l)
{
    return (unsigned)l < LOWP_CERTIFY_LAYOUT_COUNT ? layout_names[l] : "?";
}
const char *lowp_certify_dtype_name(lowp_certify_dtype d)
{
    return (unsigned)d < LOWP_CERTIFY_DTYPE_COUNT ? dtype_names[d] : "?";
}
const char *lowp_certify_verdict_name(lowp_certify_verdict v)
{
    return (unsigned)v < LOWP_CERTIFY_VERDICT_COUNT ? verdict_names[v] : "?";
}

int lowp_certify_layout_parse(const char *name, lowp_certify_layout *out)
{
    int i = lowp_name_index(layout_names, LOWP_CERTIFY_LAYOUT_COUNT, name);
    if (i < 0)
        return -1;
    *out = (lowp_certify_layout)i;
    return 0;
}
int lowp_certify_dtype_parse(const char *name, lowp_certify_dtype *out)
{
    int i = lowp_name_index(dtype_names, LOWP_CERTIFY_DTYPE_COUNT, name);
    if (i < 0)
        return -1;
    *out = (lowp_certify_dtype)i;
    return 0;
}

/* ---- defaults ------------------------------------------------------------------------ */
lowp_certify_cache lowp_certify_cache_init(lowp_certify_layout l, size_t num_pages, size_t page_size,
                                           size_t num_kv_heads, size_t qk_dim, size_t vo_dim)
{
    lowp_certify_cache c;
    memset(&c, 0, sizeof c);
    c.layout = l;
    c.num_pages = num_pages;
    c.page_size = page_size;
    c.num_kv_heads = num_kv_heads;
    c.qk_dim = qk_dim;
    c.vo_dim = vo_dim;
    c.k_sf_order = c.v_sf_order = LOWP_KV_SF_LINEAR;
    c.code_order = c.sf_order = LOWP_KV_NHD;
    switch (l) {
    case LOWP_CERTIFY_VLLM_FP8: c.format = LOWP_FP8_E4M3; break;
    case LOWP_CERTIFY_FLASHINFER: c.format = LOWP_BF16_PASS; break;
    case LOWP_CERTIFY_SGLANG_NVFP4: /* codes slot-major (NHD), native scales per page HND */
        c.format = LOWP_NVFP4;
        c.sf_order = LOWP_KV_HND;
        c.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
        break;
    case LOWP_CERTIFY_TRTLLM:
        c.format = LOWP_NVFP4;
        c.code_order = c.sf_order = LOWP_KV_HND;
        c.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
        break;
    }
    return c;
}

static int dims_ok(const char *name, int ndim, const size_t *shape, int want, const char *what, char *why,
                   size_t why_len)
{
    if (ndim != want)
        return lowp_why_set(why, why_len, "%s: rank %d, expected %s", name, ndim, what);
    for (int k = 0; k < ndim; k++)
        if (shape[k] == 0)
            return lowp_why_set(why, why_len, "%s: dimension %d is 0 (expected %s)", name, k, what);
    return 0;
}

int lowp_certify_cache_shapes(lowp_certify_cache *c, int kn, const size_t *ks, int vn, const size_t *vsh, int ksn,
                              const size_t *kss, int vsn, const size_t *vss, size_t elem, char *why, size_t why_len)
{
    const char *ln = lowp_certify_layout_name(c->layout);
    if (c->layout == LOWP_CERTIFY_VLLM_FP8 || c->layout == LOWP_CERTIFY_FLASHINFER) {
        const char *what = c->layout == LOWP_CERTIFY_VLLM_FP8 ? "[num_blocks, block_size, num_kv_heads, head_size]"
                           : c->code_order == LOWP_KV_NHD   ? "[pages, page_size, H, D] (nhd)"
                                                            : "[pages, H, page_size, D] (hnd)";
        if (dims_ok("k_cache", kn, ks, 4, what, why, why_len) || dims_ok("v_cache", vn, vsh, 4, what, why, why_len))
            return -1;
        if (ksn != 0 || vsn != 0)
            return lowp_why_set(why, why_len, "layout %s has no block scales", ln);
        if (elem == 1)
            c->format = LOWP_FP8_E4M3;
        else if (elem == 2 && c->layout == LOWP_CERTIFY_FLASHINFER)
            c->format = LOWP_BF16_PASS;
        else
            return lowp_why_set(why, why_len, "k_cache: %zu-byte elements are not a %s cache (%s)", elem, ln,
                                c->layout == LOWP_CERTIFY_VLLM_FP8 ? "uint8 fp8_e4m3" : "bf16, or uint8 fp8_e4m3");
        int nhd = c->code_order == LOWP_KV_NHD;
        c->num_pages = ks[0];
        c->page_size = nhd ? ks[1] : ks[2];
        c->num_kv_heads = nhd ? ks[2] : ks[1];
        c->qk_dim = ks[3];
        c->vo_dim = vsh[3];
        if (vsh[0] != ks[0] || vsh[1] != ks[1] || vsh[2] != ks[2])
            return lowp_why_set(why, why_len, "v_cache: shape differs from k_cache's in its first three dimensions");
        return 0;
    }
    const char *what = "[pages, H, page_size, D/16]";
    if (dims_ok("k_scales", ksn, kss, 4, what, why, why_len) || dims_ok("v_scales", vsn, vss, 4, what, why, why_len))
        return -1;
    int sg = c->layout == LOWP_CERTIFY_SGLANG_NVFP4;
    const char *cw = sg ? "[size, H, D/2]" : "[pages, H, page_size, D/2]";
    if (dims_ok("k_cache", kn, ks, sg ? 3 : 4, cw, why, why_len) || dims_ok("v_cache", vn, vsh, sg ? 3 : 4, cw, why, why_len))
        return -1;
    if (elem != 1)
        return lowp_why_set(why, why_len, "k_cache: nvfp4 pools are bytes (uint8), not %zu-byte elements", elem);
    c->format = LOWP_NVFP4;
    size_t pages = kss[0], H = kss[1], P = kss[2];
    c->num_pages = pages;
    c->num_kv_heads = H;
    c->page_size = P;
    c->qk_dim = ks[kn - 1] * 2;
    c->vo_dim = vsh[vn - 1] * 2;
    if (kss[3] * 16 != c->qk_dim || vss[3] * 16 != c->vo_dim || vss[0] != pages || vss[1] != H || vss[2] != P)
        return lowp_why_set(why, why_len, "k_scales/v_scales: shapes do not hold one E4M3 scale per 16 elements of "
                            "[pages %zu, H %zu, page_size %zu] (head dims %zu, %zu)", pages, H, P, c->qk_dim, c->vo_dim);
    int bad = sg ? (ks[0] != pages * P || ks[1] != H || vsh[0] != pages * P || vsh[1] != H)
                 : (ks[0] != pages || ks[1] != H || ks[2] != P || vsh[0] != pages || vsh[1] != H || vsh[2] != P);
    if (bad)
        return lowp_why_set(why, why_len, "k_cache/v_cache: shapes do not match the scale pools' [pages %zu, H %zu, "
                            "page_size %zu]%s", pages, H, P, sg ? " (sglang: size = pages x page_size)" : "");
    return 0;
}

lowp_certify_arith lowp_certify_arith_default(void)
{
    lowp_certify_arith a;
    memset(&a, 0, sizeof a);
    a.q_dtype = LOWP_CERTIFY_F32;
    a.p_dtype = LOWP_CERTIFY_BF16;
    a.out_dtype = LOWP_CERTIFY_BF16;
    a.partial_dtype = LOWP_CERTIFY_F32;
    return a;
}

lowp_certify_args lowp_certify_args_init(const lowp_certify_cache *c, const lowp_certify_arith *a,
                                         size_t num_q_heads, const float *q, const float *out)
{
    lowp_certify_args r;
    memset(&r, 0, sizeof r);
    r.cache = *c;
    r.arith = *a;
    r.num_q_heads = num_q_heads;
    r.q = q;
    r.out = out;
    r.only_seq = -1;
    r.diagnose = 1;
    r.n_worst = 8;
    return r;
}

size_t lowp_certify_abi_size(int which)
{
    switch (which) {
    case 0: return sizeof(lowp_certify_cache);
    case 1: return sizeof(lowp_certify_arith);
    case 2: return sizeof(lowp_certify_args);
    case 3: return sizeof(lowp_certify_result);
    case 4: return sizeof(lowp_certify_worst);
    default: return 0;
    }
}

/* ---- dtypes --------------------------------------------------------------------------- */
static const double dt_u[LOWP_CERTIFY_DTYPE_COUNT] = {0x1p-24, 0x1p-8, 0x1p-11, 0x1p-4};
static const double dt_min[LOWP_CERTIFY_DTYPE_COUNT] = {0x1p-126, 0x1p-126, 0x1p-14, 0x1p-6};
static const lowp_format dt_fmt[LOWP_CERTIFY_DTYPE_COUNT] = {LOWP_BF16 /* unused */, LOWP_BF16, LOWP_F16,
                                                              LOWP_E4M3};

/* RN of a binary64 value into dtype d (CUDA's conversions: bf16/f16 round the double
 * directly, E4M3 saturates), as a binary64. */
typedef struct rounder {
    lowp_certify_dtype d;
    lowp_codec c;
} rounder;

static int rounder_init(rounder *r, lowp_certify_dtype d)
{
    r->d = d;
    if (d == LOWP_CERTIFY_F32)
        return 0;
    return lowp_codec_init(&r->c, dt_fmt[d], LOWP_PROFILE_CUDA, LOWP_RN,
                           d == LOWP_CERTIFY_E4M3 ? LOWP_SAT_ON : LOWP_SAT_DEFAULT, NULL, 0);
}

static double round_to(const rounder *r, double x)
{
    if (r->d == LOWP_CERTIFY_F32)
        return (double)(float)x;
    return lowp_decode_f64(dt_fmt[r->d], lowp_encode_f64(&r->c, x));
}

double lowp_certify_round_q(const lowp_certify_arith *a, float q)
{
    rounder r;
    if ((unsigned)a->q_dtype >= LOWP_CERTIFY_DTYPE_COUNT || rounder_init(&r, a->q_dtype))
        return NAN;
    if (a->q_dtype == LOWP_CERTIFY_E4M3) {
        double qs = a->q_scale > 0 ? (double)a->q_scale : 1.0;
        return round_to(&r, (double)(float)((double)q / qs)) * qs; /* fl32 divide, then e4m3 */
    }
    return round_to(&r, (double)q);
}

/* ---- the bound ------------------------------------------------------------------------- */
static const double U = 0x1p-24, U_ACC = 0x1p-22, U_EXP = 0x1p-21;

int lowp_certify_row_bound(const lowp_certify_arith *a, size_t n, size_t D, size_t Dv, double sm,
                           double v_scale, const double *q, const double *k, const double *v,
                           double *bound)
{
    int bad = 0;
    double *s = malloc((n ? n : 1) * sizeof *s);
    if (s == NULL) {
        for (size_t d = 0; d < Dv; d++)
            bound[d] = INFINITY;
        return -1;
    }
    /* scores and delta: a_j = (acc_rate + u_prod) A_j + D u_prod x_min |sm| (item 1) */
    const int mf = a->mma_frac;
    const double ff = mf > 0 ? ldexp(1.0, -mf) : 0.0, ffo = mf > 0 ? ldexp(1.0, -(mf < 23 ? mf : 23)) : 0.0;
    double acc_rate = (double)D * U_ACC;
    if (mf > 0 && (2.0 * (double)D + 2.0) * ff + (double)D * ffo > acc_rate)
        acc_rate = (2.0 * (double)D + 2.0) * ff + (double)D * ffo;
    const int prod = a->prod_dtype != LOWP_CERTIFY_F32;
    const double up_prod = prod ? dt_u[a->prod_dtype] : 0.0;
    const double prod_tiny = prod ? (double)D * dt_u[a->prod_dtype] * dt_min[a->prod_dtype] * fabs(sm) : 0.0;
    double m = -INFINITY, dmax = 0.0;
    int finite = 1;
    for (size_t j = 0; j < n && finite; j++) {
        double dot = 0.0, abs = 0.0;
        for (size_t d = 0; d < D; d++) {
            double x = q[d] * k[j * D + d];
            dot += x;
            abs += fabs(x);
        }
        s[j] = sm * dot;
        if (!isfinite(s[j]) || !isfinite(abs))
            finite = 0;
        double aj = (acc_rate + up_prod) * fabs(sm) * abs + prod_tiny;
        if (aj > dmax)
            dmax = aj;
        if (s[j] > m)
            m = s[j];
    }
    if (!finite || n == 0) {
        for (size_t d = 0; d < Dv; d++)
            bound[d] = INFINITY;
        free(s);
        return 0;
    }
    double delta = 0.0, L = 0.0, Wl = 0.0;
    const int prnd = a->p_dtype != LOWP_CERTIFY_F32;
    const double up = prnd ? dt_u[a->p_dtype] : 0.0, pmin = dt_min[a->p_dtype];
    for (size_t j = 0; j < n; j++) {
        double t = dmax + 6.0 * U * (fabs(s[j]) + fabs(s[j] - m));
        if (t > delta)
            delta = t;
        s[j] = exp(s[j] - m); /* p_j, the largest is 1 */
        L += s[j];
        Wl += s[j] > pmin ? s[j] : pmin;
    }
    delta += 2.0 * U_EXP;
    Wl /= L;
    size_t b = a->mma_k > 1 ? a->mma_k : 1;
    size_t len = a->split_tokens > 0 && a->split_tokens < n ? a->split_tokens : n;
    size_t C = a->split_tokens > 0 ? (n + a->split_tokens - 1) / a->split_tokens : 1;
    double chain = (double)((len + b - 1) / b + b + C + 2);
    /* tensor-core steps of o's chain (item 3): S e_b */
    const double mma_chain = mf > 0 ? (double)((len + b - 1) / b) * ((double)(b + 1) * ff + ffo) : 0.0;
    const double up_l = a->l_unrounded ? 0.0 : up;
    double rel = delta + up_l * Wl + 2.0 * chain * U_ACC + mma_chain + 4.0 * U;
    if (!(rel <= 0.125))
        bad = 1;
    const int part = a->split_tokens > 0 && C > 1 && a->partial_dtype != LOWP_CERTIFY_F32;
    const double upart = part ? dt_u[a->partial_dtype] : 0.0, partmin = dt_min[a->partial_dtype];
    const double uo = dt_u[a->out_dtype], omin = dt_min[a->out_dtype];
    const double vs = fabs(v_scale) > 0 ? fabs(v_scale) : 1.0;
    for (size_t d = 0; d < Dv; d++) {
        double o = 0.0, Vd = 0.0, Wd = 0.0, vmax = 0.0;
        for (size_t j = 0; j < n; j++) {
            double x = v[j * Dv + d], ax = fabs(x), p = s[j];
            o += p * x;
            Vd += p * ax;
            Wd += (p > pmin ? p : pmin) * ax;
            vmax = ax > vmax ? ax : vmax;
        }
        if (!isfinite(Vd) || !isfinite(Wd)) {
            bound[d] = INFINITY;
            continue;
        }
        o = fabs(o / L);
        Vd /= L;
        Wd /= L;
        double E1 = delta * (Vd + o);
        double E2 = up * Wd + up_l * Wl * o;
        double E3 = 2.0 * chain * U_ACC * (Vd + o) + mma_chain * Vd;
        double E4 = upart * (Vd + partmin);
        double E5 = 4.0 * U * o;
        double E6 = ((double)n + chain) * 0x1p-126 * vmax;
        double E7 = uo * (o > omin ? o : omin);
        if (a->v_scale_after_output)
            E7 += uo * (o / vs > omin ? o / vs : omin) * vs;
        bound[d] = 2.0 * (E1 + E2 + E3 + E4 + E5 + E6 + E7);
    }
    free(s);
    return bad ? -1 : 0;
}

/* ---- layouts: production bytes into a lowp cache -------------------------------------- */
static int check_arith(const lowp_certify_arith *a, char *why, size_t why_len)
{
    if ((unsigned)a->q_dtype >= LOWP_CERTIFY_DTYPE_COUNT || (unsigned)a->p_dtype >= LOWP_CERTIFY_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "arith: q_dtype and p_dtype must be f32, bf16, f16 or e4m3");
    if (a->out_dtype == LOWP_CERTIFY_E4M3 || (unsigned)a->out_dtype >= LOWP_CERTIFY_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "arith: out_dtype must be f32, bf16 or f16");
    if (a->partial_dtype == LOWP_CERTIFY_E4M3 || (unsigned)a->partial_dtype >= LOWP_CERTIFY_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "arith: partial_dtype must be f32, bf16 or f16");
    if (!(a->q_scale >= 0) || !isfinite(a->q_scale))
        return lowp_why_set(why, why_len, "arith: q_scale %g must be finite and > 0 (0 means 1)",
                            (double)a->q_scale);
    if (!isfinite(a->sm_scale))
        return lowp_why_set(why, why_len, "arith: sm_scale must be finite");
    if (a->mma_k > 4096)
        return lowp_why_set(why, why_len, "arith: mma_k %zu is not an MMA width (at most 4096)", a->mma_k);
    if (a->prod_dtype == LOWP_CERTIFY_E4M3 || (unsigned)a->prod_dtype >= LOWP_CERTIFY_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "arith: prod_dtype must be f32, bf16 or f16");
    if (a->l_unrounded != 0 && a->l_unrounded != 1)
        return lowp_why_set(why, why_len, "arith: l_unrounded must be 0 or 1, not %d", a->l_unrounded);
    if (a->mma_frac != 0 && (a->mma_frac < 8 || a->mma_frac > 25))
        return lowp_why_set(why, why_len, "arith: mma_frac %d is not a tensor-core window (0, or 8..25 fraction bits)",
                            a->mma_frac);
    return 0;
}

static int check_cache(const lowp_certify_cache *c, char *why, size_t why_len)
{
    if ((unsigned)c->layout >= LOWP_CERTIFY_LAYOUT_COUNT)
        return lowp_why_set(why, why_len, "cache: unknown layout %d", (int)c->layout);
    const char *ln = lowp_certify_layout_name(c->layout);
    switch (c->layout) {
    case LOWP_CERTIFY_VLLM_FP8:
        if (c->format != LOWP_FP8_E4M3)
            return lowp_why_set(why, why_len, "cache: layout %s holds fp8_e4m3 codes, not %s", ln,
                                lowp_block_format_name(c->format));
        break;
    case LOWP_CERTIFY_FLASHINFER:
        if (c->format != LOWP_FP8_E4M3 && c->format != LOWP_BF16_PASS)
            return lowp_why_set(why, why_len, "cache: layout %s is certified for bf16 or fp8_e4m3 caches, not %s", ln,
                                lowp_block_format_name(c->format));
        break;
    default:
        if (c->format != LOWP_NVFP4)
            return lowp_why_set(why, why_len, "cache: layout %s holds nvfp4 codes, not %s", ln,
                                lowp_block_format_name(c->format));
    }
    if (c->num_pages == 0 || c->page_size == 0 || c->num_kv_heads == 0 || c->qk_dim == 0 || c->vo_dim == 0)
        return lowp_why_set(why, why_len, "cache: num_pages, page_size, num_kv_heads, qk_dim and vo_dim must be > 0");
    if (c->k == NULL || c->v == NULL)
        return lowp_why_set(why, why_len, "cache: the K and V code buffers must not be NULL");
    if (c->format == LOWP_NVFP4 && (c->k_sf == NULL || c->v_sf == NULL))
        return lowp_why_set(why, why_len, "cache: layout %s needs the K and V block-scale buffers", ln);
    if ((unsigned)c->code_order > LOWP_KV_HND || (unsigned)c->sf_order > LOWP_KV_HND ||
        (unsigned)c->k_sf_order > LOWP_KV_SF_INTERLEAVE4 || (unsigned)c->v_sf_order > LOWP_KV_SF_INTERLEAVE4)
        return lowp_why_set(why, why_len, "cache: a page or scale order is out of range");
    if (c->format != LOWP_NVFP4 && (c->k_sf_order != LOWP_KV_SF_LINEAR || c->v_sf_order != LOWP_KV_SF_LINEAR))
        return lowp_why_set(why, why_len, "cache: scale orders apply to nvfp4 caches only");
    for (int w = 0; w < 2; w++) {
        size_t dim = w ? c->vo_dim : c->qk_dim;
        if ((w ? c->v_sf_order : c->k_sf_order) == LOWP_KV_SF_INTERLEAVE4 &&
            (c->page_size % 4 != 0 || dim % 64 != 0))
            return lowp_why_set(why, why_len,
                                "cache: %s scales 4-token interleaved need page_size %% 4 == 0 and head dim %% 64 == 0 "
                                "(page_size %zu, dim %zu)",
                                w ? "V" : "K", c->page_size, dim);
    }
    float sc[2] = {c->k_scale, c->v_scale};
    for (int w = 0; w < 2; w++) {
        if (!(sc[w] > 0) || !isfinite(sc[w]))
            return lowp_why_set(why, why_len, "cache: %s %g must be finite and > 0 (an unset scale is an error, "
                                "never 1.0 by default)", w ? "v_scale" : "k_scale", (double)sc[w]);
        if (c->format == LOWP_BF16_PASS && sc[w] != 1.0f)
            return lowp_why_set(why, why_len, "cache: %s is %g but a bf16 cache has no scale (give 1)",
                                w ? "v_scale" : "k_scale", (double)sc[w]);
    }
    if (c->batch == 0)
        return lowp_why_set(why, why_len, "cache: batch must be > 0");
    if (c->block_table == NULL && (c->indptr == NULL || c->indices == NULL || c->last_page_len == NULL))
        return lowp_why_set(why, why_len, "cache: give block_table + seq_lens or indptr + indices + last_page_len");
    if (c->block_table != NULL && (c->seq_lens == NULL || c->max_blocks == 0))
        return lowp_why_set(why, why_len, "cache: block_table needs seq_lens and max_blocks > 0");
    return 0;
}

/* The CSR page table of the cache (owned arrays in *own when converted from a block
 * table). */
typedef struct owned_pt {
    int32_t *indptr, *indices, *last;
} owned_pt;

static int make_page_table(const lowp_certify_cache *c, lowp_kv_page_table *pt, owned_pt *own, char *why,
                           size_t why_len)
{
    memset(own, 0, sizeof *own);
    const size_t B = c->batch, P = c->page_size;
    if (c->block_table == NULL) {
        *pt = (lowp_kv_page_table){B, c->indptr, c->indices, c->last_page_len};
    } else {
        own->indptr = malloc((B + 1) * sizeof *own->indptr);
        own->last = malloc(B * sizeof *own->last);
        if (own->indptr == NULL || own->last == NULL)
            return lowp_why_set(why, why_len, "out of memory for the page table");
        size_t total = 0;
        own->indptr[0] = 0;
        for (size_t b = 0; b < B; b++) {
            int32_t len = c->seq_lens[b];
            if (len <= 0)
                return lowp_why_set(why, why_len, "seq_lens[%zu] is %d: a decode sequence holds at least one token", b,
                                    (int)len);
            size_t np = ((size_t)len + P - 1) / P;
            if (np > c->max_blocks)
                return lowp_why_set(why, why_len, "seq_lens[%zu] = %d needs %zu blocks of %zu, block_table has %zu", b,
                                    (int)len, np, P, c->max_blocks);
            total += np;
            if (total > (size_t)INT32_MAX)
                return lowp_why_set(why, why_len, "block_table: more than 2^31 pages in use");
            own->indptr[b + 1] = (int32_t)total;
            own->last[b] = (int32_t)((size_t)len - (np - 1) * P);
        }
        own->indices = malloc((total ? total : 1) * sizeof *own->indices);
        if (own->indices == NULL)
            return lowp_why_set(why, why_len, "out of memory for the page table");
        for (size_t b = 0; b < B; b++)
            for (int32_t i = own->indptr[b]; i < own->indptr[b + 1]; i++)
                own->indices[i] = c->block_table[b * c->max_blocks + (size_t)(i - own->indptr[b])];
        *pt = (lowp_kv_page_table){B, own->indptr, own->indices, own->last};
    }
    if (lowp_kv_page_table_check(pt, c->num_pages, P, why, why_len))
        return -1;
    for (size_t b = 0; b < B; b++)
        if (lowp_kv_seq_len(pt, P, b) == 0)
            return lowp_why_set(why, why_len, "sequence %zu is empty: a decode query sees at least its own key", b);
    return 0;
}

static void free_pt(owned_pt *o)
{
    free(o->indptr);
    free(o->indices);
    free(o->last);
}

/* Tile position of scale (t, s) of an [page_size][S] tile in the given order. */
static void tile_pos(lowp_kv_sf_order o, size_t t, size_t s, size_t S, size_t *tt, size_t *ss)
{
    if (o == LOWP_KV_SF_INTERLEAVE4) {
        size_t flat = (t / 4) * 4 * S + s * 4 + t % 4; /* TRT-LLM quantizeAndWriteFP4KVCache */
        *tt = flat / S;
        *ss = flat % S;
    } else {
        *tt = t;
        *ss = s;
    }
}

/* Byte offset of row (page, slot, head) of `unit`-byte rows in a pool of the given order. */
static size_t pool_off(lowp_kv_layout o, size_t P, size_t H, size_t page, size_t slot, size_t head, size_t unit)
{
    return (o == LOWP_KV_NHD ? (page * P + slot) * H + head : (page * H + head) * P + slot) * unit;
}

/* The owner's byte offsets of row (page, slot t, head h) of side w of c: its codes, and its
 * block scale s (0 .. S-1) of that row. */
static size_t user_code_off(const lowp_certify_cache *c, size_t rb, size_t p, size_t t, size_t h)
{
    return pool_off(c->code_order, c->page_size, c->num_kv_heads, p, t, h, rb);
}
static size_t user_scale_off(const lowp_certify_cache *c, int w, size_t S, size_t p, size_t t, size_t h, size_t s)
{
    size_t tt, ss;
    tile_pos(w ? c->v_sf_order : c->k_sf_order, t, s, S, &tt, &ss);
    return pool_off(c->sf_order, c->page_size, c->num_kv_heads, p, tt, h, S) + ss;
}

/* A lowp cache (NHD, linear scales) of c's sizes, format and global scales, recipe given
 * (the cache's default when NULL); its config in *cfg. */
static int model_cache(const lowp_certify_cache *c, const lowp_recipe *recipe, lowp_kv_config *cfg,
                       lowp_kvcache **out, char *why, size_t why_len)
{
    *out = NULL;
    *cfg = lowp_kv_config_default(c->format, c->num_pages, c->page_size, c->num_kv_heads, c->qk_dim, c->vo_dim);
    if (recipe != NULL)
        cfg->recipe = *recipe;
    if (lowp_kv_config_check(cfg, why, why_len) || lowp_kvcache_create(cfg, out, why, why_len))
        return -1;
    if (lowp_block_has_global_scale(c->format) &&
        lowp_kvcache_set_global_scales(*out, &c->k_scale, &c->v_scale, 1, why, why_len)) {
        lowp_kvcache_destroy(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int build_cache(const lowp_certify_cache *c, const lowp_kv_page_table *pt, lowp_kvcache **out, char *why,
                       size_t why_len)
{
    lowp_kv_config cfg;
    lowp_kvcache *kc;
    if (model_cache(c, NULL, &cfg, &kc, why, why_len))
        return -1;
    unsigned char *used = calloc(c->num_pages, 1);
    if (used == NULL) {
        lowp_kvcache_destroy(kc);
        return lowp_why_set(why, why_len, "out of memory for the page map");
    }
    for (int32_t i = 0; i < pt->indptr[pt->batch]; i++)
        used[pt->indices[i]] = 1;
    const size_t P = c->page_size, H = c->num_kv_heads;
    for (int w = 0; w < 2; w++) {
        lowp_kv_which which = w ? LOWP_KV_V : LOWP_KV_K;
        size_t rb = lowp_kv_row_code_bytes(&cfg, which), S = lowp_kv_row_scales(&cfg, which);
        const uint8_t *src = w ? c->v : c->k, *ssrc = w ? c->v_sf : c->k_sf;
        uint8_t *codes = lowp_kvcache_buffer(kc, which, LOWP_KV_CODES, NULL);
        uint8_t *scales = S ? lowp_kvcache_buffer(kc, which, LOWP_KV_SCALES, NULL) : NULL;
        for (size_t p = 0; p < c->num_pages; p++) {
            if (!used[p])
                continue;
            for (size_t t = 0; t < P; t++)
                for (size_t h = 0; h < H; h++) {
                    memcpy(codes + lowp_kvcache_code_offset(kc, which, p, t, h), src + user_code_off(c, rb, p, t, h),
                           rb);
                    for (size_t s = 0; s < S; s++)
                        scales[lowp_kvcache_scale_offset(kc, which, p, t, h, s)] =
                            ssrc[user_scale_off(c, w, S, p, t, h, s)];
                }
        }
    }
    free(used);
    *out = kc;
    return 0;
}

/* ---- the query layout ---------------------------------------------------------------------- */
/* The rows of q / out per sequence: a's qo_indptr, checked against the sequences' lengths,
 * or (decode) the identity 0, 1, .., batch in *own. */
static int query_rows(const lowp_certify_args *a, const lowp_kv_page_table *pt, size_t P, const int32_t **qo,
                      int32_t **own, char *why, size_t why_len)
{
    const size_t B = pt->batch;
    *own = NULL;
    *qo = a->qo_indptr;
    if (a->qo_indptr == NULL) {
        if (B > (size_t)INT32_MAX || (*own = malloc((B + 1) * sizeof **own)) == NULL)
            return lowp_why_set(why, why_len, "out of memory for the query rows");
        for (size_t b = 0; b <= B; b++)
            (*own)[b] = (int32_t)b;
        *qo = *own;
        return 0;
    }
    const int32_t *q = a->qo_indptr;
    if (q[0] != 0)
        return lowp_why_set(why, why_len, "qo_indptr[0] is %d, expected 0", (int)q[0]);
    if (q[B] <= 0)
        return lowp_why_set(why, why_len, "qo_indptr[%zu] is %d: the batch has no queries", B, (int)q[B]);
    for (size_t b = 0; b < B; b++) {
        if (q[b + 1] < q[b])
            return lowp_why_set(why, why_len, "qo_indptr decreases at %zu (%d after %d)", b + 1, (int)q[b + 1],
                                (int)q[b]);
        size_t ql = (size_t)(q[b + 1] - q[b]), n = lowp_kv_seq_len(pt, P, b);
        if (ql > n)
            return lowp_why_set(why, why_len, "qo_indptr: sequence %zu has %zu queries but holds %zu tokens (a chunk "
                                "is the sequence's last tokens)", b, ql, n);
    }
    return 0;
}

/* The sequence whose queries hold row t (qo non-decreasing, qo[0] <= t < qo[B]). */
static size_t seq_of_row(const int32_t *qo, size_t B, size_t t)
{
    size_t lo = 0, hi = B; /* qo[lo] <= t < qo[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((size_t)qo[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ---- verdicts ---------------------------------------------------------------------------- */
#define OPEN (-1)

/* The verdict of got against an exact value within r of ex (r >= 0), bound B. final: the
 * last word (open cases become WITHIN). */
static int classify(const rounder *ro, double got, double ex, double r, double B, int final, double *ratio)
{
    if (!isfinite(got) || !isfinite(ex)) {
        *ratio = INFINITY;
        if ((isnan(got) && isnan(ex)) || got == ex) {
            *ratio = 0.0;
            return LOWP_CERTIFY_EXACT;
        }
        if (!isfinite(ex) && !final && !isnan(ex))
            return OPEN;
        return LOWP_CERTIFY_NAN_MISMATCH;
    }
    if (!(r >= 0) || !isfinite(r)) {
        if (!final)
            return OPEN;
        r = 0.0;
    }
    double lo = nextafter(nextafter(ex - r, -INFINITY), -INFINITY);
    double hi = nextafter(nextafter(ex + r, INFINITY), INFINITY);
    double rr = hi - ex > ex - lo ? hi - ex : ex - lo;
    double e = fabs(got - ex);
    *ratio = B > 0 ? e / B : (e > 0 ? INFINITY : 0.0);
    int rlo = round_to(ro, lo) == got, rhi = round_to(ro, hi) == got;
    if (rlo && rhi)
        return LOWP_CERTIFY_EXACT;
    if ((rlo || rhi) && !final)
        return OPEN;
    if (e + rr <= B)
        return LOWP_CERTIFY_WITHIN;
    if (e - rr > B)
        return LOWP_CERTIFY_OUTSIDE;
    return final ? LOWP_CERTIFY_WITHIN : OPEN;
}

static int worst_rank(int verdict)
{
    return verdict == LOWP_CERTIFY_NAN_MISMATCH ? 3 : verdict == LOWP_CERTIFY_OUTSIDE ? 2 : 1;
}

void lowp_certify_worst_offer(lowp_certify_result *res, size_t want, const lowp_certify_worst *w)
{
    if (want > LOWP_CERTIFY_WORST_MAX)
        want = LOWP_CERTIFY_WORST_MAX;
    if (want == 0)
        return;
    int rank = worst_rank(w->verdict);
    size_t pos = res->n_worst;
    while (pos > 0) {
        const lowp_certify_worst *x = &res->worst[pos - 1];
        int xr = worst_rank(x->verdict);
        if (xr > rank || (xr == rank && !(w->ratio > x->ratio)))
            break;
        pos--;
    }
    if (pos >= want)
        return;
    size_t last = res->n_worst < want ? res->n_worst : want - 1;
    memmove(&res->worst[pos + 1], &res->worst[pos], (last - pos) * sizeof res->worst[0]);
    res->worst[pos] = *w;
    if (res->n_worst < want)
        res->n_worst++;
}

/* One run without the diagnosis. Per-output arrays ex/rerr/bnd/ratio/verd are owned here.
 * a->causal_extra: each query row sees that many positions more than causal (clipped at its
 * sequence's end): 0 as declared, 1 for the diagnosis of a causal off-by-one. */
static int certify_once(const lowp_certify_args *a, lowp_certify_result *res, char *why, size_t why_len)
{
    const lowp_certify_cache *c = &a->cache;
    const lowp_certify_arith *ar = &a->arith;
    memset(res, 0, sizeof *res);
    if (check_cache(c, why, why_len) || check_arith(ar, why, why_len))
        return -1;
    if (a->q == NULL || a->out == NULL)
        return lowp_why_set(why, why_len, "q and out must not be NULL");
    const size_t H = c->num_kv_heads, Hq = a->num_q_heads, D = c->qk_dim, Dv = c->vo_dim, B = c->batch;
    if (Hq == 0 || Hq % H != 0)
        return lowp_why_set(why, why_len, "num_q_heads %zu is not a multiple of num_kv_heads %zu", Hq, H);
    if (a->only_seq >= (long)B)
        return lowp_why_set(why, why_len, "only_seq %ld is past the batch of %zu", a->only_seq, B);
    if (a->n_worst > LOWP_CERTIFY_WORST_MAX)
        return lowp_why_set(why, why_len, "n_worst %zu is more than %d", a->n_worst, LOWP_CERTIFY_WORST_MAX);
    const size_t G = Hq / H;
    const double sm = ar->sm_scale != 0 ? ar->sm_scale : 1.0 / sqrt((double)D);
    rounder ro;
    if (rounder_init(&ro, ar->out_dtype))
        return lowp_why_set(why, why_len, "no rounding to %s", lowp_certify_dtype_name(ar->out_dtype));

    lowp_kv_page_table pt;
    owned_pt own;
    if (make_page_table(c, &pt, &own, why, why_len)) {
        free_pt(&own);
        return -1;
    }
    const int32_t *qo;
    int32_t *own_qo;
    if (query_rows(a, &pt, c->page_size, &qo, &own_qo, why, why_len)) {
        free_pt(&own);
        return -1;
    }
    lowp_kvcache *kc;
    if (build_cache(c, &pt, &kc, why, why_len)) {
        free(own_qo);
        free_pt(&own);
        return -1;
    }
    lowp_kv_view view = lowp_kvcache_view(kc);
    const size_t rows = (size_t)qo[B], nout = rows * Hq * Dv, nq = rows * Hq * D;
    double *qh = malloc(nq * sizeof *qh), *ex = malloc(nout * sizeof *ex), *rerr = malloc(nout * sizeof *rerr);
    double *bnd = malloc(nout * sizeof *bnd), *ratio = malloc(nout * sizeof *ratio);
    signed char *verd = malloc(nout);
    int rc = 0;
    if (qh == NULL || ex == NULL || rerr == NULL || bnd == NULL || ratio == NULL || verd == NULL) {
        rc = lowp_why_set(why, why_len, "out of memory for %zu outputs", nout);
        goto done;
    }
    for (size_t i = 0; i < nq; i++)
        qh[i] = lowp_certify_round_q(ar, a->q[i]);
    memset(verd, OPEN, nout);

    const long items = (long)(B * H);
    int nt = a->threads > 0 ? a->threads : omp_get_max_threads();
    int err = 0;
    char err_why[256] = "";
    size_t oracle_rows = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(+ : oracle_rows)
    for (long it = 0; it < items; it++) {
        size_t b = (size_t)it / H, g = (size_t)it % H;
        if (a->only_seq >= 0 && (size_t)a->only_seq != b)
            continue;
        int my_err;
#pragma omp atomic read
        my_err = err;
        if (my_err)
            continue;
        char w[256] = "";
        size_t n = lowp_kv_seq_len(&pt, c->page_size, b);
        double *kb = malloc(n * D * sizeof *kb), *vb = malloc(n * Dv * sizeof *vb);
        double *o64 = malloc(G * Dv * sizeof *o64);
        int bad = kb == NULL || vb == NULL || o64 == NULL;
        if (bad)
            snprintf(w, sizeof w, "out of memory for sequence %zu (%zu tokens)", b, n);
        else if (lowp_kvcache_gather_range(kc, &view, &pt, b, 0, n, g, 1, kb, vb, w, sizeof w))
            bad = 1;
        /* one decode per query row over its visible prefix (the bound's basis: the header) */
        const size_t ql = (size_t)(qo[b + 1] - qo[b]);
        for (size_t i = 0; i < ql && !bad; i++) {
            const size_t t = (size_t)qo[b] + i;
            const size_t causal = n - ql + i + 1; /* <= n: the chunk is the sequence's last ql tokens */
            const size_t vis = a->causal_extra < n - causal ? causal + a->causal_extra : n;
            lowp_attn_shape sub = {1, G, 1, D, Dv, vis, vis - 1, sm};
            const double *qg = qh + (t * Hq + g * G) * D;
            size_t base = (t * Hq + g * G) * Dv;
            /* the a-posteriori bound (about 10^3 times tighter than lowp_attn_ref_bounds at 32K
             * tokens) decides nearly every output without the MPFR oracle */
            if (lowp_attn_ref_f64_bounded(&sub, qg, kb, vb, ex + base, rerr + base, w, sizeof w))
                bad = 1;
            for (size_t r = 0; r < G && !bad; r++)
                if (lowp_certify_row_bound(ar, vis, D, Dv, sm, (double)c->v_scale, qg + r * D, kb, vb,
                                           bnd + base + r * Dv)) {
                    snprintf(w, sizeof w, "the declared arithmetic is too coarse for a first-order bound at "
                             "sequence %zu, position %zu, head %zu (its relative error terms exceed 1/8)", b,
                             vis - 1, g * G + r);
                    bad = 1;
                }
            int open = 0;
            for (size_t x = 0; x < G * Dv && !bad; x++) {
                size_t k = base + x;
                verd[k] = (signed char)classify(&ro, (double)a->out[k], ex[k], rerr[k], bnd[k], 0, &ratio[k]);
                open |= verd[k] == OPEN;
            }
            if (open && !bad) {
                if (lowp_attn_oracle_mpfr(&sub, qg, kb, vb, 0, NULL, o64, w, sizeof w))
                    bad = 1;
                for (size_t x = 0; x < G * Dv && !bad; x++) {
                    size_t k = base + x;
                    ex[k] = o64[x];
                    rerr[k] = isfinite(o64[x]) ? 0.5 * (nextafter(fabs(o64[x]), INFINITY) - fabs(o64[x])) : 0.0;
                    verd[k] = (signed char)classify(&ro, (double)a->out[k], ex[k], rerr[k], bnd[k], 1, &ratio[k]);
                }
                oracle_rows += G;
            }
        }
        if (bad) {
#pragma omp critical(lowp_certify_err)
            if (!err) {
                err = 1;
                snprintf(err_why, sizeof err_why, "%s", w);
            }
        }
        free(kb);
        free(vb);
        free(o64);
    }
    if (err) {
        rc = lowp_why_set(why, why_len, "%s", err_why);
        goto done;
    }
    /* counts and the worst elements (NaN mismatches first, then outside, then by ratio) */
    res->oracle_rows = oracle_rows;
    size_t want = a->n_worst;
    for (size_t i = 0; i < nout; i++) {
        if (verd[i] == OPEN)
            continue; /* a sequence only_seq left out */
        res->outputs++;
        res->counts[(int)verd[i]]++;
        if (verd[i] != LOWP_CERTIFY_NAN_MISMATCH && ratio[i] > res->worst_ratio)
            res->worst_ratio = ratio[i];
        if (want == 0)
            continue;
        size_t row = i / (Hq * Dv), bq = seq_of_row(qo, B, row);
        size_t n = lowp_kv_seq_len(&pt, c->page_size, bq), ql = (size_t)(qo[bq + 1] - qo[bq]);
        lowp_certify_worst w = {bq, (i / Dv) % Hq, i % Dv, n, n - ql + (row - (size_t)qo[bq]), row,
                                (double)a->out[i], ex[i], rerr[i], bnd[i], ratio[i], verd[i]};
        lowp_certify_worst_offer(res, want, &w);
    }
    for (size_t i = 0; i < nout; i++) {
        if (verd[i] == OPEN)
            continue;
        if (a->exact != NULL)
            a->exact[i] = ex[i];
        if (a->bound != NULL)
            a->bound[i] = bnd[i];
        if (a->verdict != NULL)
            a->verdict[i] = (uint8_t)verd[i];
    }
done:
    free(qh);
    free(ex);
    free(rerr);
    free(bnd);
    free(ratio);
    free(verd);
    lowp_kvcache_destroy(kc);
    free(own_qo);
    free_pt(&own);
    return rc;
}

/* ---- the layout-mismatch diagnosis ----------------------------------------------------- */
static lowp_kv_sf_order flip_sf(lowp_kv_sf_order o)
{
    return o == LOWP_KV_SF_LINEAR ? LOWP_KV_SF_INTERLEAVE4 : LOWP_KV_SF_LINEAR;
}
static lowp_kv_layout flip_layout(lowp_kv_layout o)
{
    return o == LOWP_KV_NHD ? LOWP_KV_HND : LOWP_KV_NHD;
}
static const char *sf_words(lowp_kv_sf_order o)
{
    return o == LOWP_KV_SF_LINEAR ? "linear" : "4-token interleaved";
}

int lowp_certify_alternative(const lowp_certify_args *a, int alt, lowp_certify_args *b, char *what, size_t what_len)
{
    const lowp_certify_cache *c = &a->cache;
    enum { ALT_V_SF, ALT_K_SF, ALT_KV_SF, ALT_PAGES, ALT_V_SCALE, ALT_K_SCALE, ALT_KV_SCALE, ALT_CAUSAL, ALT_COUNT };
    _Static_assert(ALT_COUNT == LOWP_CERTIFY_ALT_COUNT, "the header's count of alternatives");
    *b = *a;
    b->diagnose = 0;
    b->exact = b->bound = NULL;
    b->verdict = NULL;
    b->n_worst = 0;
    lowp_certify_cache *d = &b->cache;
    int nvfp4 = c->format == LOWP_NVFP4;
    switch (alt) {
    case ALT_CAUSAL:
        if (a->qo_indptr == NULL || a->causal_extra != 0)
            return 0;
        b->causal_extra = 1;
        snprintf(what, what_len, "causal mask off by one: query i of a chunk looks to see position prefix + i + 1, "
                 "one past its own");
        return 1;
    case ALT_V_SF:
    case ALT_K_SF:
    case ALT_KV_SF:
        if (!nvfp4)
            return 0;
        if (alt != ALT_K_SF)
            d->v_sf_order = flip_sf(c->v_sf_order);
        if (alt != ALT_V_SF)
            d->k_sf_order = flip_sf(c->k_sf_order);
        if (alt == ALT_KV_SF)
            snprintf(what, what_len, "K and V scales look %s / %s, layout says %s / %s", sf_words(d->k_sf_order),
                     sf_words(d->v_sf_order), sf_words(c->k_sf_order), sf_words(c->v_sf_order));
        else
            snprintf(what, what_len, "%s scales look %s, layout says %s", alt == ALT_V_SF ? "V" : "K",
                     sf_words(alt == ALT_V_SF ? d->v_sf_order : d->k_sf_order),
                     sf_words(alt == ALT_V_SF ? c->v_sf_order : c->k_sf_order));
        return 1;
    case ALT_PAGES:
        d->code_order = flip_layout(c->code_order);
        if (c->sf_order == c->code_order)
            d->sf_order = d->code_order;
        snprintf(what, what_len, "HND/NHD swapped: the pages look %s, layout says %s",
                 lowp_kv_layout_name(d->code_order), lowp_kv_layout_name(c->code_order));
        return 1;
    case ALT_V_SCALE:
    case ALT_K_SCALE:
    case ALT_KV_SCALE:
        if (!lowp_block_has_global_scale(c->format))
            return 0;
        if (alt != ALT_K_SCALE) {
            if (c->v_scale == 1.0f)
                return 0;
            d->v_scale = 1.0f;
        }
        if (alt != ALT_V_SCALE) {
            if (c->k_scale == 1.0f)
                return 0;
            d->k_scale = 1.0f;
        }
        snprintf(what, what_len, "the kernel looks to ignore %s (declared k_scale %.9g, v_scale %.9g; "
                 "FlashInfer #4979)",
                 alt == ALT_V_SCALE ? "v_scale" : alt == ALT_K_SCALE ? "k_scale" : "k_scale and v_scale",
                 (double)c->k_scale, (double)c->v_scale);
        return 1;
    }
    return 0;
}

void lowp_certify_diagnosis_set(lowp_certify_result *res, const char *what, size_t alt_outputs)
{
    snprintf(res->diagnosis, sizeof res->diagnosis,
             "%s (under that reading %zu of %zu outputs are within bound; as declared %zu outside, %zu NaN "
             "mismatches)",
             what, alt_outputs, alt_outputs, res->counts[LOWP_CERTIFY_OUTSIDE], res->counts[LOWP_CERTIFY_NAN_MISMATCH]);
}

static void diagnose(const lowp_certify_args *a, lowp_certify_result *res)
{
    for (int alt = 0; alt < LOWP_CERTIFY_ALT_COUNT; alt++) {
        lowp_certify_args b;
        char what[200];
        if (!lowp_certify_alternative(a, alt, &b, what, sizeof what))
            continue;
        lowp_certify_result r;
        char w[256];
        if (certify_once(&b, &r, w, sizeof w))
            continue; /* the other reading is not even a valid cache: not this one */
        if (r.outputs > 0 && r.counts[LOWP_CERTIFY_OUTSIDE] == 0 && r.counts[LOWP_CERTIFY_NAN_MISMATCH] == 0) {
            lowp_certify_diagnosis_set(res, what, r.outputs);
            return;
        }
    }
}

int lowp_certify_run(const lowp_certify_args *a, lowp_certify_result *res, char *why, size_t why_len)
{
    if (a == NULL || res == NULL)
        return lowp_why_set(why, why_len, "args and result must not be NULL");
    if (certify_once(a, res, why, why_len))
        return -1;
    if (a->diagnose && res->counts[LOWP_CERTIFY_OUTSIDE] + res->counts[LOWP_CERTIFY_NAN_MISMATCH] > 0)
        diagnose(a, res);
    return 0;
}

/* ---- quantize-on-write ------------------------------------------------------------------- */
/* The cache's sizes and buffers without its page table (check_cache's rules otherwise). */
static int check_written(const lowp_certify_cache *c, char *why, size_t why_len)
{
    lowp_certify_cache d = *c;
    static const int32_t one = 1;
    d.batch = 1;
    d.block_table = &one;
    d.max_blocks = 1;
    d.seq_lens = &one;
    return check_cache(&d, why, why_len);
}

/* Compare the tokens' rows of c with lowp's writes in kc; fills r's counts and first
 * difference, verdict (may be NULL). */
static void compare_written(const lowp_certify_kv_write_args *a, const lowp_certify_cache *c, const lowp_kvcache *kc,
                            const lowp_kv_config *cfg, lowp_certify_kv_write_result *r, uint8_t *verdict)
{
    const size_t P = c->page_size, H = c->num_kv_heads;
    r->exact = r->differs = r->padding = 0;
    r->token = SIZE_MAX;
    for (size_t i = 0; i < a->num_tokens; i++) {
        if (a->slot_mapping[i] < 0) {
            r->padding++;
            if (verdict != NULL)
                verdict[i] = LOWP_CERTIFY_KV_PADDING;
            continue;
        }
        size_t p = (size_t)a->slot_mapping[i] / P, t = (size_t)a->slot_mapping[i] % P;
        int same = 1;
        for (int w = 0; w < 2 && same; w++) {
            lowp_kv_which which = w ? LOWP_KV_V : LOWP_KV_K;
            size_t rb = lowp_kv_row_code_bytes(cfg, which), S = lowp_kv_row_scales(cfg, which);
            const uint8_t *src = w ? c->v : c->k, *ssrc = w ? c->v_sf : c->k_sf;
            const uint8_t *codes = lowp_kvcache_cbuffer(kc, which, LOWP_KV_CODES, NULL);
            const uint8_t *scales = S ? lowp_kvcache_cbuffer(kc, which, LOWP_KV_SCALES, NULL) : NULL;
            for (size_t h = 0; h < H && same; h++) {
                const uint8_t *got = src + user_code_off(c, rb, p, t, h);
                const uint8_t *want = codes + lowp_kvcache_code_offset(kc, which, p, t, h);
                for (size_t x = 0; x < rb + S && same; x++) {
                    uint8_t g = x < rb ? got[x] : ssrc[user_scale_off(c, w, S, p, t, h, x - rb)];
                    uint8_t e = x < rb ? want[x] : scales[lowp_kvcache_scale_offset(kc, which, p, t, h, x - rb)];
                    if (g == e)
                        continue;
                    same = 0;
                    if (r->token == SIZE_MAX)
                        *r = (lowp_certify_kv_write_result){r->tokens, r->padding, r->exact, r->differs, i,
                                                            (size_t)a->slot_mapping[i], w, x >= rb, h,
                                                            x < rb ? x : x - rb, g, e, ""};
                }
            }
        }
        r->exact += same;
        r->differs += !same;
        if (verdict != NULL)
            verdict[i] = same ? LOWP_CERTIFY_KV_EXACT : LOWP_CERTIFY_KV_DIFFERS;
    }
}

int lowp_certify_kv_write(const lowp_certify_kv_write_args *a, lowp_certify_kv_write_result *r, char *why,
                          size_t why_len)
{
    if (a == NULL || r == NULL)
        return lowp_why_set(why, why_len, "args and result must not be NULL");
    memset(r, 0, sizeof *r);
    const lowp_certify_cache *c = &a->cache;
    if (check_written(c, why, why_len))
        return -1;
    if (a->slot_mapping == NULL || a->k == NULL || a->v == NULL || a->num_tokens == 0)
        return lowp_why_set(why, why_len, "kv write: slot_mapping, k and v must not be NULL, num_tokens > 0");
    const size_t slots = c->num_pages * c->page_size;
    unsigned char *seen = calloc(slots, 1);
    if (seen == NULL)
        return lowp_why_set(why, why_len, "out of memory for the slot map");
    for (size_t i = 0; i < a->num_tokens; i++) {
        int64_t sl = a->slot_mapping[i];
        if (sl < 0)
            continue; /* vLLM's padding token (slot -1): the writer skips it */
        const char *bad = (uint64_t)sl >= slots ? "past the pool" : seen[sl] ? "written twice" : NULL;
        if (bad != NULL) {
            free(seen);
            return lowp_why_set(why, why_len, "slot_mapping[%zu] = %lld is %s (%zu pages of %zu slots)", i,
                                (long long)sl, bad, c->num_pages, c->page_size);
        }
        seen[sl] = 1;
    }
    free(seen);
    lowp_kv_config cfg;
    lowp_kvcache *kc;
    if (model_cache(c, &a->recipe, &cfg, &kc, why, why_len))
        return -1;
    const size_t nk = c->num_kv_heads * c->qk_dim, nv = c->num_kv_heads * c->vo_dim;
    for (size_t i = 0; i < a->num_tokens; i++) {
        if (a->slot_mapping[i] < 0)
            continue;
        size_t sl = (size_t)a->slot_mapping[i];
        if (lowp_kvcache_write(kc, sl / c->page_size, sl % c->page_size, a->k + i * nk, a->v + i * nv, NULL, NULL,
                               why, why_len)) {
            lowp_kvcache_destroy(kc);
            return -1;
        }
    }
    r->tokens = a->num_tokens;
    compare_written(a, c, kc, &cfg, r, a->verdict);
    /* a wrong scale order is named: the same bytes compared under the flipped order(s) */
    for (int alt = 0; alt < 3 && r->differs > 0 && c->format == LOWP_NVFP4; alt++) {
        lowp_certify_cache d = *c;
        if (alt != 1)
            d.v_sf_order = flip_sf(c->v_sf_order);
        if (alt != 0)
            d.k_sf_order = flip_sf(c->k_sf_order);
        if (check_written(&d, NULL, 0))
            continue;
        lowp_certify_kv_write_result q = *r;
        compare_written(a, &d, kc, &cfg, &q, NULL);
        if (q.differs == 0) {
            snprintf(r->diagnosis, sizeof r->diagnosis,
                     "%s scales look %s, layout says %s (under that reading all %zu written tokens are exact)",
                     alt == 0 ? "V" : alt == 1 ? "K" : "K and V",
                     sf_words(alt == 1 ? d.k_sf_order : d.v_sf_order), sf_words(alt == 1 ? c->k_sf_order : c->v_sf_order),
                     q.exact);
            break;
        }
    }
    lowp_kvcache_destroy(kc);
    return 0;
}
