/* ref/select/src/dsa.c: DeepSeek-V3.2's lightning indexer (lowp/select.h gives the
 * definition; ref/notes/selection.md 2 the sources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/codec_core.h"
#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp/why.h"

lowp_dsa_config lowp_dsa_config_default(void)
{
    lowp_dsa_config c;
    memset(&c, 0, sizeof c);
    c.heads = 64;
    c.head_dim = 128;
    c.topk = 2048;
    c.ue8m0 = 1;
    c.q_floor = 1e-4f;
    c.k_floor = 1e-4f;
    c.keys = LOWP_DSA_KEYS_FP8;
    c.fp4_round = LOWP_DSA_FP4_RNE;
    return c;
}

static int check_config(const lowp_dsa_config *c, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "DSA: NULL configuration");
    if (c->heads < 1 || c->heads > 256)
        return lowp_why_set(why, wl, "DSA: %zu index heads (1..256)", c->heads);
    if (c->head_dim < 1 || c->head_dim > 1024)
        return lowp_why_set(why, wl, "DSA: index head dim %zu (1..1024)", c->head_dim);
    if (c->keys == LOWP_DSA_KEYS_FP4 && c->head_dim % 32)
        return lowp_why_set(why, wl, "DSA: FP4 index keys need a head dim that is a multiple of 32, not %zu",
                            c->head_dim);
    if ((unsigned)c->keys > LOWP_DSA_KEYS_BF16 || (unsigned)c->fp4_round > LOWP_DSA_FP4_DEEPGEMM)
        return lowp_why_set(why, wl, "DSA: unknown index-key format %d or FP4 rounding %d", (int)c->keys,
                            (int)c->fp4_round);
    if (!(c->q_floor > 0) || !(c->k_floor > 0) || !isfinite(c->q_floor) || !isfinite(c->k_floor))
        return lowp_why_set(why, wl, "DSA: amax floors %g, %g (finite, positive)", (double)c->q_floor,
                            (double)c->k_floor);
    return 0;
}

/* fast_round_scale: 2^(exponent of x, plus one if any fraction bit is set), x > 0 normal */
static float pow2_ceil(float x)
{
    uint32_t b = lowp_f32_bits(x);
    int e = (int)((b >> 23) & 0xffu) - 127 + ((b & 0x7fffffu) != 0);
    return lowp_f32_from_bits((uint32_t)(e + 127) << 23);
}

/* act_quant of one row of d values: E4M3 values into out, the scale returned. A NaN in x
 * makes amax NaN (torch.max propagates it), so the scale and every code are NaN. */
static float act_quant(const lowp_codec *e4, const float *x, size_t d, float floor, int ue8m0, float *out)
{
    float amax = 0.0f;
    int nan = 0;
    for (size_t i = 0; i < d; i++) {
        float a = fabsf(x[i]);
        nan |= a != a;
        amax = a > amax ? a : amax;
    }
    amax = nan ? NAN : (amax > floor ? amax : floor);
    float s = amax * (1.0f / 448.0f);
    if (ue8m0 && !nan)
        s = isinf(s) ? s : pow2_ceil(s);
    for (size_t i = 0; i < d; i++) {
        float y = x[i] / s;
        y = y > 448.0f ? 448.0f : (y < -448.0f ? -448.0f : y); /* clamp keeps NaN */
        out[i] = lowp_decode_f32(LOWP_E4M3, lowp_encode_f32(e4, y));
    }
    return s;
}

