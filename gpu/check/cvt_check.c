/* gpu/check/cvt_check.c: lowp_gpu_cvt_check, the exhaustive hardware-vs-model check.
 *
 *   lowp_gpu_cvt_check [--quick] [--threads N] [--only SUBSTRING] REPORT.md
 *
 * Compares the GPU's PTX cvt conversions with lowp's CPU model (profile cuda):
 *   - E4M3 and E5M2 (rn, satfinite) over all 2^32 binary32 inputs;
 *   - E4M3 and E5M2 from all 2^16 binary16 inputs (the f16x2 forms);
 *   - decode of all 256 E4M3 / E5M2 codes to binary16 (NaN codes: canonical 0x7FFF);
 *   - BF16 and F16 from binary32, rn / rz / rd (.rm) / ru (.rp), all 2^32 inputs;
 *   - the public encode API on random and special inputs (odd length, u8 and u16);
 *   - on a Blackwell image only: E2M1 (rn) and E8M0 (rz/ru, sat/nosat) over 2^32 and
 *     their decodes. These paths are compiled for sm_100a / sm_120a and have NEVER RUN:
 *     on other GPUs they are listed as not run.
 * --quick sweeps nine windows of 2^24 inputs (zero and subnormals, one, the E4M3 and E5M2/F16
 * overflow bands, 2^127..Inf/NaN, both signs) instead of all 2^32.
 *
 * Writes a Markdown report (device, driver and runtime versions, each check's inputs,
 * mismatches, NaN breakdown and time, and the first mismatches). Exit status: 0 all
 * checks match, 1 a mismatch, 2 bad usage, 3 a CUDA or other error (one line on
 * stderr), 77 no GPU (the report then says so). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cuda_runtime_api.h>

#include "cli_parse.h"

#include "lowp/format.h"
#include "lowp/cases.h"
#include "lowp/gpu_cvt.h"

#define PROG "lowp_gpu_cvt_check"

enum kind { K_F32, K_F16, K_DECODE, K_API };

typedef struct check {
    const char *name;
    enum kind kind;
    lowp_format format;
    lowp_round round;
    int saturate;
    int blackwell; /* needs the sm_100a/sm_120a image: compiled, never run */
    /* results */
    int status;    /* 0 pass, 1 mismatch, 2 not run, 3 error, 4 pass with informational NaN-input differences */
    char note[320];
    lowp_gpu_sweep r;
} check;

