/* gpu/probe/rcp_probe.cu: measures rcp.approx.ftz.f32 on the GPU and checks lowp's model of it.
 *
 *   lowp_gpu_rcp_probe OUTDIR
 *     1. every mantissa x = 1.m (2^23): the hardware result against __frcp_rn (IEEE RN);
 *        the mismatches form lowp's correction table, written to OUTDIR/rcp_approx_sm90.bin
 *        in lowp's format (ref/block/src/rcp_approx.c) and compared byte for byte with the table
 *        embedded in lowp (ref/block/data/rcp_approx_sm90.bin as built): "identical" or the
 *        differences;
 *     2. exponent invariance: every normal x = 1.m * 2^(E-127), E = 1..254, against the
 *        E = 127 result scaled by 2^(127-E) (and +0 where that is below 2^-126);
 *     3. all 2^32 binary32 inputs: the hardware against lowp_rcp_approx_ftz, per input
 *        class (NaN, Inf, zero, subnormal, normal with normal / flushed result), the first
 *        20 mismatches printed; NaN, Inf, zero, subnormal and huge inputs are pinned down
 *        by this sweep, not assumed;
 *     4. OUTDIR/rcp-approx-h200.md: device, driver, runtime, the counts, the special inputs,
 *        the mismatches, the time.
 *     Exit 0: the model matches every input and the table is identical; 1: a mismatch or a
 *     different table; 2: usage or file error; 3: CUDA error; 77: no GPU (one line).
 *
 *   lowp_gpu_rcp_probe --encode-u32 IN.u32 OUT.bin
 *     CPU only: converts a mismatch list in the measured list's form (little-endian u32,
 *     sorted: bits 0-22 = m, bit 31 = +1 ulp) to lowp's table format and compares it with
 *     the embedded table. This is how ref/block/data/rcp_approx_sm90.bin was bootstrapped from
 *     ref/block/data/rcp_approx_ftz_f32_sm90_mismatch.u32.xz (xz -dc first).
 *
 * Built for sm_90 only (gpu/probe/rcp.cmake): the table is the H200's. On another GPU
 * the program still runs (PTX JIT) and reports what differs; it never edits ref/block/data. To
 * adopt a new measurement: cp OUTDIR/rcp_approx_sm90.bin ref/block/data/ and rebuild. */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <cuda_runtime.h>

#include "lowp/block.h"

#include "lowp_test_rcp.h" /* tests/lib (the model's bits, RN(1/x)), named in gpu/probe/rcp.cmake */
#include "rcp_table.h"     /* ref/block/internal, named in gpu/probe/rcp.cmake */

#define NMANT (1u << 23)
#define CANON_NAN 0x7FFFFFFFu

/* Every CUDA call is checked; a failure ends the program with status 3. */
#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "lowp_gpu_rcp_probe: %s failed: %s (%s) [rcp_probe.cu:%d]\n", \
                    #call, cudaGetErrorName(e_), cudaGetErrorString(e_), __LINE__);       \
            exit(3);                                                                      \
        }                                                                                 \
    } while (0)
#define CK_LAUNCH()                                                                       \
    do {                                                                                  \
        CK(cudaGetLastError());                                                           \
        CK(cudaDeviceSynchronize());                                                      \
    } while (0)

/* ------------------------------------------------------------------------- device */

__device__ __forceinline__ float hw_rcp(float a)
{
    float r;
    asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

/* corr[m] = 0: hardware == RN; 1: RN + 1 ulp; 2: RN - 1 ulp; 3: anything else. */
__global__ void k_mantissas(unsigned char *corr)
{
    unsigned m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= NMANT)
        return;
    float x = __uint_as_float(0x3F800000u | m);
    int d = (int)__float_as_uint(hw_rcp(x)) - (int)__float_as_uint(__frcp_rn(x));
    corr[m] = d == 0 ? 0 : d == 1 ? 1 : d == -1 ? 2 : 3;
}

/* cnt[0]: normal-result violations, cnt[1]: normal results checked, cnt[2]: flush
 * violations (expected +0), cnt[3]: flushed results checked; ex: first violations. */