/* DeepGEMM's FP4 encoder: the number of boundaries |v| exceeds is the E2M1 magnitude code */
static float e2m1_deepgemm(float v)
{
    static const float bnd[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    static const float val[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float a = fabsf(v);
    int code = 0;
    for (int j = 0; j < 7; j++)
        code += a > bnd[j];
    if (a != a)
        return v; /* NaN stays NaN (the count would give 0) */
    return (v < 0.0f && code != 0) ? -val[code] : val[code];
}

int lowp_dsa_keys_quantize(const lowp_dsa_config *c, const float *k, size_t seq_len, float *kq, float *ks,
                           double *kdelta, char *why, size_t wl)
{
    if (check_config(c, why, wl))
        return -1;
    lowp_codec e4, e2;
    if (lowp_codec_init(&e4, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl) ||
        lowp_codec_init(&e2, LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, 1, why, wl))
        return -1;
    size_t d = c->head_dim;
    for (size_t n = 0; n < seq_len; n++) {
        const float *x = k + n * d;
        float *o = kq + n * d;
        double *od = kdelta ? kdelta + n * d : NULL;
        if (c->keys == LOWP_DSA_KEYS_FP8) {
            ks[n] = act_quant(&e4, x, d, c->k_floor, c->ue8m0, o);
            for (size_t i = 0; od && i < d; i++) /* E4M3 at the token's scale */
                od[i] = lowp_select_elem_bound(LOWP_E4M3, o[i], ks[n]);
            continue;
        }
        if (c->keys == LOWP_DSA_KEYS_BF16) {
            memcpy(o, x, d * sizeof *o);
            ks[n] = 1.0f;
            for (size_t i = 0; od && i < d; i++)
                od[i] = 0.0; /* the unquantized keys */
            continue;
        }
        ks[n] = 1.0f;
        for (size_t g = 0; g < d; g += 32) {
            float amax = 0.0f;
            int nan = 0;
            for (size_t i = g; i < g + 32; i++) {
                float a = fabsf(x[i]);
                nan |= a != a;
                amax = a > amax ? a : amax;
            }
            float t = (amax > 1e-4f ? amax : 1e-4f) / 6.0f;
            uint32_t b = lowp_f32_bits(t);
            int code = (int)((b >> 23) & 0xffu) + ((b & 0x7fffffu) != 0);
            code = code < 1 ? 1 : (code > 254 ? 254 : code);
            float sf = lowp_f32_from_bits((uint32_t)code << 23); /* 2^(code - 127), code >= 1: normal */
            for (size_t i = g; i < g + 32; i++) {
                float v = x[i] / sf;
                float e = c->fp4_round == LOWP_DSA_FP4_DEEPGEMM
                              ? e2m1_deepgemm(v)
                              : lowp_decode_f32(LOWP_E2M1, lowp_encode_f32(&e2, v));
                o[i] = nan ? NAN : e * sf;
                if (od) /* E2M1 at the group's scale (a nearest element either way) */
                    od[i] = nan ? INFINITY : lowp_select_elem_bound(LOWP_E2M1, e, sf);
            }
        }
    }
    return 0;
}

int lowp_dsa_query(const lowp_dsa_config *c, const float *q, const float *w, float *qq, float *qs, float *wb,
                   float *wh, float *dscale, char *why, size_t wl)
{
    lowp_codec e4, b16;
    if (check_config(c, why, wl) || lowp_codec_init(&e4, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl) ||
        lowp_codec_init(&b16, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl))
        return -1;
    size_t H = c->heads, d = c->head_dim;
    float hscale = (float)(1.0 / sqrt((double)H));
    *dscale = (float)(1.0 / sqrt((double)d));
    for (size_t h = 0; h < H; h++) {
        qs[h] = 1.0f;
        if (c->keys == LOWP_DSA_KEYS_BF16)
            memcpy(qq + h * d, q + h * d, d * sizeof *qq);
        else
            qs[h] = act_quant(&e4, q + h * d, d, c->q_floor, c->ue8m0, qq + h * d);
        wb[h] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&b16, w[h] * hscale));
        wh[h] = (wb[h] * qs[h]) * *dscale;
    }
    return 0;
}

int lowp_dsa_scores(const lowp_dsa_config *c, const float *q, const float *w, const float *kq,
                    const float *ks, size_t seq_len, size_t pos, float *scores, size_t *visible, char *why,
                    size_t wl)
{
    *visible = 0;
    if (check_config(c, why, wl))
        return -1;
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "DSA: query position %zu outside the sequence of %zu tokens", pos, seq_len);
    size_t H = c->heads, d = c->head_dim;
    float *qq = malloc((H * d + 3 * H) * sizeof *qq);
    if (qq == NULL)
        return lowp_why_set(why, wl, "DSA: out of memory");
    float *qs = qq + H * d, *wb = qs + H, *wh = wb + H, dscale;
    if (lowp_dsa_query(c, q, w, qq, qs, wb, wh, &dscale, why, wl)) {
        free(qq);
        return -1;
    }
    size_t vis = pos + 1;
    for (size_t n = 0; n < vis; n++) {
        double hs = 0.0; /* the open-order head sum: binary64, rounded once */
        for (size_t h = 0; h < H; h++) {
            float dot = lowp_select_dot(kq + n * d, qq + h * d, d);
            float relu = dot > 0.0f ? dot : (dot != dot ? dot : 0.0f);
            hs += (double)(relu * wh[h]);
        }
        scores[n] = (float)hs * ks[n];
    }
    free(qq);
    *visible = vis;
    return 0;
}