static check checks[] = {
    {"e4m3 rn satfinite, f32 in (cvt.rn.satfinite.e4m3x2.f32)", K_F32, LOWP_E4M3, LOWP_RN, LOWP_SAT_ON, 0, 0, "", {0}},
    {"e5m2 rn satfinite, f32 in (cvt.rn.satfinite.e5m2x2.f32)", K_F32, LOWP_E5M2, LOWP_RN, LOWP_SAT_ON, 0, 0, "", {0}},
    {"e4m3 rn satfinite, f16 in (cvt.rn.satfinite.e4m3x2.f16x2)", K_F16, LOWP_E4M3, LOWP_RN, LOWP_SAT_ON, 0, 0, "", {0}},
    {"e5m2 rn satfinite, f16 in (cvt.rn.satfinite.e5m2x2.f16x2)", K_F16, LOWP_E5M2, LOWP_RN, LOWP_SAT_ON, 0, 0, "", {0}},
    {"e4m3 decode to f16 (cvt.rn.f16x2.e4m3x2)", K_DECODE, LOWP_E4M3, LOWP_RN, 0, 0, 0, "", {0}},
    {"e5m2 decode to f16 (cvt.rn.f16x2.e5m2x2)", K_DECODE, LOWP_E5M2, LOWP_RN, 0, 0, 0, "", {0}},
    {"bf16 rn (cvt.rn.bf16.f32)", K_F32, LOWP_BF16, LOWP_RN, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"bf16 rz (cvt.rz.bf16.f32)", K_F32, LOWP_BF16, LOWP_RZ, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"bf16 rd (cvt.rm.bf16.f32)", K_F32, LOWP_BF16, LOWP_RD, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"bf16 ru (cvt.rp.bf16.f32)", K_F32, LOWP_BF16, LOWP_RU, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"f16 rn (cvt.rn.f16.f32)", K_F32, LOWP_F16, LOWP_RN, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"f16 rz (cvt.rz.f16.f32)", K_F32, LOWP_F16, LOWP_RZ, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"f16 rd (cvt.rm.f16.f32)", K_F32, LOWP_F16, LOWP_RD, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"f16 ru (cvt.rp.f16.f32)", K_F32, LOWP_F16, LOWP_RU, LOWP_SAT_OFF, 0, 0, "", {0}},
    {"encode API, random + special inputs, all ops (u8 and u16, odd n)", K_API, LOWP_E4M3, LOWP_RN, 0, 0, 0, "", {0}},
    {"e2m1 rn satfinite (cvt.rn.satfinite.e2m1x2.f32)", K_F32, LOWP_E2M1, LOWP_RN, LOWP_SAT_ON, 1, 0, "", {0}},
    {"e8m0 rz satfinite (cvt.rz.satfinite.ue8m0x2.f32)", K_F32, LOWP_E8M0, LOWP_RZ, LOWP_SAT_ON, 1, 0, "", {0}},
    {"e8m0 rz (cvt.rz.ue8m0x2.f32)", K_F32, LOWP_E8M0, LOWP_RZ, LOWP_SAT_OFF, 1, 0, "", {0}},
    {"e8m0 ru satfinite (cvt.rp.satfinite.ue8m0x2.f32)", K_F32, LOWP_E8M0, LOWP_RU, LOWP_SAT_ON, 1, 0, "", {0}},
    {"e8m0 ru (cvt.rp.ue8m0x2.f32)", K_F32, LOWP_E8M0, LOWP_RU, LOWP_SAT_OFF, 1, 0, "", {0}},
    {"e2m1 decode to f16 (cvt.rn.f16x2.e2m1x2)", K_DECODE, LOWP_E2M1, LOWP_RN, 0, 1, 0, "", {0}},
    {"e8m0 decode to bf16 (cvt.rn.bf16x2.ue8m0x2)", K_DECODE, LOWP_E8M0, LOWP_RN, 0, 1, 0, "", {0}},
};
#define NCHECKS (sizeof checks / sizeof checks[0])

/* --quick windows: [lo, lo + 2^24) */
static const uint64_t quick_windows[] = {0x00000000u, 0x3F000000u, 0x43000000u, 0x47000000u, 0x7F000000u,
                                         0x80000000u, 0xC3000000u, 0xC7000000u, 0xFF000000u};
#define NQUICK (sizeof quick_windows / sizeof quick_windows[0])

/* The note of a check, cut to its buffer on purpose (vsnprintf). */
static void setnote(check *ck, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->note, sizeof ck->note, fmt, ap);
    va_end(ap);
}

static void addnote(check *ck, const char *fmt, ...)
{
    size_t l = strlen(ck->note);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ck->note + l, sizeof ck->note - l, fmt, ap);
    va_end(ap);
}

static int usage(void)
{
    fprintf(stderr, "usage: " PROG " [--quick] [--threads N] [--only SUBSTRING] REPORT.md\n");
    return 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Check a CUDA call in the API check: on failure note it and return 3. */
#define CKC(call)                                                                                   \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            setnote(ck, "%s failed: %s (%s)", #call, cudaGetErrorName(e_),  \
                     cudaGetErrorString(e_));                                                       \
            rc = 3;                                                                                 \
            goto done;                                                                              \
        }                                                                                           \
    } while (0)

/* The public encode API (not the sweep kernels) on random and special inputs, for
 * every op the device has: u16 output for all, u8 too for narrow formats. */