__global__ void k_exponents(unsigned long long *cnt, unsigned *ex)
{
    unsigned long long total = 254ull << 23;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned E = (unsigned)(i >> 23) + 1, m = (unsigned)(i & (NMANT - 1));
        unsigned base = __float_as_uint(hw_rcp(__uint_as_float(0x3F800000u | m)));
        unsigned got = __float_as_uint(hw_rcp(__uint_as_float(E << 23 | m)));
        int re = (int)(base >> 23) + 127 - (int)E;
        unsigned want = re >= 1 ? (unsigned)re << 23 | (base & (NMANT - 1)) : 0u;
        int slot = re >= 1 ? 0 : 2;
        atomicAdd(&cnt[slot + 1], 1ull);
        if (got != want) {
            unsigned long long k = atomicAdd(&cnt[slot], 1ull);
            if (k < 8) {
                ex[2 * (slot / 2 * 8 + k)] = E << 23 | m;
                ex[2 * (slot / 2 * 8 + k) + 1] = got;
            }
        }
    }
}

__global__ void k_sweep(uint64_t start, unsigned n, unsigned *out)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = __float_as_uint(hw_rcp(__uint_as_float((unsigned)(start + i))));
}

__global__ void k_list(const unsigned *in, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = __float_as_uint(hw_rcp(__uint_as_float(in[i])));
}

/* --------------------------------------------------------------------------- host */

enum { C_NAN, C_INF, C_ZERO, C_SUB, C_NORMAL, C_FLUSH, C_COUNT };
static const char *const CLASS_NAME[C_COUNT] = {
    "NaN", "+-Inf", "+-0", "subnormal", "normal x, normal 1/x", "normal x, 1/x below 2^-126"};

static int input_class(uint32_t x)
{
    uint32_t a = x & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return C_NAN;
    if (a == 0x7F800000u)
        return C_INF;
    if (a == 0)
        return C_ZERO;
    if (a < 0x00800000u)
        return C_SUB;
    /* 1/x is below 2^-126 for biased E = 253 with m != 0 and for E = 254
     * (ref/notes/formats.md 5.7 model; the sweep tests it rather than assumes it: the
     * class only labels rows). */
    uint32_t E = a >> 23;
    return (E == 254 || (E == 253 && (a & (NMANT - 1)))) ? C_FLUSH : C_NORMAL;
}

struct Sweep {
    unsigned long long inputs[C_COUNT] = {}, bad[C_COUNT] = {};
    unsigned long long nan_canon = 0; /* NaN inputs whose result is 0x7FFFFFFF */
    std::vector<std::pair<uint32_t, uint32_t>> first; /* (x, hw), in input order */
    std::mutex mu;
};

static void check_range(const uint32_t *hw, uint64_t start, size_t lo, size_t hi, Sweep *s)
{
    unsigned long long in[C_COUNT] = {}, bad[C_COUNT] = {}, nc = 0;
    std::vector<std::pair<uint32_t, uint32_t>> first;
    for (size_t i = lo; i < hi; i++) {
        uint32_t x = (uint32_t)(start + i), h = hw[i];
        int c = input_class(x);
        in[c]++;
        if (c == C_NAN && h == CANON_NAN)
            nc++;
        if (h != lowp_test_rcp_model(x)) {
            bad[c]++;
            if (first.size() < 20)
                first.emplace_back(x, h);
        }
    }
    std::lock_guard<std::mutex> g(s->mu);
    for (int c = 0; c < C_COUNT; c++) {
        s->inputs[c] += in[c];
        s->bad[c] += bad[c];
    }
    s->nan_canon += nc;
    s->first.insert(s->first.end(), first.begin(), first.end());
}

static std::vector<unsigned char> read_file(const char *path, bool *ok)
{
    std::vector<unsigned char> v;
    *ok = false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return v;
    unsigned char buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        v.insert(v.end(), buf, buf + k);
    *ok = !ferror(f);
    fclose(f);
    return v;
}

static bool write_file(const std::string &path, const std::vector<unsigned char> &v)
{
    FILE *f = fopen(path.c_str(), "wb");
    if (!f)
        return false;
    bool ok = fwrite(v.data(), 1, v.size(), f) == v.size();
    return fclose(f) == 0 && ok;
}

/* Compare a table (file bytes) with the embedded one; returns true when identical and
 * appends a description to *desc (Markdown lines). */