static int run_api_check(check *ck, int threads)
{
    static const struct { lowp_format f; lowp_round r; int sat; } ops[] = {
        {LOWP_E4M3, LOWP_RN, 1}, {LOWP_E5M2, LOWP_RN, 1}, {LOWP_E2M1, LOWP_RN, 1},
        {LOWP_E8M0, LOWP_RZ, 1}, {LOWP_E8M0, LOWP_RZ, 0}, {LOWP_E8M0, LOWP_RU, 1},
        {LOWP_E8M0, LOWP_RU, 0}, {LOWP_BF16, LOWP_RN, 0}, {LOWP_BF16, LOWP_RZ, 0},
        {LOWP_BF16, LOWP_RD, 0}, {LOWP_BF16, LOWP_RU, 0}, {LOWP_F16, LOWP_RN, 0},
        {LOWP_F16, LOWP_RZ, 0},  {LOWP_F16, LOWP_RD, 0},  {LOWP_F16, LOWP_RU, 0},
    };
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
        0xFFFFFFFFu, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x00800000u, 0x3F800000u, 0xBF800000u,
        0x43E00000u, 0x43E80000u, 0x43E80001u, 0x43F00000u, 0x47600000u, 0x47700000u, 0x477FFFFFu,
        0x7F7FFFFFu, 0xFF7FFFFFu, 0x3A800000u, 0x3A800001u, 0x3B400000u, 0x40C00000u, 0x40E00000u,
        0x3E800000u, 0x3F400000u, 0x3FC00000u, 0x00400000u, 0x00400001u, 0x00C00000u,
    };
    const size_t nspec = sizeof specials / sizeof specials[0];
    const size_t n = ((size_t)1 << 20) + 3; /* odd: the tail element has no partner */
    int rc = 0;
    (void)threads;
    float *h_in = malloc(n * sizeof *h_in);
    uint16_t *h16 = malloc(n * sizeof *h16), *ref = malloc(n * sizeof *ref);
    uint8_t *h8 = malloc(n);
    float *d_in = NULL;
    uint16_t *d16 = NULL;
    uint8_t *d8 = NULL;
    unsigned ran = 0, skipped = 0;
    double t0 = now_s();
    if (!h_in || !h16 || !ref || !h8) {
        setnote(ck, "out of host memory");
        rc = 3;
        goto done;
    }
    uint64_t seed = UINT64_C(0x6c6f7770);
    for (size_t i = 0; i < n; i++) {
        uint32_t b = i < nspec ? specials[i] : (uint32_t)lowp_splitmix64(&seed);
        memcpy(&h_in[i], &b, 4);
    }
    CKC(cudaMalloc((void **)&d_in, n * sizeof *d_in));
    CKC(cudaMalloc((void **)&d16, n * sizeof *d16));
    CKC(cudaMalloc((void **)&d8, n));
    CKC(cudaMemcpy(d_in, h_in, n * sizeof *d_in, cudaMemcpyHostToDevice));
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        char why[256];
        int g = lowp_gpu_supported(ops[k].f, ops[k].r, ops[k].sat, why, sizeof why);
        if (g == LOWP_GPU_EUNSUPPORTED) {
            skipped++;
            continue;
        }
        if (g != LOWP_GPU_OK) {
            setnote(ck, "%s", lowp_gpu_last_error());
            rc = 3;
            goto done;
        }
        lowp_codec c;
        if (lowp_codec_init(&c, ops[k].f, LOWP_PROFILE_CUDA, ops[k].r, ops[k].sat, why, sizeof why) != 0) {
            setnote(ck, "lowp refuses %s %s: %s", lowp_format_name(ops[k].f),
                     lowp_round_name(ops[k].r), why);
            rc = 3;
            goto done;
        }
        lowp_encode_f32_u16(&c, h_in, ref, n);
        for (int narrow = 0; narrow < 2; narrow++) {
            if (narrow && lowp_format_bits(ops[k].f) > 8)
                continue;
            CKC(cudaMemset(d16, 0xA5, n * sizeof *d16)); /* poison */
            CKC(cudaMemset(d8, 0xA5, n));
            g = narrow ? lowp_gpu_encode_f32_u8(ops[k].f, ops[k].r, ops[k].sat, d_in, d8, n, 0)
                       : lowp_gpu_encode_f32_u16(ops[k].f, ops[k].r, ops[k].sat, d_in, d16, n, 0);
            if (g != LOWP_GPU_OK) {
                setnote(ck, "%s", lowp_gpu_last_error());
                rc = 3;
                goto done;
            }
            CKC(cudaDeviceSynchronize());
            if (narrow) {
                CKC(cudaMemcpy(h8, d8, n, cudaMemcpyDeviceToHost));
                for (size_t i = 0; i < n; i++)
                    h16[i] = h8[i];
            } else {
                CKC(cudaMemcpy(h16, d16, n * sizeof *d16, cudaMemcpyDeviceToHost));
            }
            for (size_t i = 0; i < n; i++) {
                uint32_t b;
                memcpy(&b, &h_in[i], 4);
                lowp_gpu_sweep *r = &ck->r;
                r->inputs++;
                int isnan_ = (b & 0x7FFFFFFFu) > 0x7F800000u;
                if (isnan_)
                    r->nan_inputs++;
                if (h16[i] != ref[i]) {
                    r->mismatches++;
                    if (isnan_)
                        r->nan_input_mismatches++;
                    if (r->n_first < LOWP_GPU_FIRST_MAX) {
                        lowp_gpu_mismatch m = {b, h16[i], ref[i]};
                        r->first[r->n_first++] = m;
                    }
                }
            }
            ran++;
        }
    }
    setnote(ck,
             "%u (op, output width) runs of %zu inputs (%zu specials, then splitmix64 bits); %u ops not on this device",
             ran, n, nspec, skipped);
    rc = ck->r.mismatches ? 1 : 0;
done:
    ck->r.seconds = now_s() - t0;
    free(h_in);
    free(h16);
    free(ref);
    free(h8);
    if (d_in)
        cudaFree(d_in);
    if (d16)
        cudaFree(d16);
    if (d8)
        cudaFree(d8);
    return rc;
}

static int run_check(check *ck, int quick, int threads)
{
    lowp_gpu_sweep *r = &ck->r;
    char why[256];
    memset(r, 0, sizeof *r);
    r->format = ck->format;
    r->round = ck->round;
    r->saturate = ck->saturate;
    r->profile = LOWP_PROFILE_CUDA;
    r->threads = threads;
    if (ck->kind == K_API)
        return run_api_check(ck, threads);
    int g = LOWP_GPU_OK;
    if (ck->kind == K_F32)
        g = lowp_gpu_supported(ck->format, ck->round, ck->saturate, why, sizeof why);
    else if (ck->blackwell) /* decodes of E2M1 / E8M0 */
        g = lowp_gpu_supported(ck->format, ck->format == LOWP_E8M0 ? LOWP_RZ : LOWP_RN, LOWP_SAT_ON, why,
                               sizeof why);
    if (g == LOWP_GPU_EUNSUPPORTED) {
        setnote(ck, "not run: %s%s", why,
                 ck->blackwell ? " (this path is compiled for sm_100a/sm_120a and has never run)" : "");
        return 2;
    }
    if (g != LOWP_GPU_OK) {
        setnote(ck, "%s", lowp_gpu_last_error());
        return 3;
    }
    if (ck->kind == K_F32) {
        if (quick) {
            for (size_t w = 0; w < NQUICK && g == LOWP_GPU_OK; w++) {
                r->begin = quick_windows[w];
                r->end = quick_windows[w] + ((uint64_t)1 << 24);
                g = lowp_gpu_sweep_f32(r);
            }
        } else {
            r->begin = 0;
            r->end = (uint64_t)1 << 32;
            g = lowp_gpu_sweep_f32(r);
        }
    } else if (ck->kind == K_F16) {
        g = lowp_gpu_sweep_f16(r);
    } else {
        g = lowp_gpu_sweep_decode(r);
    }
    if (g != LOWP_GPU_OK) {
        setnote(ck, "%s", lowp_gpu_last_error());
        return 3;
    }
    if (ck->kind == K_DECODE) {
        setnote(ck, "expected: lowp_decode_f32 written as %s by lowp's cuda codec, so NaN codes expect the "
                    "canonical 0x7FFF (ref/notes/formats.md 2.2 measured this for e4m3 on sm_90)%s",
                ck->format == LOWP_E8M0 ? "bf16" : "f16",
                ck->format == LOWP_E4M3 ? "" : "; unmeasured for this format before");
        if (ck->format != LOWP_E4M3 && r->mismatches && r->mismatches == r->nan_input_mismatches &&
            r->gpu_nan_cpu_not == 0 && r->cpu_nan_gpu_not == 0) {
            /* NaN-ness agrees everywhere; only the NaN bits differ from canonical, which
             * ref/notes/formats.md 2.2 records for e4m3 alone */
            addnote(ck, "; the %llu differences are NaN codes decoded to NaNs other than 0x7FFF: "
                        "informational (NaN-ness agrees; canonical NaN was measured for e4m3 only)",
                    (unsigned long long)r->mismatches);
            return 4;
        }
    } else if (ck->kind == K_F16) {
        setnote(ck, "expected: lowp cuda codec applied to the binary16 value (exact in binary32)");
        if (r->mismatches && r->mismatches == r->nan_input_mismatches) {
            /* lowp has no binary16 entry point; its cuda profile is the binary32 one (NaN ->
             * 0x7F either sign). ref/notes/formats.md 2.2 found the f16x2 form sign-preserving. */
            addnote(ck, "; all %llu differences are on NaN inputs: informational, lowp has no binary16 entry "
                        "point (its binary32 rule gives 0x7F for either sign; ref/notes/formats.md 2.2 found the f16x2 "
                        "form matching the sign-preserving double path)",
                    (unsigned long long)r->mismatches);
            return 4;
        }
    } else {
        setnote(ck, "expected: lowp cuda %s %s %s; %.2f s waiting on the GPU", lowp_format_name(ck->format),
                lowp_round_name(ck->round), ck->saturate ? "sat" : "nosat", r->seconds_host_wait);
    }
    if (ck->blackwell) {
        addnote(ck, " [Blackwell path: first run ever]");
    }
    return r->mismatches ? 1 : 0;
}