static bool compare_with_embedded(const std::vector<unsigned char> &mine, std::string *desc)
{
    size_t elen;
    const unsigned char *emb = lowp_rcp_table_embedded(&elen);
    char line[256];
    if (mine.size() == elen && memcmp(mine.data(), emb, elen) == 0) {
        snprintf(line, sizeof line, "identical: %zu bytes, byte for byte equal to the embedded "
                 "ref/block/data/rcp_approx_sm90.bin\n", elen);
        *desc += line;
        return true;
    }
    snprintf(line, sizeof line, "DIFFERENT: measured table %zu bytes, embedded %zu bytes\n",
             mine.size(), elen);
    *desc += line;
    std::vector<uint32_t> a(NMANT), b(NMANT);
    size_t na = 0, nb = 0;
    char why[160];
    if (lowp_rcp_table_decode(mine.data(), mine.size(), a.data(), NMANT, &na, why, sizeof why)) {
        *desc += std::string("measured table does not decode: ") + why + "\n";
        return false;
    }
    if (lowp_rcp_table_decode(emb, elen, b.data(), NMANT, &nb, why, sizeof why)) {
        *desc += std::string("embedded table does not decode: ") + why + "\n";
        return false;
    }
    /* Merge the two sorted lists: mantissas in one only, or with another direction. */
    size_t i = 0, j = 0, shown = 0, only_a = 0, only_b = 0, dir = 0;
    while (i < na || j < nb) {
        uint32_t ma = i < na ? a[i] & (NMANT - 1) : NMANT, mb = j < nb ? b[j] & (NMANT - 1) : NMANT;
        const char *what = nullptr;
        uint32_t m = ma < mb ? ma : mb;
        if (ma == mb) {
            if ((a[i] ^ b[j]) >> 31) {
                dir++;
                what = a[i] >> 31 ? "measured +1, embedded -1" : "measured -1, embedded +1";
            }
            i++, j++;
        } else if (ma < mb) {
            only_a++;
            what = a[i] >> 31 ? "measured +1, embedded 0" : "measured -1, embedded 0";
            i++;
        } else {
            only_b++;
            what = b[j] >> 31 ? "measured 0, embedded +1" : "measured 0, embedded -1";
            j++;
        }
        if (what && shown++ < 20) {
            snprintf(line, sizeof line, "- m = 0x%06x (x = 0x%08x): %s\n", m, 0x3F800000u | m,
                     what);
            *desc += line;
        }
    }
    snprintf(line, sizeof line, "entries: measured %zu, embedded %zu; only measured %zu, only "
             "embedded %zu, direction differs %zu\n", na, nb, only_a, only_b, dir);
    *desc += line;
    return false;
}

static int encode_u32(const char *in, const char *out)
{
    bool ok;
    std::vector<unsigned char> raw = read_file(in, &ok);
    if (!ok || raw.size() % 4) {
        fprintf(stderr, "lowp_gpu_rcp_probe: cannot read %s as u32 entries\n", in);
        return 2;
    }
    std::vector<uint32_t> e(raw.size() / 4);
    for (size_t i = 0; i < e.size(); i++)
        e[i] = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
               (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
    size_t need = lowp_rcp_table_encode(e.data(), e.size(), nullptr, 0);
    if (!need) {
        fprintf(stderr, "lowp_gpu_rcp_probe: %s is not a sorted mismatch list\n", in);
        return 2;
    }
    std::vector<unsigned char> t(need);
    lowp_rcp_table_encode(e.data(), e.size(), t.data(), need);
    if (!write_file(out, t)) {
        fprintf(stderr, "lowp_gpu_rcp_probe: cannot write %s\n", out);
        return 2;
    }
    size_t up = 0;
    for (uint32_t v : e)
        up += v >> 31;
    printf("%zu entries (%zu +1, %zu -1) -> %s, %zu bytes\n", e.size(), up, e.size() - up, out,
           need);
    std::string desc;
    bool same = compare_with_embedded(t, &desc);
    printf("compared with the embedded table: %s", desc.c_str());
    return same ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--encode-u32") == 0)
        return encode_u32(argv[2], argv[3]);
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s OUTDIR\n       %s --encode-u32 IN.u32 OUT.bin\n", argv[0],
                argv[0]);
        return 2;
    }
    const std::string outdir = argv[1];
    const double t0 = lowp_test_now();

    int ndev = 0;
    cudaError_t de = cudaGetDeviceCount(&ndev);
    if (de != cudaSuccess || ndev == 0) {
        printf("lowp_gpu_rcp_probe: skipped, no CUDA GPU (%s)\n",
               de != cudaSuccess ? cudaGetErrorString(de) : "0 devices");
        return 77;
    }
    if (mkdir(outdir.c_str(), 0777) != 0) {
        struct stat st;
        if (stat(outdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "lowp_gpu_rcp_probe: cannot create %s\n", outdir.c_str());
            return 2;
        }
    }
    CK(cudaSetDevice(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    char smi[128] = "unknown";
    if (FILE *p = popen("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0 "
                        "2>/dev/null", "r")) {
        if (fgets(smi, sizeof smi, p))
            smi[strcspn(smi, "\r\n")] = 0;
        else
            strcpy(smi, "unknown");
        pclose(p);
    }
    printf("device: %s (sm_%d%d), driver %s (CUDA driver API %d), runtime %d\n", prop.name,
           prop.major, prop.minor, smi, drv, rt);
    if (prop.major != 9 || prop.minor != 0)
        printf("note: not an sm_90 GPU; the embedded table is the H200's, differences are "
               "expected if this GPU's MUFU.RCP differs\n");
    lowp_rcp_approx_ftz(1.0f); /* decode the embedded table before the timed parts */

    /* 1. the mantissa table */
    double t1 = lowp_test_now();
    unsigned char *d_corr;
    CK(cudaMalloc(&d_corr, NMANT));
    k_mantissas<<<NMANT / 256, 256>>>(d_corr);
    CK_LAUNCH();
    std::vector<unsigned char> corr(NMANT);
    CK(cudaMemcpy(corr.data(), d_corr, NMANT, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_corr));
    unsigned long long cnt[4] = {0, 0, 0, 0};
    std::vector<uint32_t> entries;
    for (uint32_t m = 0; m < NMANT; m++) {
        cnt[corr[m]]++;
        if (corr[m] == 1 || corr[m] == 2)
            entries.push_back(m | (corr[m] == 1 ? 0x80000000u : 0u));
    }
    std::vector<unsigned char> table(lowp_rcp_table_encode(entries.data(), entries.size(),
                                                           nullptr, 0));
    lowp_rcp_table_encode(entries.data(), entries.size(), table.data(), table.size());
    const std::string bin = outdir + "/rcp_approx_sm90.bin";
    if (!write_file(bin, table)) {
        fprintf(stderr, "lowp_gpu_rcp_probe: cannot write %s\n", bin.c_str());
        return 2;
    }
    std::string tdesc;
    bool table_same = compare_with_embedded(table, &tdesc);
    printf("mantissas 1.m (2^23) vs __frcp_rn: %llu exact, %llu +1 ulp, %llu -1 ulp, %llu "
           "other; %zu entries -> %s\n", cnt[0], cnt[1], cnt[2], cnt[3], entries.size(),
           bin.c_str());
    printf("table vs embedded: %s", tdesc.c_str());
    double t_mant = lowp_test_now() - t1;

    /* 2. exponent invariance */
    t1 = lowp_test_now();
    unsigned long long *d_cnt;
    unsigned *d_ex;
    CK(cudaMalloc(&d_cnt, 4 * sizeof(unsigned long long)));
    CK(cudaMalloc(&d_ex, 32 * sizeof(unsigned)));
    CK(cudaMemset(d_cnt, 0, 4 * sizeof(unsigned long long)));
    CK(cudaMemset(d_ex, 0, 32 * sizeof(unsigned)));
    k_exponents<<<prop.multiProcessorCount * 16, 256>>>(d_cnt, d_ex);
    CK_LAUNCH();
    unsigned long long ecnt[4];
    unsigned ex[32];
    CK(cudaMemcpy(ecnt, d_cnt, sizeof ecnt, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ex, d_ex, sizeof ex, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_cnt));
    CK(cudaFree(d_ex));
    printf("exponent invariance (E = 1..254, all m): %llu violations in %llu normal results; "
           "%llu not +0 in %llu results below 2^-126\n", ecnt[0], ecnt[1], ecnt[2], ecnt[3]);
    for (int s = 0; s < 2; s++)
        for (unsigned long long k = 0; k < ecnt[2 * s] && k < 8; k++)
            printf("   x=0x%08x got=0x%08x\n", ex[2 * (s * 8 + k)], ex[2 * (s * 8 + k) + 1]);
    double t_exp = lowp_test_now() - t1;

    /* 3. all 2^32 inputs against lowp_rcp_approx_ftz */
    t1 = lowp_test_now();
    const unsigned CH = 1u << 28;
    unsigned *d_out, *h_out;
    CK(cudaMalloc(&d_out, (size_t)CH * 4));
    CK(cudaMallocHost(&h_out, (size_t)CH * 4));
    Sweep sw;
    unsigned nthr = std::thread::hardware_concurrency();
    if (nthr == 0)
        nthr = 4;
    for (uint64_t s = 0; s < (UINT64_C(1) << 32); s += CH) {
        k_sweep<<<prop.multiProcessorCount * 32, 256>>>(s, CH, d_out);
        CK_LAUNCH();
        CK(cudaMemcpy(h_out, d_out, (size_t)CH * 4, cudaMemcpyDeviceToHost));
        std::vector<std::thread> th;
        size_t per = (CH + nthr - 1) / nthr;
        for (unsigned t = 0; t < nthr; t++) {
            size_t lo = (size_t)t * per, hi = lo + per < CH ? lo + per : CH;
            if (lo < hi)
                th.emplace_back(check_range, h_out, s, lo, hi, &sw);
        }
        for (auto &t : th)
            t.join();
    }
    CK(cudaFree(d_out));
    CK(cudaFreeHost(h_out));
    std::sort(sw.first.begin(), sw.first.end());
    unsigned long long total_bad = 0;
    for (int c = 0; c < C_COUNT; c++) {
        total_bad += sw.bad[c];
        printf("all inputs, %-28s %11llu inputs, %llu mismatches vs lowp_rcp_approx_ftz\n",
               CLASS_NAME[c], sw.inputs[c], sw.bad[c]);
    }
    printf("NaN inputs giving 0x7FFFFFFF: %llu of %llu\n", sw.nan_canon, sw.inputs[C_NAN]);
    for (size_t k = 0; k < sw.first.size() && k < 20; k++)
        printf("   mismatch x=0x%08x hw=0x%08x model=0x%08x\n", sw.first[k].first,
               sw.first[k].second, lowp_test_rcp_model(sw.first[k].first));
    double t_sweep = lowp_test_now() - t1;

    /* 4. special inputs, each also in the sweep */
    static const struct {
        uint32_t x;
        const char *what;
    } sp[] = {
        {0x00000000u, "+0"}, {0x80000000u, "-0"}, {0x00000001u, "min subnormal"},
        {0x007FFFFFu, "max subnormal"}, {0x807FFFFFu, "-max subnormal"}, {0x7F800000u, "+Inf"},
        {0xFF800000u, "-Inf"}, {0x7FC00000u, "qNaN"}, {0xFFC00000u, "-qNaN"},
        {0x7F800001u, "sNaN"}, {0xFF800001u, "-sNaN"}, {0x7FFFFFFFu, "NaN 0x7FFFFFFF"},
        {0xFFFFFFFFu, "NaN 0xFFFFFFFF"}, {0x7F7FFFFFu, "FLT_MAX"}, {0xFF7FFFFFu, "-FLT_MAX"},
        {0x7F000000u, "2^127"}, {0x7E800001u, "(1+2^-23) 2^126"}, {0x7E800000u, "2^126"},
        {0x7E7FFFFFu, "(2-2^-23) 2^125"}, {0x00800000u, "2^-126"},
        {0x00FFFFFFu, "(2-2^-23) 2^-126"},
        {0x3F800000u, "1"}, {0xBF800000u, "-1"}, {0x40400000u, "3"}, {0x40C00000u, "6"},
        {0x43E00000u, "448"}, {0x45280000u, "2688"}, {0xC0C00000u, "-6"},
    };
    const int nsp = (int)(sizeof sp / sizeof sp[0]);
    std::vector<unsigned> spin(nsp), spout(nsp);
    for (int i = 0; i < nsp; i++)
        spin[i] = sp[i].x;
    unsigned *d_in, *d_o;
    CK(cudaMalloc(&d_in, nsp * 4));
    CK(cudaMalloc(&d_o, nsp * 4));
    CK(cudaMemcpy(d_in, spin.data(), nsp * 4, cudaMemcpyHostToDevice));
    k_list<<<1, 64>>>(d_in, d_o, nsp);
    CK_LAUNCH();
    CK(cudaMemcpy(spout.data(), d_o, nsp * 4, cudaMemcpyDeviceToHost));
    CK(cudaFree(d_in));
    CK(cudaFree(d_o));
    int sp_bad = 0;
    for (int i = 0; i < nsp; i++)
        sp_bad += spout[i] != lowp_test_rcp_model(sp[i].x);

    double t_all = lowp_test_now() - t0;
    bool pass = table_same && total_bad == 0 && sp_bad == 0 && cnt[3] == 0 && ecnt[0] == 0 &&
                ecnt[2] == 0;

    /* 5. the report */
    const std::string md = outdir + "/rcp-approx-h200.md";
    FILE *f = fopen(md.c_str(), "w");
    if (!f) {
        fprintf(stderr, "lowp_gpu_rcp_probe: cannot write %s\n", md.c_str());
        return 2;
    }
    fprintf(f, "# rcp.approx.ftz.f32 on the GPU vs lowp_rcp_approx_ftz\n\n");
    fprintf(f, "Written by `lowp_gpu_rcp_probe` (gpu/probe/rcp_probe.cu). Result: **%s**.\n\n",
            pass ? "PASS: the model matches every input; the table is identical" : "FAIL");
    fprintf(f, "| item | value |\n|---|---|\n");
    fprintf(f, "| device | %s, sm_%d%d, %d SMs |\n", prop.name, prop.major, prop.minor,
            prop.multiProcessorCount);
    fprintf(f, "| driver (nvidia-smi) | %s |\n", smi);
    fprintf(f, "| CUDA driver API (cudaDriverGetVersion) | %d |\n", drv);
    fprintf(f, "| CUDA runtime (cudaRuntimeGetVersion) | %d |\n", rt);
    fprintf(f, "| time | %.1f s in all: mantissas %.1f s, exponents %.1f s, 2^32 sweep %.1f s "
            "(%u host threads) |\n\n", t_all, t_mant, t_exp, t_sweep, nthr);
    fprintf(f, "## Mantissas x = 1.m, all 2^23, against `__frcp_rn`\n\n");
    fprintf(f, "| exact | +1 ulp | -1 ulp | other | mismatching (table entries) |\n"
            "|---|---|---|---|---|\n| %llu | %llu | %llu | %llu | %zu |\n\n", cnt[0], cnt[1],
            cnt[2], cnt[3], entries.size());
    fprintf(f, "Measured table: `%s` (%zu bytes, lowp format v1). Against the embedded "
            "`ref/block/data/rcp_approx_sm90.bin`:\n\n", bin.c_str(), table.size());
    fprintf(f, "%s\n", tdesc.c_str());
    fprintf(f, "## Exponent invariance, E = 1..254, all m\n\n");
    fprintf(f, "rcp(1.m 2^(E-127)) against rcp(1.m) 2^(127-E): %llu violations in %llu normal "
            "results; %llu results not +0 in %llu cases where that is below 2^-126 "
            "(flush to zero).\n\n", ecnt[0], ecnt[1], ecnt[2], ecnt[3]);
    fprintf(f, "## All 2^32 inputs against lowp_rcp_approx_ftz\n\n");
    fprintf(f, "| input class | inputs | mismatches |\n|---|---|---|\n");
    for (int c = 0; c < C_COUNT; c++)
        fprintf(f, "| %s | %llu | %llu |\n", CLASS_NAME[c], sw.inputs[c], sw.bad[c]);
    fprintf(f, "| **all** | %llu | %llu |\n\n", 1ull << 32, total_bad);
    fprintf(f, "NaN inputs whose result is 0x7FFFFFFF: %llu of %llu.\n\n", sw.nan_canon,
            sw.inputs[C_NAN]);
    if (!sw.first.empty()) {
        fprintf(f, "First mismatches:\n\n| x | hardware | model |\n|---|---|---|\n");
        for (size_t k = 0; k < sw.first.size() && k < 20; k++)
            fprintf(f, "| 0x%08x | 0x%08x | 0x%08x |\n", sw.first[k].first, sw.first[k].second,
                    lowp_test_rcp_model(sw.first[k].first));
        fprintf(f, "\n");
    }
    fprintf(f, "## Special inputs\n\n| input | x | hardware | lowp | RN(1/x) |\n"
            "|---|---|---|---|---|\n");
    for (int i = 0; i < nsp; i++)
        fprintf(f, "| %s | 0x%08x | 0x%08x | 0x%08x%s | 0x%08x |\n", sp[i].what, sp[i].x,
                spout[i], lowp_test_rcp_model(sp[i].x),
                spout[i] == lowp_test_rcp_model(sp[i].x) ? "" : " **differs**",
                lowp_test_rcp_rn(sp[i].x));
    fclose(f);
    printf("wrote %s; %s in %.1f s\n", md.c_str(), pass ? "PASS" : "FAIL", t_all);
    return pass ? 0 : 1;
}