static const char *status_name(int s)
{
    switch (s) {
    case 0: return "pass";
    case 1: return "**MISMATCH**";
    case 2: return "not run";
    case 4: return "pass (NaN inputs differ: informational)";
    default: return "**ERROR**";
    }
}

/* Describe an input of a check: binary32 / binary16 bits or a code, with its value. */
static void describe_input(const check *ck, uint32_t in, char *buf, size_t len)
{
    if (ck->kind == K_F32 || ck->kind == K_API) {
        float x;
        memcpy(&x, &in, 4);
        snprintf(buf, len, "0x%08X (%.9g)", in, (double)x);
    } else if (ck->kind == K_F16) {
        snprintf(buf, len, "f16 0x%04X (%.9g)", in, (double)lowp_decode_f32(LOWP_F16, (uint16_t)in));
    } else {
        snprintf(buf, len, "code 0x%02X (%.9g)", in, (double)lowp_decode_f32(ck->format, (uint16_t)in));
    }
}

static void describe_output(const check *ck, uint16_t code, char *buf, size_t len)
{
    lowp_format f = ck->format;
    if (ck->kind == K_DECODE)
        f = ck->format == LOWP_E8M0 ? LOWP_BF16 : LOWP_F16;
    int w = lowp_format_bits(f) <= 8 ? 2 : 4;
    if (ck->kind == K_API) {
        snprintf(buf, len, "0x%0*X", 4, code);
        return;
    }
    snprintf(buf, len, "0x%0*X (%.9g)", w, code, (double)lowp_decode_f32(f, code));
}

static void write_report(FILE *f, const lowp_gpu_info *info, int have_gpu, const char *nogpu,
                         int quick, int threads, double total)
{
    char dv[32], rv[32], date[64];
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tmv);
    struct utsname un;
    if (uname(&un) != 0)
        snprintf(un.nodename, sizeof un.nodename, "?");
    fprintf(f, "# lowp GPU cvt check\n\n");
    fprintf(f, "Hardware PTX `cvt` conversions compared with lowp's CPU model (profile `cuda`), "
               "produced by `" PROG "` (gpu/check/cvt_check.c) on %s, host %s.\n\n", date, un.nodename);
    if (!have_gpu) {
        fprintf(f, "**Skipped: %s.** Nothing was compared.\n", nogpu);
        return;
    }
    lowp_gpu_version_string(info->driver_version, dv, sizeof dv);
    lowp_gpu_version_string(info->runtime_version, rv, sizeof rv);
    fprintf(f, "| | |\n|---|---|\n");
    fprintf(f, "| device | %s (device %d) |\n", info->name, info->device);
    fprintf(f, "| compute capability | %d.%d, %d SMs, %.1f GiB |\n", info->cc_major, info->cc_minor,
            info->sm_count, (double)info->global_mem / (1024.0 * 1024.0 * 1024.0));
    fprintf(f, "| CUDA driver (cudaDriverGetVersion) | %s (%d) |\n", dv, info->driver_version);
    fprintf(f, "| CUDA runtime (cudaRuntimeGetVersion) | %s (%d) |\n", rv, info->runtime_version);
    fprintf(f, "| kernel image loaded | sm_%d%s |\n", info->image_arch / 10,
            info->image_family ? " (family-specific: e2m1x2/ue8m0x2 available)" : "");
    fprintf(f, "| inputs | %s |\n", quick ? "--quick: 9 windows of 2^24 binary32 inputs per sweep"
                                          : "all 2^32 binary32 inputs per sweep");
    fprintf(f, "| host threads | %d |\n", threads);
    fprintf(f, "| total time | %.1f s |\n\n", total);
    fprintf(f, "The E2M1 and UE8M0 conversions (`cvt.rn.satfinite.e2m1x2.f32`, "
               "`cvt.{rz,rp}{.satfinite}.ue8m0x2.f32` and their decodes) are compiled for sm_100a and "
               "sm_120a only and **have never run on hardware** in this project; on this device they are %s.\n\n",
            (info->caps & LOWP_GPU_CAP_FP4) ? "run below for the first time" : "listed as not run");
    fprintf(f, "| check | inputs | mismatches | on NaN inputs | on other inputs | GPU-only NaN | CPU-only NaN "
               "| time s | result |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < NCHECKS; i++) {
        const check *ck = &checks[i];
        if (ck->status == -1) {
            fprintf(f, "| %s | - | - | - | - | - | - | - | not reached |\n", ck->name);
            continue;
        }
        if (ck->status == 2 || (ck->status == 3 && ck->r.inputs == 0)) {
            fprintf(f, "| %s | - | - | - | - | - | - | - | %s: %s |\n", ck->name, status_name(ck->status),
                    ck->note);
            continue;
        }
        const lowp_gpu_sweep *r = &ck->r;
        fprintf(f, "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %.2f | %s |\n", ck->name,
                (unsigned long long)r->inputs, (unsigned long long)r->mismatches,
                (unsigned long long)r->nan_input_mismatches,
                (unsigned long long)(r->mismatches - r->nan_input_mismatches),
                (unsigned long long)r->gpu_nan_cpu_not, (unsigned long long)r->cpu_nan_gpu_not, r->seconds,
                status_name(ck->status));
    }
    fprintf(f, "\nNotes per check:\n\n");
    for (size_t i = 0; i < NCHECKS; i++)
        if (checks[i].note[0])
            fprintf(f, "- %s: %s\n", checks[i].name, checks[i].note);
    for (size_t i = 0; i < NCHECKS; i++) {
        const check *ck = &checks[i];
        if (ck->r.n_first == 0)
            continue;
        fprintf(f, "\n## First mismatches: %s\n\n", ck->name);
        fprintf(f, "%llu mismatches; the first %u by input:\n\n| input | GPU | lowp |\n|---|---|---|\n",
                (unsigned long long)ck->r.mismatches, ck->r.n_first);
        for (unsigned k = 0; k < ck->r.n_first; k++) {
            char a[96], b[64], c[64];
            describe_input(ck, ck->r.first[k].input, a, sizeof a);
            describe_output(ck, ck->r.first[k].gpu, b, sizeof b);
            describe_output(ck, ck->r.first[k].cpu, c, sizeof c);
            fprintf(f, "| %s | %s | %s |\n", a, b, c);
        }
    }
}

static int save_report(const char *path, const lowp_gpu_info *info, int have_gpu, const char *nogpu,
                       int quick, int threads, double total)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, PROG ": cannot write %s\n", tmp);
        return -1;
    }
    write_report(f, info, have_gpu, nogpu, quick, threads, total);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, PROG ": cannot write %s\n", path);
        remove(tmp);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int quick = 0, threads = 0;
    const char *only = NULL, *report = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (int)lowp_cli_parse_u64("--threads", argv[++i], 1, 4096);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage();
            return 0;
        } else if (argv[i][0] == '-' || report)
            return usage();
        else
            report = argv[i];
    }
    if (!report)
        return usage();
#ifdef _OPENMP
    if (threads <= 0)
        threads = omp_get_max_threads();
#else
    threads = 1;
#endif
    setvbuf(stdout, NULL, _IOLBF, 0);
    double t0 = now_s();
    lowp_gpu_info info;
    memset(&info, 0, sizeof info);
    int g = lowp_gpu_init(0, &info);
    if (g == LOWP_GPU_ENODEV) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", lowp_gpu_last_error());
        printf(PROG ": skipped (exit 77): %s\n", msg);
        save_report(report, &info, 0, msg, quick, threads, 0.0);
        return LOWP_GPU_EXIT_SKIP;
    }
    if (g != LOWP_GPU_OK) {
        fprintf(stderr, PROG ": %s\n", lowp_gpu_last_error());
        return 3;
    }
    char dv[32], rv[32];
    lowp_gpu_version_string(info.driver_version, dv, sizeof dv);
    lowp_gpu_version_string(info.runtime_version, rv, sizeof rv);
    printf(PROG ": %s, cc %d.%d, %d SMs, driver %s, runtime %s, image sm_%d%s; %d host threads%s\n", info.name,
           info.cc_major, info.cc_minor, info.sm_count, dv, rv, info.image_arch / 10,
           info.image_family ? " (family-specific)" : "", threads, quick ? "; --quick" : "");
    if (!(info.caps & LOWP_GPU_CAP_FP4))
        printf(PROG ": E2M1/UE8M0 cvt paths are compiled for sm_100a/sm_120a only and never ran; not run here\n");
    int worst = 0, any_mismatch = 0;
    for (size_t i = 0; i < NCHECKS; i++)
        checks[i].status = -1; /* not reached yet */
    for (size_t i = 0; i < NCHECKS; i++) {
        check *ck = &checks[i];
        if (only && !strstr(ck->name, only)) {
            ck->status = 2;
            setnote(ck, "not run: --only %s", only);
            continue;
        }
        ck->status = run_check(ck, quick, threads);
        if (ck->status == 1)
            any_mismatch = 1;
        if (ck->status == 3)
            worst = 3;
        if (ck->status == 2)
            printf("  %-66s %s\n", ck->name, ck->note);
        else
            printf("  %-66s %12llu inputs %10llu mismatches (%llu on NaN inputs) %7.2f s  %s%s%s\n", ck->name,
                   (unsigned long long)ck->r.inputs, (unsigned long long)ck->r.mismatches,
                   (unsigned long long)ck->r.nan_input_mismatches, ck->r.seconds, status_name(ck->status),
                   ck->status == 3 ? ": " : "", ck->status == 3 ? ck->note : "");
        /* rewrite the report after every check, so a run cut short keeps what it did */
        save_report(report, &info, 1, NULL, quick, threads, now_s() - t0);
        if (ck->status == 3) {
            fprintf(stderr, PROG ": %s: %s\n", ck->name, ck->note);
            break; /* a CUDA error may leave the context unusable */
        }
    }
    double total = now_s() - t0;
    if (save_report(report, &info, 1, NULL, quick, threads, total) != 0)
        return 3;
    printf(PROG ": report %s; %.1f s; %s\n", report, total,
           worst ? "ERROR" : any_mismatch ? "MISMATCHES FOUND" : "all checks that ran match");
    return worst ? 3 : any_mismatch ? 1 : 0;
}
