/* tests/test_model.c: the model layer's parts that need no model file.
 *
 * The GGUF reader (lowp/gguf.h) on small files built here byte by byte from the format's
 * definition (llama.cpp's GGUF description: header, key/value pairs, tensor infos,
 * padding, data), the dequantizers on blocks whose values are worked out here from ggml's
 * formulas, and the tokenizer (lowp/tokenizer.h) on a tiny vocabulary whose merges make
 * each rule of the algorithm visible (merge order, leftmost tie, the pieces' boundaries).
 * The matrix kernels: every ISA's bit for bit equal (one FMA chain per output, gemm.h) and
 * within the binary32 dot-product bound of the exact product. The forward pass on a tiny
 * random model written here: the same bits whatever the chunking of the tokens (the cache
 * hook and positions) and the thread count, and its refusals.
 *
 *   - a file holding every value type, arrays of numbers and strings (one empty), and three
 *     tensors (F32, Q4_1, F32) parses to exactly the values written;
 *   - every proper prefix of it is refused with a one-line reason and leaves the result
 *     empty (the last tensor ends at the last byte, so no prefix is a valid file); under
 *     the sanitizer build this is also the "no read past the end" check;
 *   - one defect at a time (each variant below) is refused with a message naming it;
 *   - the interop test (tests/interop_gguf.py) checks the real model file against PyPI gguf. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "gemm.h"
#include "lowp/attn.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp/format.h"
#include "lowp/gguf.h"
#include "lowp/kv_formats.h"
#include "lowp/llama.h"
#include "lowp/model_eval.h"
#include "lowp/tokenizer.h"
#include "lowp_test.h"

/* ---- a byte builder ---- */
typedef struct buf {
    unsigned char *b;
    size_t n, cap;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2 + 64;
        o->b = realloc(o->b, o->cap);
        ck_assert_ptr_nonnull(o->b);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_u8(buf *o, uint8_t v) { put(o, &v, 1); }
static void put_u32(buf *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(buf *o, uint64_t v) { put(o, &v, 8); }
static void put_str(buf *o, const char *s)
{
    put_u64(o, strlen(s));
    put(o, s, strlen(s));
}
static void put_key(buf *o, const char *k, uint32_t type)
{
    put_str(o, k);
    put_u32(o, type);
}

/* One defect per variant; the defaults make the valid file. */
typedef struct variant {
    const char *label;
    const char *expect; /* a substring of the refusal, or NULL: the file is valid */
    uint32_t version;   /* 0: 3 */
    int dup_key, nested_array, bad_vtype, bad_elem_type;
    int bool_byte;      /* -1: 1 */
    int align_kind;     /* 0: none (default 32), 1: UINT32 align_value, 2: UINT64 32 */
    uint32_t align_value;
    uint64_t kv_count_add, tensor_count_add, array_count_add;
    const char *name_c; /* NULL: "c" */
    uint32_t ndims_b;   /* 0: 1 */
    uint64_t ne0_b;     /* 0: 32 */
    uint64_t ne1_b;     /* 0: none (ndims_b 2 uses it) */
    uint32_t type_b;    /* 0: Q4_1 */
    int64_t off_delta_c; /* added to c's offset */
    int big_endian;
} variant;

static const float a_vals[16] = {0.0f, -0.0f, 1.0f, -2.5f, 3.25f, 1e-30f, -1e30f, 0.125f,
                                 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f};

/* The test file. Tensor data: a F32 [8, 2] (64 B), b Q4_1 [32] (20 B), c F32 [32] (128 B),
 * each at the next multiple of the alignment after the one before; c ends the file. */
static buf build(const variant *v)
{
    buf o = {0};
    put(&o, "GGUF", 4);
    uint32_t ver = v->version ? v->version : 3;
    if (v->big_endian)
        ver = __builtin_bswap32(ver);
    put_u32(&o, ver);
    uint64_t n_kv = 17 + (v->align_kind != 0) + (v->dup_key != 0) + (v->nested_array != 0) +
                    (v->bad_vtype != 0) + v->kv_count_add;
    put_u64(&o, 3 + v->tensor_count_add);
    put_u64(&o, n_kv);
    put_key(&o, "general.architecture", LOWP_GGUF_STRING);
    put_str(&o, "llama");
    put_key(&o, "t.u8", LOWP_GGUF_UINT8); put_u8(&o, 200);
    put_key(&o, "t.i8", LOWP_GGUF_INT8); put_u8(&o, 0x80); /* -128 */
    put_key(&o, "t.u16", LOWP_GGUF_UINT16); { uint16_t x = 65535; put(&o, &x, 2); }
    put_key(&o, "t.i16", LOWP_GGUF_INT16); { int16_t x = -300; put(&o, &x, 2); }
    put_key(&o, "t.u32", LOWP_GGUF_UINT32); put_u32(&o, 4000000000u);
    put_key(&o, "t.i32", LOWP_GGUF_INT32); { int32_t x = -7; put(&o, &x, 4); }
    put_key(&o, "t.f32", LOWP_GGUF_FLOAT32); { float x = 1e-5f; put(&o, &x, 4); }
    put_key(&o, "t.bool", LOWP_GGUF_BOOL); put_u8(&o, (uint8_t)(v->bool_byte < 0 ? 1 : v->bool_byte));
    put_key(&o, "t.u64", LOWP_GGUF_UINT64); put_u64(&o, UINT64_C(18446744073709551615));
    put_key(&o, "t.i64", LOWP_GGUF_INT64); put_u64(&o, (uint64_t)INT64_C(-5));
    put_key(&o, "t.f64", LOWP_GGUF_FLOAT64); { double x = 100000.0; put(&o, &x, 8); }
    put_key(&o, "t.strs", LOWP_GGUF_ARRAY);
    put_u32(&o, v->bad_elem_type ? 13 : LOWP_GGUF_STRING);
    put_u64(&o, 3 + v->array_count_add);
    put_str(&o, "a"); put_str(&o, ""); put_str(&o, "\xc4\xa0the");
    put_key(&o, "t.i32s", LOWP_GGUF_ARRAY); put_u32(&o, LOWP_GGUF_INT32); put_u64(&o, 3);
    { int32_t x[3] = {1, -1, 2147483647}; put(&o, x, sizeof x); }
    put_key(&o, "t.empty", LOWP_GGUF_ARRAY); put_u32(&o, LOWP_GGUF_FLOAT32); put_u64(&o, 0);
    put_key(&o, "t.bools", LOWP_GGUF_ARRAY); put_u32(&o, LOWP_GGUF_BOOL); put_u64(&o, 2);
    put_u8(&o, 0); put_u8(&o, 1);
    put_key(&o, "t.u64s", LOWP_GGUF_ARRAY); put_u32(&o, LOWP_GGUF_UINT64); put_u64(&o, 1);
    put_u64(&o, UINT64_C(1) << 63);
    if (v->dup_key) {
        put_key(&o, "t.u8", LOWP_GGUF_UINT8);
        put_u8(&o, 1);
    }
    if (v->nested_array) {
        put_key(&o, "t.nest", LOWP_GGUF_ARRAY); put_u32(&o, LOWP_GGUF_ARRAY); put_u64(&o, 0);
    }
    if (v->bad_vtype) {
        put_key(&o, "t.bad", 13); put_u8(&o, 0);
    }
    uint64_t align = 32;
    if (v->align_kind == 1) {
        put_key(&o, "general.alignment", LOWP_GGUF_UINT32);
        put_u32(&o, v->align_value);
        if (v->align_value != 0 && (v->align_value & (v->align_value - 1)) == 0)
            align = v->align_value;
    } else if (v->align_kind == 2) {
        put_key(&o, "general.alignment", LOWP_GGUF_UINT64);
        put_u64(&o, 32);
    }
    uint64_t off_a = 0, off_b = (off_a + 64 + align - 1) / align * align;
    uint64_t off_c = (off_b + 20 + align - 1) / align * align;
    put_str(&o, "a"); put_u32(&o, 2); put_u64(&o, 8); put_u64(&o, 2); put_u32(&o, 0); put_u64(&o, off_a);
    put_str(&o, "b");
    put_u32(&o, v->ndims_b ? v->ndims_b : 1);
    put_u64(&o, v->ne0_b ? v->ne0_b : 32);
    if (v->ndims_b >= 2)
        put_u64(&o, v->ne1_b);
    for (uint32_t d = 2; d < v->ndims_b && d < 8; d++)
        put_u64(&o, 1);
    put_u32(&o, v->type_b ? v->type_b : LOWP_GGML_Q4_1);
    put_u64(&o, off_b);
    put_str(&o, v->name_c ? v->name_c : "c");
    put_u32(&o, 1); put_u64(&o, 32); put_u32(&o, 0); put_u64(&o, off_c + (uint64_t)v->off_delta_c);
    while (o.n % align != 0)
        put_u8(&o, 0);
    size_t data = o.n;
    put(&o, a_vals, sizeof a_vals);
    while (o.n < data + off_b)
        put_u8(&o, 0);
    /* b: Q4_1, d = 0.5, m = -1, element j = j & 15 ... */
    put_u8(&o, 0x00); put_u8(&o, 0x38); put_u8(&o, 0x00); put_u8(&o, 0xbc);
    for (int j = 0; j < 16; j++)
        put_u8(&o, (uint8_t)(j | (15 - j) << 4));
    while (o.n < data + off_c)
        put_u8(&o, 0);
    for (int j = 0; j < 32; j++) {
        float x = (float)j * 0.5f;
        put(&o, &x, 4);
    }
    return o;
}

static int one_line(const char *why) { return why[0] != '\0' && strchr(why, '\n') == NULL; }

static void assert_empty(const lowp_gguf *g)
{
    ck_assert_ptr_null(g->kv);
    ck_assert_ptr_null(g->tensors);
    ck_assert_uint_eq(g->n_kv, 0);
    ck_assert_uint_eq(g->n_tensors, 0);
}

START_TEST(valid_file_parses)
{
    variant v = {.bool_byte = -1};
    buf f = build(&v);
    lowp_gguf g;
    char why[256] = "";
    ck_assert_msg(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.alignment, 32);
    ck_assert_uint_eq(g.n_kv, 17);
    ck_assert_uint_eq(g.n_tensors, 3);
    ck_assert_uint_eq(g.data_offset % 32, 0);
    ck_assert_uint_eq(g.data_offset + 96 + 128, f.n);
    lowp_gguf_str s;
    ck_assert_int_eq(lowp_gguf_get_string(&g, "general.architecture", &s, why, sizeof why), 0);
    ck_assert(lowp_gguf_str_eq(s, "llama"));
    uint64_t u;
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.u8", &u, why, sizeof why), 0); ck_assert_uint_eq(u, 200);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.u16", &u, why, sizeof why), 0); ck_assert_uint_eq(u, 65535);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.u32", &u, why, sizeof why), 0); ck_assert_uint_eq(u, 4000000000u);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.u64", &u, why, sizeof why), 0);
    ck_assert_uint_eq(u, UINT64_C(18446744073709551615));
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.i8", &u, why, sizeof why), -1); /* -128 */
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.i16", &u, why, sizeof why), -1);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.i64", &u, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "t.i64") != NULL);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.absent", &u, why, sizeof why), -1);
    ck_assert(strstr(why, "no metadata key 't.absent'") != NULL);
    ck_assert_int_eq(lowp_gguf_get_uint(&g, "t.strs", &u, why, sizeof why), -1);
    double d;
    ck_assert_int_eq(lowp_gguf_get_float(&g, "t.f32", &d, why, sizeof why), 0); ck_assert(d == (double)1e-5f);
    ck_assert_int_eq(lowp_gguf_get_float(&g, "t.f64", &d, why, sizeof why), 0); ck_assert(d == 100000.0);
    ck_assert_int_eq(lowp_gguf_get_float(&g, "t.u8", &d, why, sizeof why), -1);
    int b;
    ck_assert_int_eq(lowp_gguf_get_bool(&g, "t.bool", &b, why, sizeof why), 0); ck_assert_int_eq(b, 1);
    const lowp_gguf_kv *kv = lowp_gguf_find(&g, "t.strs");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->count, 3);
    lowp_gguf_str st[3];
    ck_assert_int_eq(lowp_gguf_array_strings(kv, st, why, sizeof why), 0);
    ck_assert(lowp_gguf_str_eq(st[0], "a") && lowp_gguf_str_eq(st[1], "") && lowp_gguf_str_eq(st[2], "\xc4\xa0the"));
    kv = lowp_gguf_find(&g, "t.i32s");
    int64_t x;
    ck_assert_int_eq(lowp_gguf_array_int(kv, 1, &x, why, sizeof why), 0); ck_assert_int_eq(x, -1);
    ck_assert_int_eq(lowp_gguf_array_int(kv, 2, &x, why, sizeof why), 0); ck_assert_int_eq(x, 2147483647);
    ck_assert_int_eq(lowp_gguf_array_int(kv, 3, &x, why, sizeof why), -1);
    ck_assert_int_eq(lowp_gguf_array_strings(kv, st, why, sizeof why), -1);
    kv = lowp_gguf_find(&g, "t.u64s");
    ck_assert_int_eq(lowp_gguf_array_int(kv, 0, &x, why, sizeof why), -1); /* 2^63 */
    kv = lowp_gguf_find(&g, "t.empty");
    ck_assert(kv != NULL && kv->count == 0 && kv->elem_type == LOWP_GGUF_FLOAT32);
    kv = lowp_gguf_find(&g, "t.bools");
    ck_assert(kv != NULL && kv->count == 2 && kv->value[1] == 1);
    const lowp_gguf_tensor *ta = lowp_gguf_find_tensor(&g, "a"), *tb = lowp_gguf_find_tensor(&g, "b"),
                           *tc = lowp_gguf_find_tensor(&g, "c");
    ck_assert(ta && tb && tc && lowp_gguf_find_tensor(&g, "d") == NULL);
    ck_assert(ta->n_dims == 2 && ta->ne[0] == 8 && ta->ne[1] == 2 && ta->ne[2] == 1 && ta->n_elements == 16);
    ck_assert(ta->type == LOWP_GGML_F32 && ta->nbytes == 64 && ta->offset == 0);
    ck_assert(tb->type == LOWP_GGML_Q4_1 && tb->nbytes == 20 && tb->offset == 64);
    ck_assert(tc->nbytes == 128 && tc->offset == 96 && tc->data + 128 == f.b + f.n);
    ck_assert_ptr_eq(ta->data, f.b + g.data_offset);
    float *ya = lowp_gguf_tensor_f32(ta, why, sizeof why), *yb = lowp_gguf_tensor_f32(tb, why, sizeof why);
    ck_assert(ya != NULL && yb != NULL);
    ck_assert(memcmp(ya, a_vals, sizeof a_vals) == 0);
    for (int j = 0; j < 16; j++) {
        ck_assert(yb[j] == (float)j * 0.5f - 1.0f);
        ck_assert(yb[j + 16] == (float)(15 - j) * 0.5f - 1.0f);
    }
    free(ya);
    free(yb);
    lowp_gguf_close(&g);
    assert_empty(&g);
    lowp_gguf_close(&g); /* idempotent */
    free(f.b);
}
END_TEST

/* Every prefix of the valid file is refused cleanly (the suite's "truncated file" proof). */
START_TEST(every_prefix_refused)
{
    variant v = {.bool_byte = -1};
    buf f = build(&v);
    for (size_t n = 0; n < f.n; n++) {
        /* a copy of exactly n bytes, so that the sanitizer sees any read past it */
        unsigned char *p = malloc(n ? n : 1);
        memcpy(p, f.b, n);
        lowp_gguf g;
        char why[256] = "";
        ck_assert_msg(lowp_gguf_parse(p, n, &g, why, sizeof why) == -1, "prefix %zu accepted", n);
        ck_assert_msg(one_line(why), "prefix %zu: no one-line reason", n);
        assert_empty(&g);
        free(p);
    }
    free(f.b);
}
END_TEST

static const variant variants[] = {
    {"version 2", NULL, .version = 2, .bool_byte = -1},
    {"alignment 64", NULL, .align_kind = 1, .align_value = 64, .bool_byte = -1},
    {"alignment 32 given", NULL, .align_kind = 1, .align_value = 32, .bool_byte = -1},
    {"version 1", "version 1", .version = 1, .bool_byte = -1},
    {"version 4", "unsupported GGUF version 4", .version = 4, .bool_byte = -1},
    {"big endian", "big-endian", .big_endian = 1, .bool_byte = -1},
    {"duplicate key", "key 't.u8' appears twice", .dup_key = 1, .bool_byte = -1},
    {"nested array", "arrays of arrays", .nested_array = 1, .bool_byte = -1},
    {"bad value type", "unknown value type 13", .bad_vtype = 1, .bool_byte = -1},
    {"bad element type", "unknown array element type 13", .bad_elem_type = 1, .bool_byte = -1},
    {"bool 2", "BOOL value 2", .bool_byte = 2},
    {"alignment 0", "power of two", .align_kind = 1, .align_value = 0, .bool_byte = -1},
    {"alignment 48", "power of two", .align_kind = 1, .align_value = 48, .bool_byte = -1},
    {"alignment uint64", "power of two", .align_kind = 2, .bool_byte = -1},
    {"kv count huge", "cannot fit", .kv_count_add = UINT64_C(1) << 60, .bool_byte = -1},
    {"kv count one more", "", .kv_count_add = 1, .bool_byte = -1},
    {"tensor count huge", "cannot fit", .tensor_count_add = UINT64_C(1) << 62, .bool_byte = -1},
    {"tensor count one more", "", .tensor_count_add = 1, .bool_byte = -1},
    {"array count huge", "cannot fit", .array_count_add = UINT64_C(1) << 61, .bool_byte = -1},
    {"duplicate name", "tensor name 'a' appears twice", .name_c = "a", .bool_byte = -1},
    {"long name", "at most 63", .name_c = "0123456789012345678901234567890123456789012345678901234567890123",
     .bool_byte = -1},
    {"five dims", "5 dimensions", .ndims_b = 5, .bool_byte = -1},
    {"zero dim", "dimension 1 is 0", .ndims_b = 2, .ne1_b = 0, .bool_byte = -1},
    {"dims overflow", "dimension 1", .ndims_b = 2, .ne0_b = 1ull << 32, .ne1_b = 1ull << 31, .bool_byte = -1},
    {"ne0 not a block", "not a multiple of Q4_1's block of 32", .ne0_b = 48, .bool_byte = -1},
    {"unknown type", "unsupported ggml type 4", .type_b = 4, .bool_byte = -1},
    {"misaligned", "not a multiple of the alignment", .off_delta_c = 4, .bool_byte = -1},
    {"out of bounds", "not within the file", .off_delta_c = 32, .bool_byte = -1},
    {"offset wraps", "not within the file", .off_delta_c = -(int64_t)96 + (int64_t)(UINT64_C(1) << 62),
     .bool_byte = -1},
    {"overlap", "overlap", .off_delta_c = -32, .bool_byte = -1},
    {"rows too large", "not within the file", .ndims_b = 2, .ne1_b = 1000, .bool_byte = -1},
};

START_TEST(variants_refused_or_accepted)
{
    const variant *v = &variants[_i];
    buf f = build(v);
    lowp_gguf g;
    char why[256] = "";
    int rc = lowp_gguf_parse(f.b, f.n, &g, why, sizeof why);
    if (v->expect == NULL) {
        ck_assert_msg(rc == 0, "%s: refused: %s", v->label, why);
        ck_assert_uint_eq(g.data_offset % g.alignment, 0);
        for (uint64_t i = 0; i < g.n_tensors; i++)
            ck_assert_uint_eq(g.tensors[i].offset % g.alignment, 0);
        lowp_gguf_close(&g);
    } else {
        ck_assert_msg(rc == -1, "%s: accepted", v->label);
        ck_assert_msg(one_line(why) && strstr(why, v->expect) != NULL, "%s: message '%s' lacks '%s'", v->label,
                      why, v->expect);
        assert_empty(&g);
    }
    free(f.b);
}
END_TEST

START_TEST(open_errors)
{
    lowp_gguf g;
    char why[512] = "";
    ck_assert_int_eq(lowp_gguf_open("/nonexistent/model.gguf", &g, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "/nonexistent/model.gguf") != NULL);
    ck_assert_int_eq(lowp_gguf_open("/", &g, why, sizeof why), -1);
    ck_assert(strstr(why, "not a regular file") != NULL);
    char path[4096]; /* in $TMPDIR, as every test's temporary files */
    const char *td = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/lowp_test_model.XXXXXX", td != NULL && td[0] != '\0' ? td : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(lowp_gguf_open(path, &g, why, sizeof why), -1);
    ck_assert(strstr(why, "empty") != NULL);
    variant v = {.bool_byte = -1};
    buf f = build(&v);
    ck_assert_int_eq((int)write(fd, f.b, f.n), (int)f.n);
    ck_assert_int_eq(lowp_gguf_open(path, &g, why, sizeof why), 0);
    ck_assert_uint_eq(g.n_tensors, 3);
    ck_assert(g.map != NULL && g.size == f.n && memcmp(g.base, f.b, f.n) == 0);
    lowp_gguf_close(&g);
    ck_assert_int_eq(ftruncate(fd, (off_t)(f.n - 1)), 0);
    ck_assert_int_eq(lowp_gguf_open(path, &g, why, sizeof why), -1);
    ck_assert(strstr(why, path) != NULL && strstr(why, "not within the file") != NULL);
    close(fd);
    unlink(path);
    free(f.b);
}
END_TEST

static void f16_put(unsigned char *p, uint16_t h)
{
    p[0] = (unsigned char)(h & 0xff);
    p[1] = (unsigned char)(h >> 8);
}

/* Blocks with values worked out from ggml's formulas (gguf_quant.c's comment). */
START_TEST(dequantize_blocks)
{
    char why[256];
    float y[64];
    unsigned char q8[34], q40[18], q41[20], f16[8], bf16[4];
    f16_put(q8, 0x3400); /* d = 0.25 */
    for (int j = 0; j < 32; j++)
        q8[2 + j] = (unsigned char)(int8_t)(j * 8 - 128);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_Q8_0, q8, 32, y, why, sizeof why), 0);
    for (int j = 0; j < 32; j++)
        ck_assert(y[j] == (float)(j * 8 - 128) * 0.25f);
    f16_put(q40, 0x0001); /* d = 2^-24, a binary16 subnormal */
    for (int j = 0; j < 16; j++)
        q40[2 + j] = (unsigned char)(j | (15 - j) << 4);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_Q4_0, q40, 32, y, why, sizeof why), 0);
    for (int j = 0; j < 16; j++) {
        ck_assert(y[j] == ldexpf((float)(j - 8), -24));
        ck_assert(y[j + 16] == ldexpf((float)(7 - j), -24));
    }
    /* Q4_1 with m = 2^-24 and d = 1: 15 + 2^-24 rounds to 15 (one binary32 rounding) */
    f16_put(q41, 0x3c00);
    f16_put(q41 + 2, 0x0001);
    for (int j = 0; j < 16; j++)
        q41[4 + j] = (unsigned char)(j | (15 - j) << 4);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_Q4_1, q41, 32, y, why, sizeof why), 0);
    ck_assert(y[0] == 0x1p-24f && y[15] == 15.0f && y[16] == 15.0f && y[31] == 0x1p-24f + 0.0f);
    ck_assert(y[1] == 1.0f); /* 1 + 2^-24 rounds to 1 (tie to even) */
    f16_put(f16, 0x3c00); f16_put(f16 + 2, 0xc000); f16_put(f16 + 4, 0x7bff); f16_put(f16 + 6, 0x8001);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_F16, f16, 4, y, why, sizeof why), 0);
    ck_assert(y[0] == 1.0f && y[1] == -2.0f && y[2] == 65504.0f && y[3] == -0x1p-24f);
    f16_put(bf16, 0x3f80); f16_put(bf16 + 2, 0xc2f7);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_BF16, bf16, 2, y, why, sizeof why), 0);
    ck_assert(y[0] == 1.0f && y[1] == -123.5f);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_Q8_0, q8, 16, y, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "whole Q8_0 blocks") != NULL);
    ck_assert_int_eq(lowp_gguf_dequantize(LOWP_GGML_Q6_K, q8, 256, y, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "Q6_K") != NULL);
    ck_assert_int_eq(lowp_gguf_dequantize(999, q8, 1, y, why, sizeof why), -1);
}
END_TEST


/* ---- the tokenizer on a tiny vocabulary ---- */

/* GPT-2's byte characters, restated from its encoder.py: printable Latin-1 bytes are
 * themselves, the other 68 take U+0100 onward in byte order. Returned as UTF-8. */
static const char *byte_char(int b, char out[3])
{
    static int map[256];
    int next = 256;
    for (int i = 0; i < 256; i++)
        map[i] = ((i >= '!' && i <= '~') || (i >= 0xa1 && i <= 0xac) || i >= 0xae) ? i : next++;
    int c = map[b];
    if (c < 0x80) {
        out[0] = (char)c;
        out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3f));
        out[2] = 0;
    }
    return out;
}

/* Tokens 0..255: the byte characters of bytes 0..255; then the merged tokens. */
static const char *const tiny_merges[] = {"b c", "a b", "a a", "\xc4\xa0 \xc4\xa0", "1 2", "x y", "xy z", "\xc4\xa0 x"};
static const char *const tiny_extra[] = {"bc", "ab", "aa", "\xc4\xa0\xc4\xa0", "12", "xy", "xyz", "\xc4\xa0x"};
enum { T_BC = 256, T_AB, T_AA, T_SP2, T_12, T_XY, T_XYZ, T_SPX };

static buf tiny_vocab(const char *pre)
{
    buf o = {0};
    put(&o, "GGUF", 4);
    put_u32(&o, 3);
    put_u64(&o, 0);
    put_u64(&o, 4);
    put_key(&o, "tokenizer.ggml.model", LOWP_GGUF_STRING);
    put_str(&o, "gpt2");
    put_key(&o, "tokenizer.ggml.pre", LOWP_GGUF_STRING);
    put_str(&o, pre);
    put_key(&o, "tokenizer.ggml.tokens", LOWP_GGUF_ARRAY);
    put_u32(&o, LOWP_GGUF_STRING);
    put_u64(&o, 256 + sizeof tiny_extra / sizeof tiny_extra[0]);
    for (int b = 0; b < 256; b++) {
        char c[3];
        put_str(&o, byte_char(b, c));
    }
    for (size_t i = 0; i < sizeof tiny_extra / sizeof tiny_extra[0]; i++)
        put_str(&o, tiny_extra[i]);
    put_key(&o, "tokenizer.ggml.merges", LOWP_GGUF_ARRAY);
    put_u32(&o, LOWP_GGUF_STRING);
    put_u64(&o, sizeof tiny_merges / sizeof tiny_merges[0]);
    for (size_t i = 0; i < sizeof tiny_merges / sizeof tiny_merges[0]; i++)
        put_str(&o, tiny_merges[i]);
    return o;
}

static void expect_ids(const lowp_tokenizer *t, const char *text, const int32_t *want, size_t n_want)
{
    int32_t *ids;
    size_t n;
    char why[256];
    ck_assert_msg(lowp_tokenize(t, text, strlen(text), &ids, &n, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(n == n_want, "'%s': %zu tokens, expected %zu", text, n, n_want);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ids[i] == want[i], "'%s': token %zu is %d, expected %d", text, i, ids[i], want[i]);
    /* the tokens' texts concatenate to the text */
    char back[256];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        long k = lowp_token_text(t, ids[i], back + m, sizeof back - m);
        ck_assert(k >= 0);
        m += (size_t)k;
    }
    ck_assert(m == strlen(text) && memcmp(back, text, m) == 0);
    free(ids);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

START_TEST(tokenizer_rules)
{
    buf f = tiny_vocab("smollm");
    lowp_gguf g;
    lowp_tokenizer *t;
    char why[256];
    ck_assert(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0);
    ck_assert_msg(lowp_tokenizer_load(&g, &t, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(lowp_tokenizer_vocab_size(t), 264);
    ck_assert_int_eq(lowp_tokenizer_bos(t), -1);
    expect_ids(t, "abc", IDS('a', T_BC));             /* "b c" (rank 0) before "a b" (rank 1) */
    expect_ids(t, "aaa", IDS(T_AA, 'a'));             /* a tie: the leftmost pair first */
    expect_ids(t, "aaaa", IDS(T_AA, T_AA));
    expect_ids(t, "xyz", IDS(T_XYZ));                 /* a merge of a merge */
    expect_ids(t, "12", IDS('1', '2'));               /* smollm: every digit its own piece */
    expect_ids(t, "a  x", IDS('a', ' ', T_SPX));      /* "\s+(?!\S)" leaves the last space */
    expect_ids(t, "a   ", IDS('a', T_SP2, ' '));      /* spaces at the end: one piece */
    expect_ids(t, "ab'sab", IDS(T_AB, '\'', 's', T_AB)); /* "'s" is a piece */
    expect_ids(t, "", NULL, 0);
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(lowp_tokenize(t, "a\xc3", 2, &ids, &n, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "not valid UTF-8 at byte 1") != NULL);
    ck_assert_int_eq(lowp_token_text(t, 264, why, sizeof why), -1);
    lowp_tokenizer_free(t);
    lowp_gguf_close(&g);
    free(f.b);
    f = tiny_vocab("gpt2");
    ck_assert(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0);
    ck_assert(lowp_tokenizer_load(&g, &t, why, sizeof why) == 0);
    expect_ids(t, "12", IDS(T_12));                   /* gpt2: " ?\p{N}+" keeps digits together */
    lowp_tokenizer_free(t);
    lowp_gguf_close(&g);
    free(f.b);
    f = tiny_vocab("llama3");
    ck_assert(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0);
    ck_assert_int_eq(lowp_tokenizer_load(&g, &t, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "pre-tokenizer 'llama3' is not supported") != NULL);
    lowp_gguf_close(&g);
    free(f.b);
}
END_TEST

/* ---- the matrix kernels ---- */

/* |c - exact| <= gamma_K * sum_k |a_k b_k| for every element of C[M][N] = A[M][K] W[N][K]^T,
 * gamma_K = K u / (1 - K u), u = 2^-24: the bound of a chain of K binary32 roundings (an
 * FMA chain rounds once per step; Higham, Accuracy and Stability, 3.1). */
static void assert_product_bound(const float *C, const float *A, const float *W, size_t M, size_t N, size_t K)
{
    double gamma = (double)K * 0x1p-24 / (1.0 - (double)K * 0x1p-24);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double ex = 0, mag = 0;
            for (size_t k = 0; k < K; k++) {
                ex += (double)A[i * K + k] * W[j * K + k];
                mag += fabs((double)A[i * K + k] * W[j * K + k]);
            }
            ck_assert_msg(fabs((double)C[i * N + j] - ex) <= gamma * mag, "element (%zu, %zu) of [%zu, %zu, %zu]", i,
                          j, M, N, K);
        }
}

START_TEST(gemm_isas_agree)
{
    static const size_t shapes[][3] = {{1, 1, 1}, {13, 45, 7}, {8, 32, 64}, {3, 96, 576}, {37, 70, 130}};
    static const char *const names[] = {"avx512", "avx2", "scalar"};
    uint64_t seed = lowp_test_seed("test_model", 21);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        uint64_t st = lowp_test_stream(seed, si, 0, 0);
        float *A = malloc(M * K * sizeof *A), *W = malloc(N * K * sizeof *W);
        float *bp = malloc(lowp_gemm_packed_size(N, K) * sizeof *bp), *C[3], *B = malloc(K * N * sizeof *B);
        for (size_t i = 0; i < M * K; i++)
            A[i] = (float)lowp_test_gauss(&st);
        for (size_t i = 0; i < N * K; i++)
            W[i] = (float)lowp_test_gauss(&st);
        lowp_gemm_pack_nk(N, K, W, K, bp);
        int ran = 0;
        for (int q = 0; q < 3; q++) {
            C[q] = malloc(M * N * sizeof(float));
            const lowp_gemm_isa *isa = lowp_gemm_isa_named(names[q]);
            if (isa == NULL) {
                free(C[q]);
                C[q] = NULL;
                continue;
            }
            lowp_gemm(isa, M, N, K, A, K, bp, C[q], N);
            ran++;
        }
        ck_assert_ptr_nonnull(C[2]); /* scalar always runs */
        for (int q = 0; q < 2; q++)
            if (C[q] != NULL)
                ck_assert_msg(memcmp(C[q], C[2], M * N * sizeof(float)) == 0, "%s differs from scalar, shape %zu",
                              names[q], si);
        assert_product_bound(C[2], A, W, M, N, K);
        /* pack_kn of W^T equals pack_nk of W */
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++)
                B[k * N + j] = W[j * K + k];
        float *bp2 = malloc(lowp_gemm_packed_size(N, K) * sizeof *bp2);
        lowp_gemm_pack_kn(K, N, B, N, bp2);
        ck_assert(memcmp(bp, bp2, lowp_gemm_packed_size(N, K) * sizeof *bp) == 0);
        free(bp2);
        for (int q = 0; q < 3; q++)
            free(C[q]);
        free(A);
        free(W);
        free(B);
        free(bp);
        ck_assert_int_ge(ran, 1);
    }
}
END_TEST

/* The softmax exponentials: every ISA the same bits and the same sum as the scalar
 * definition (gemm.h), within 2 ulp of exp, 0 below -87, NaN kept. */
START_TEST(softmax_exp_agree)
{
    static const char *const names[] = {"avx512", "avx2", "scalar"};
    static const size_t lens[] = {1, 7, 8, 15, 16, 17, 33, 100, 1000, 4099};
    uint64_t seed = lowp_test_seed("test_model", 21);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        uint64_t st = lowp_test_stream(seed, 9, li, 0);
        float *x = malloc(n * sizeof *x), *y[3];
        float mx = -INFINITY;
        for (size_t j = 0; j < n; j++) { /* scores spread over [-100, 10], the row max included */
            x[j] = (float)(lowp_test_urand(&st) * 110.0 - 100.0);
            mx = x[j] > mx ? x[j] : mx;
        }
        if (n == 100) /* one row with a NaN score: NaN comes through, the sum is NaN */
            x[2] = NAN;
        double sum[3];
        for (int q = 0; q < 3; q++) {
            y[q] = malloc(n * sizeof(float));
            memcpy(y[q], x, n * sizeof *x);
            const lowp_gemm_isa *isa = lowp_gemm_isa_named(names[q]);
            sum[q] = isa ? isa->softmax_exp(y[q], n, mx) : 0;
            if (isa == NULL) {
                free(y[q]);
                y[q] = NULL;
            }
        }
        for (int q = 0; q < 2; q++)
            if (y[q] != NULL) {
                ck_assert_msg(memcmp(y[q], y[2], n * sizeof(float)) == 0, "%s exp differs from scalar, n %zu",
                              names[q], n);
                ck_assert_msg(lowp_f64_bits(sum[q]) == lowp_f64_bits(sum[2]), "%s sum differs, n %zu",
                              names[q], n);
            }
        double exact_sum = 0;
        for (size_t j = 0; j < n; j++) {
            float xj = x[j] - mx;
            if (isnan(x[j])) {
                ck_assert(isnan(y[2][j]));
                continue;
            }
            if (xj < -87.0f) {
                ck_assert(y[2][j] == 0.0f);
                continue;
            }
            double e = exp((double)xj);
            exact_sum += (double)y[2][j];
            /* 2 ulp of binary32 at e: 2 * 2^(floor(log2 e) - 23) */
            ck_assert_msg(fabs((double)y[2][j] - e) <= 2.0 * ldexp(1.0, ilogb(e) - 23), "exp(%a) = %a, not %a", xj,
                          y[2][j], e);
        }
        if (n == 100) /* the sum of the returned values, within n roundings of binary64 */
            ck_assert(isnan(sum[2]));
        else
            ck_assert(fabs(sum[2] - exact_sum) <= (double)n * 0x1p-53 * exact_sum);
        for (int q = 0; q < 3; q++)
            free(y[q]);
        free(x);
    }
}
END_TEST

/* ---- a tiny random Llama ---- */

enum { TE = 64, TF = 96, TH = 4, TKV = 2, TV = 40, TL = 2, TCTX = 24 };

typedef struct tiny_opts {
    const char *arch;      /* NULL: llama */
    uint32_t rope_dims;    /* 0: E / H */
    int drop_tensor;       /* 1: no blk.1.ffn_down.weight */
    int wide;              /* 1: E = WE, H = WH, KV heads WKV, context WCTX (head dim 64, what the
                              lowp cache formats and the GPU decode kernel take) */
} tiny_opts;
enum { WE = 192, WH = 3, WKV = 1, WCTX = 80 };

static void put_tensor_info(buf *o, const char *name, uint64_t ne0, uint64_t ne1, uint64_t *off)
{
    put_str(o, name);
    put_u32(o, ne1 > 1 ? 2 : 1);
    put_u64(o, ne0);
    if (ne1 > 1)
        put_u64(o, ne1);
    put_u32(o, LOWP_GGML_F32);
    put_u64(o, *off);
    *off += (ne0 * ne1 * 4 + 31) / 32 * 32;
}

static buf tiny_model(const tiny_opts *opt, uint64_t seed)
{
    const uint32_t E = opt->wide ? WE : TE, H = opt->wide ? WH : TH, KV = opt->wide ? WKV : TKV,
                   CTX = opt->wide ? WCTX : TCTX;
    char names[64][48];
    uint64_t shp[64][2];
    float scl[64];
    int nt = 0;
#define ADD(n0, n1, s, ...) (snprintf(names[nt], 48, __VA_ARGS__), shp[nt][0] = (n0), shp[nt][1] = (n1), scl[nt++] = (s))
    ADD(E, TV, 1.0f, "token_embd.weight");
    for (int l = 0; l < TL; l++) {
        ADD(E, 1, -1.0f, "blk.%d.attn_norm.weight", l);
        ADD(E, E, 0.15f, "blk.%d.attn_q.weight", l);
        ADD(E, KV * E / H, 0.15f, "blk.%d.attn_k.weight", l);
        ADD(E, KV * E / H, 0.15f, "blk.%d.attn_v.weight", l);
        ADD(E, E, 0.15f, "blk.%d.attn_output.weight", l);
        ADD(E, 1, -1.0f, "blk.%d.ffn_norm.weight", l);
        ADD(E, TF, 0.15f, "blk.%d.ffn_gate.weight", l);
        ADD(E, TF, 0.15f, "blk.%d.ffn_up.weight", l);
        if (!(opt->drop_tensor && l == 1))
            ADD(TF, E, 0.12f, "blk.%d.ffn_down.weight", l);
    }
    ADD(E, 1, -1.0f, "output_norm.weight");
#undef ADD
    buf o = {0};
    put(&o, "GGUF", 4);
    put_u32(&o, 3);
    put_u64(&o, (uint64_t)nt);
    put_u64(&o, 10);
    put_key(&o, "general.architecture", LOWP_GGUF_STRING);
    put_str(&o, opt->arch ? opt->arch : "llama");
    static const char *const ukeys[7] = {"llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
                                         "llama.attention.head_count", "llama.attention.head_count_kv",
                                         "llama.context_length", "llama.rope.dimension_count"};
    uint32_t uvals[7] = {TL, E, TF, H, KV, CTX, opt->rope_dims ? opt->rope_dims : E / H};
    for (int i = 0; i < 7; i++) {
        put_key(&o, ukeys[i], LOWP_GGUF_UINT32);
        put_u32(&o, uvals[i]);
    }
    put_key(&o, "llama.attention.layer_norm_rms_epsilon", LOWP_GGUF_FLOAT32);
    { float e = 1e-5f; put(&o, &e, 4); }
    put_key(&o, "llama.rope.freq_base", LOWP_GGUF_FLOAT32);
    { float b = 10000.0f; put(&o, &b, 4); }
    uint64_t off = 0;
    for (int i = 0; i < nt; i++)
        put_tensor_info(&o, names[i], shp[i][0], shp[i][1], &off);
    while (o.n % 32 != 0)
        put_u8(&o, 0);
    uint64_t st = seed;
    for (int i = 0; i < nt; i++) {
        size_t cnt = (size_t)(shp[i][0] * shp[i][1]);
        for (size_t j = 0; j < cnt; j++) {
            float x = scl[i] < 0 ? 1.0f + 0.2f * (float)lowp_test_gauss(&st) : scl[i] * (float)lowp_test_gauss(&st);
            put(&o, &x, 4);
        }
        while (o.n % 32 != 0)
            put_u8(&o, 0);
    }
    return o;
}

static void run_forward(const lowp_llama *m, const int32_t *tok, size_t n, const size_t *chunks, float *hidden)
{
    lowp_kv_store kv;
    char why[256];
    ck_assert(lowp_kv_f32_create(lowp_llama_config_of(m), n, &kv, why, sizeof why) == 0);
    size_t pos = 0;
    for (size_t c = 0; pos < n; c++) {
        size_t len = chunks == NULL ? n : chunks[c];
        ck_assert_msg(lowp_llama_forward(m, &kv, tok + pos, len, pos, hidden + pos * TE, why, sizeof why) == 0, "%s",
                      why);
        pos += len;
    }
    lowp_kv_f32_free(&kv);
}

START_TEST(tiny_forward)
{
    tiny_opts o = {0};
    buf f = tiny_model(&o, lowp_test_stream(lowp_test_seed("test_model", 21), 7, 0, 0));
    lowp_gguf g;
    lowp_llama *m;
    char why[256];
    ck_assert_msg(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_llama_load(&g, &m, why, sizeof why) == 0, "%s", why);
    uint64_t data_offset = g.data_offset;
    lowp_gguf_close(&g); /* the model holds its own copies */
    const lowp_llama_config *c = lowp_llama_config_of(m);
    ck_assert(c->n_layer == TL && c->head_dim == TE / TH && c->n_vocab == TV && c->tied_head == 1);
    enum { N = 19 };
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)((i * 7 + 3) % TV);
    float *ref = malloc(N * TE * sizeof *ref), *got = malloc(N * TE * sizeof *got);
    run_forward(m, tok, N, NULL, ref);
    for (int i = 0; i < N * TE; i++)
        ck_assert(isfinite(ref[i]));
    static const size_t by_one[N] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    static const size_t mixed[] = {5, 1, 8, 2, 3};
    run_forward(m, tok, N, by_one, got);
    ck_assert_msg(memcmp(ref, got, N * TE * sizeof *ref) == 0, "token by token differs from the batch");
    run_forward(m, tok, N, mixed, got);
    ck_assert_msg(memcmp(ref, got, N * TE * sizeof *ref) == 0, "chunks 5,1,8,2,3 differ from the batch");
    int threads = omp_get_max_threads();
    omp_set_num_threads(threads == 1 ? 2 : 1);
    run_forward(m, tok, N, NULL, got);
    omp_set_num_threads(threads);
    ck_assert_msg(memcmp(ref, got, N * TE * sizeof *ref) == 0, "the thread count changed the result");
    /* a later token changes nothing before it (causality) */
    int32_t tok2[N];
    memcpy(tok2, tok, sizeof tok);
    tok2[N - 1] = (tok[N - 1] + 1) % TV;
    run_forward(m, tok2, N, NULL, got);
    ck_assert(memcmp(ref, got, (N - 1) * TE * sizeof *ref) == 0);
    ck_assert(memcmp(ref + (N - 1) * TE, got + (N - 1) * TE, TE * sizeof *ref) != 0);
    float *logits = malloc(N * TV * sizeof *logits);
    lowp_llama_logits(m, ref, N, logits);
    /* the tied head: logit j = hidden . (row j of token_embd, the file's first tensor) */
    assert_product_bound(logits, ref, (const float *)(f.b + data_offset), N, TV, TE);
    lowp_kv_store kv;
    ck_assert(lowp_kv_f32_create(c, TCTX, &kv, why, sizeof why) == 0);
    ck_assert_int_eq(lowp_llama_forward(m, &kv, tok, 6, TCTX - 5, NULL, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "exceed the model's context of 24") != NULL);
    int32_t bad = TV;
    ck_assert_int_eq(lowp_llama_forward(m, &kv, &bad, 1, 0, NULL, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "outside the vocabulary of 40") != NULL);
    lowp_kv_f32_free(&kv);
    ck_assert(lowp_kv_f32_create(c, 4, &kv, why, sizeof why) == 0);
    ck_assert_int_eq(lowp_llama_forward(m, &kv, tok, 5, 0, NULL, why, sizeof why), -1);
    ck_assert(one_line(why) && strstr(why, "past the cache's 4") != NULL);
    lowp_kv_f32_free(&kv);
    free(logits);
    free(ref);
    free(got);
    lowp_llama_free(m);
    free(f.b);
}
END_TEST

START_TEST(tiny_refusals)
{
    static const struct { tiny_opts o; const char *expect; } cases[] = {
        {{"gpt2", 0, 0, 0}, "architecture 'gpt2' is not supported"},
        {{NULL, 8, 0, 0}, "partial RoPE (8 of 16 dimensions)"},
        {{NULL, 0, 1, 0}, "no tensor 'blk.1.ffn_down.weight'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        buf f = tiny_model(&cases[i].o, 1);
        lowp_gguf g;
        lowp_llama *m = (lowp_llama *)&g;
        char why[256] = "";
        ck_assert(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0);
        ck_assert_int_eq(lowp_llama_load(&g, &m, why, sizeof why), -1);
        ck_assert_ptr_null(m);
        ck_assert_msg(one_line(why) && strstr(why, cases[i].expect) != NULL, "'%s' lacks '%s'", why, cases[i].expect);
        lowp_gguf_close(&g);
        free(f.b);
    }
}
END_TEST

/* A store around the exact one that checks what the forward pass hands it: the calls come
 * layer by layer with the positions of the chunk, k at position 0 equals k_pre (RoPE at
 * angle 0 is the identity), and a refusal stops the pass with the store's reason. */
typedef struct spy_store {
    lowp_kv_store inner;
    size_t writes, reads, next_layer, pos0, n, fail_layer;
} spy_store;

static int spy_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                     const float *v, char *why, size_t why_len)
{
    spy_store *s = ctx;
    ck_assert_uint_eq(layer, s->next_layer);
    ck_assert(pos0 == s->pos0 && n == s->n);
    if (pos0 == 0)
        ck_assert(memcmp(k_pre, k, TKV * (TE / TH) * sizeof *k) == 0);
    else
        ck_assert(memcmp(k_pre, k, TKV * (TE / TH) * sizeof *k) != 0);
    s->writes++;
    if (layer == s->fail_layer) {
        snprintf(why, why_len, "spy store refuses layer %zu", layer);
        return -1;
    }
    return s->inner.write(s->inner.ctx, layer, pos0, n, k_pre, k, v, why, why_len);
}

static int spy_read(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                    size_t why_len)
{
    spy_store *s = ctx;
    ck_assert(layer == s->next_layer && n == s->pos0 + s->n);
    s->reads++;
    s->next_layer = (layer + 1) % TL;
    return s->inner.read(s->inner.ctx, layer, n, k, v, ld, why, why_len);
}

START_TEST(kv_store_hook)
{
    tiny_opts o = {0};
    buf f = tiny_model(&o, 5);
    lowp_gguf g;
    lowp_llama *m;
    char why[256];
    ck_assert(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0);
    ck_assert(lowp_llama_load(&g, &m, why, sizeof why) == 0);
    spy_store s = {.fail_layer = 99};
    ck_assert(lowp_kv_f32_create(lowp_llama_config_of(m), TCTX, &s.inner, why, sizeof why) == 0);
    lowp_kv_store st = {&s, spy_write, spy_read, NULL};
    int32_t tok[6] = {1, 2, 3, 4, 5, 6};
    s.n = 4;
    ck_assert(lowp_llama_forward(m, &st, tok, 4, 0, NULL, why, sizeof why) == 0);
    s.pos0 = 4;
    s.n = 2;
    ck_assert(lowp_llama_forward(m, &st, tok + 4, 2, 4, NULL, why, sizeof why) == 0);
    ck_assert(s.writes == 2 * TL && s.reads == 2 * TL);
    s.pos0 = 6;
    s.n = 1;
    s.fail_layer = 1;
    ck_assert_int_eq(lowp_llama_forward(m, &st, tok, 1, 6, NULL, why, sizeof why), -1);
    ck_assert_str_eq(why, "spy store refuses layer 1");
    lowp_kv_f32_free(&s.inner);
    lowp_llama_free(m);
    lowp_gguf_close(&g);
    free(f.b);
}
END_TEST

/* ---- the K/V cache in lowp's formats (lowp/kv_formats.h) ---- */

static lowp_llama *wide_model(uint64_t seed)
{
    tiny_opts o = {0};
    o.wide = 1;
    buf f = tiny_model(&o, seed);
    lowp_gguf g;
    lowp_llama *m;
    char why[256];
    ck_assert_msg(lowp_gguf_parse(f.b, f.n, &g, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_llama_load(&g, &m, why, sizeof why) == 0, "%s", why);
    lowp_gguf_close(&g);
    free(f.b);
    return m;
}

/* The exact store fed K and V rounded to BF16 by lowp's codec (cuda, RN): what a BF16
 * cache must be, computed without the cache layer. */
typedef struct round_store {
    lowp_kv_store inner;
    lowp_codec bf;
    float *k, *v;
} round_store;

static int round_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                       const float *v, char *why, size_t why_len)
{
    round_store *s = ctx;
    for (size_t i = 0; i < n * WKV * 64; i++) {
        s->k[i] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&s->bf, k[i]));
        s->v[i] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&s->bf, v[i]));
    }
    return s->inner.write(s->inner.ctx, layer, pos0, n, k_pre, s->k, s->v, why, why_len);
}

static int round_read(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                      size_t why_len)
{
    round_store *s = ctx;
    return s->inner.read(s->inner.ctx, layer, n, k, v, ld, why, why_len);
}

static lowp_kv_format *make_format(const lowp_llama *m, const char *name, lowp_kv_attn_mode attn, int stats)
{
    lowp_kv_format_spec sp = {{0}, NULL, NULL, attn, stats, 0};
    lowp_kv_format *f;
    char why[256];
    ck_assert_msg(lowp_kv_choice_parse(name, &sp.choice, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_kv_format_create(lowp_llama_config_of(m), WCTX, &sp, &f, why, sizeof why) == 0, "%s", why);
    return f;
}

/* A BF16 cache and the exact store fed BF16-rounded K/V give the same bits; the exact
 * store fed the unrounded K/V does not (the format is not ignored). Layer 0's decoded K
 * (its input does not depend on the cache) is the codec's rounding of the recorded K. */
START_TEST(kv_bf16_is_the_codec)
{
    lowp_llama *m = wide_model(lowp_test_stream(lowp_test_seed("test_model", 21), 8, 0, 0));
    const lowp_llama_config *c = lowp_llama_config_of(m);
    enum { N = 40 };
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)((i * 11 + 5) % TV);
    char why[256];
    float *h_round = malloc(N * WE * sizeof(float)), *h_fmt = malloc(N * WE * sizeof(float)),
          *h_f32 = malloc(N * WE * sizeof(float));
    round_store rs = {.k = malloc(N * 64 * sizeof(float)), .v = malloc(N * 64 * sizeof(float))};
    ck_assert(lowp_codec_init(&rs.bf, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, 0, why, sizeof why) == 0);
    ck_assert(lowp_kv_f32_create(c, WCTX, &rs.inner, why, sizeof why) == 0);
    lowp_kv_store st = {&rs, round_write, round_read, NULL};
    ck_assert_msg(lowp_llama_forward(m, &st, tok, N, 0, h_round, why, sizeof why) == 0, "%s", why);
    lowp_kv_format *f = make_format(m, "bf16", LOWP_KV_ATTN_EXACT, 1);
    st = lowp_kv_format_store(f);
    ck_assert_msg(lowp_llama_forward(m, &st, tok, 25, 0, h_fmt, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(lowp_llama_forward(m, &st, tok + 25, N - 25, 25, h_fmt + 25 * WE, why, sizeof why) == 0, "%s",
                  why);
    ck_assert(memcmp(h_round, h_fmt, N * WE * sizeof(float)) == 0);
    lowp_kv_store ex;
    ck_assert(lowp_kv_f32_create(c, WCTX, &ex, why, sizeof why) == 0);
    ck_assert(lowp_llama_forward(m, &ex, tok, N, 0, h_f32, why, sizeof why) == 0);
    ck_assert(memcmp(h_round, h_f32, N * WE * sizeof(float)) != 0);
    lowp_kv_record *r;
    ck_assert(lowp_kv_record_create(c, WCTX, 1, &r, why, sizeof why) == 0);
    lowp_kv_store rst = lowp_kv_record_store(r);
    float *h_rec = malloc(N * WE * sizeof(float));
    ck_assert(lowp_llama_forward(m, &rst, tok, N, 0, h_rec, why, sizeof why) == 0);
    ck_assert(memcmp(h_rec, h_f32, N * WE * sizeof(float)) == 0); /* the recording store is the exact one */
    const float *k0 = lowp_kv_record_get(r, LOWP_KV_REC_K, 0), *d0 = lowp_kv_format_decoded(f, LOWP_KV_K, 0);
    size_t changed = 0;
    for (size_t i = 0; i < N * 64; i++) {
        float want = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&rs.bf, k0[i]));
        ck_assert_msg(d0[i] == want, "decoded K[%zu] = %a, the codec gives %a", i, (double)d0[i], (double)want);
        changed += d0[i] != k0[i];
    }
    ck_assert(changed > N * 64 / 2);
    /* statistics: BF16 RN is within 2^-9 relative per element, so the relative RMS too */
    for (size_t l = 0; l < TL; l++) {
        lowp_kv_err ek = lowp_kv_format_err(f, LOWP_KV_ERR_K, l, 0), ea = lowp_kv_format_err(f, LOWP_KV_ERR_ATTN, l, 0);
        ck_assert_uint_eq(ek.n, N * 64);
        ck_assert(ek.err2 > 0 && sqrt(ek.err2 / ek.ref2) <= 0x1p-9 && ek.amax > 0);
        ck_assert(ea.n == N * 64 && ea.err2 > 0);
    }
    ck_assert(lowp_kv_record_get(r, LOWP_KV_REC_K_PRE, 0)[5] == k0[5]); /* position 0: RoPE is the identity */
    ck_assert(lowp_kv_format_err(f, LOWP_KV_ERR_K, 0, 0).clipped == 0); /* BF16 holds any binary32 magnitude */
    /* fp8 at a global scale of 2^-10 holds |x| <= 448 / 1024: clipped counts layer 0's K above it */
    float gk[TL], gv[TL];
    for (int l = 0; l < TL; l++)
        gk[l] = gv[l] = 0x1p-10f;
    lowp_kv_format_spec sp8 = {{0}, gk, gv, LOWP_KV_ATTN_EXACT, 1, 0};
    ck_assert(lowp_kv_choice_parse("fp8_e4m3:tensor", &sp8.choice, why, sizeof why) == 0);
    lowp_kv_format *f8;
    ck_assert(lowp_kv_format_create(c, WCTX, &sp8, &f8, why, sizeof why) == 0);
    st = lowp_kv_format_store(f8);
    ck_assert(lowp_llama_forward(m, &st, tok, N, 0, NULL, why, sizeof why) == 0);
    size_t above = 0;
    for (size_t i = 0; i < N * 64; i++)
        above += fabsf(k0[i]) > 448.0f / 1024.0f;
    ck_assert(above > 0 && lowp_kv_format_err(f8, LOWP_KV_ERR_K, 0, 0).clipped == above);
    lowp_kv_format_free(f8);
    lowp_kv_record_free(r);
    lowp_kv_f32_free(&ex);
    lowp_kv_f32_free(&rs.inner);
    lowp_kv_format_free(f);
    free(rs.k);
    free(rs.v);
    free(h_round);
    free(h_fmt);
    free(h_f32);
    free(h_rec);
    lowp_llama_free(m);
}
END_TEST

/* What the format store's attend hook received and returned for one layer. */
typedef struct attend_spy {
    lowp_kv_store inner;
    size_t layer, pos0, n;
    float *q, *out; /* [n][WE] */
    float *k, *v;   /* NULL, or [WCTX][WKV * 64]: layer's K/V as written, by position */
} attend_spy;

static int spy_fwd_write(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                         const float *v, char *why, size_t why_len)
{
    attend_spy *s = ctx;
    if (s->k != NULL && layer == s->layer) {
        memcpy(s->k + pos0 * WKV * 64, k, n * WKV * 64 * sizeof(float));
        memcpy(s->v + pos0 * WKV * 64, v, n * WKV * 64 * sizeof(float));
    }
    return s->inner.write(s->inner.ctx, layer, pos0, n, k_pre, k, v, why, why_len);
}

static int spy_attend(void *ctx, const lowp_llama *m, size_t layer, size_t pos0, size_t n, const float *q,
                      size_t ldq, float *out, char *why, size_t why_len)
{
    attend_spy *s = ctx;
    int rc = s->inner.attend(s->inner.ctx, m, layer, pos0, n, q, ldq, out, why, why_len);
    if (layer == s->layer) {
        s->pos0 = pos0;
        s->n = n;
        size_t at = s->k != NULL ? pos0 : 0; /* with k: every call kept, by position */
        for (size_t i = 0; i < n; i++) {
            memcpy(s->q + (at + i) * WE, q + i * ldq, WE * sizeof(float));
            memcpy(s->out + (at + i) * WE, out + i * WE, WE * sizeof(float));
        }
    }
    return rc;
}

/* The emulated decode of every query row equals, bit for bit, the emulator run on that
 * row alone as one sequence of its length (its own page table and split length), and lies
 * within the derived bound of binary64 attention over the decoded cache:
 *   the kernel rounds q to BF16 (each score moves by at most ds = 2^-8 sm |q||k|_1 per
 *   key, counting q's and the product's rounding), so each weight moves by a factor in
 *   [e^-2ds, e^2ds]; P is rounded to BF16 (2^-8 relative, with the sum's rounding) and the
 *   output to BF16 (2^-8 relative): |o - o_ref| <= (e^(2 ds) - 1 + 2^-7) max|v| + 2^-8 |o_ref|. */
START_TEST(kv_emul_is_the_kernel)
{
    lowp_llama *m = wide_model(lowp_test_stream(lowp_test_seed("test_model", 21), 9, 0, 0));
    static const char *const fmts[] = {"nvfp4:1.0", "mxfp4", "fp8_e4m3:1.0", "bf16"};
    enum { N = 70, N0 = 45 };
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)((i * 13 + 2) % TV);
    char why[256];
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        lowp_kv_format *f = make_format(m, fmts[fi], LOWP_KV_ATTN_EMUL, 0);
        attend_spy s = {.inner = lowp_kv_format_store(f), .layer = 1, .q = malloc(N * WE * sizeof(float)),
                        .out = malloc(N * WE * sizeof(float))};
        lowp_kv_store st = {&s, spy_fwd_write, NULL, spy_attend};
        ck_assert_msg(lowp_llama_forward(m, &st, tok, N0, 0, NULL, why, sizeof why) == 0, "%s", why);
        ck_assert_msg(lowp_llama_forward(m, &st, tok + N0, N - N0, N0, NULL, why, sizeof why) == 0, "%s", why);
        ck_assert(s.pos0 == N0 && s.n == N - N0);
        const lowp_kvcache *cache = lowp_kv_format_cache(f, 1);
        lowp_kv_view view = lowp_kvcache_view(cache);
        double *kd = malloc(N * 64 * sizeof(double)), *vd = malloc(N * 64 * sizeof(double));
        for (size_t p = 0; p < N; p++)
            ck_assert(lowp_kvcache_read(cache, &view, p / LOWP_KV_FORMAT_PAGE, p % LOWP_KV_FORMAT_PAGE, kd + p * 64,
                                        vd + p * 64, why, sizeof why) == 0);
        double vmax = 0;
        for (size_t i = 0; i < N * 64; i++)
            vmax = fabs(vd[i]) > vmax ? fabs(vd[i]) : vmax;
        for (size_t i = 0; i < s.n; i++) {
            size_t len = N0 + i + 1, np = (len + LOWP_KV_FORMAT_PAGE - 1) / LOWP_KV_FORMAT_PAGE;
            int32_t indptr[2] = {0, (int32_t)np}, idx[WCTX], last = (int32_t)(len - (np - 1) * LOWP_KV_FORMAT_PAGE);
            for (size_t p = 0; p < np; p++)
                idx[p] = (int32_t)p;
            lowp_kv_page_table pt = {1, indptr, idx, &last};
            uint16_t qb[WE], ob[WE];
            for (size_t j = 0; j < WE; j++)
                qb[j] = lowp_bf16_from_f32(s.q[i * WE + j]);
            lowp_gpu_decode_args a = {.cache = cache, .view = &view, .pt = &pt, .num_q_heads = WH, .q = qb};
            ck_assert_msg(lowp_gpu_decode_emulate(&a, ob, why, sizeof why) == 0, "%s", why);
            double qd[WE], od[WE];
            for (size_t j = 0; j < WE; j++) {
                ck_assert_msg(lowp_bf16_from_f32(s.out[i * WE + j]) == ob[j], "%s row %zu dim %zu", fmts[fi], i, j);
                qd[j] = s.q[i * WE + j];
            }
            lowp_attn_shape sh = {1, WH, WKV, 64, 64, len, len - 1, 0.125};
            ck_assert(lowp_attn_ref_f64(&sh, qd, kd, vd, od, NULL, why, sizeof why) == 0);
            for (size_t h = 0; h < WH; h++) {
                double ds = 0;
                for (size_t p = 0; p < len; p++) {
                    double dot = 0;
                    for (size_t d = 0; d < 64; d++)
                        dot += fabs(qd[h * 64 + d] * kd[p * 64 + d]);
                    ds = fmax(ds, 0x1p-8 * 0.125 * dot);
                }
                for (size_t d = 0; d < 64; d++) {
                    double o = od[h * 64 + d], bound = (expm1(2 * ds) + 0x1p-7) * vmax + 0x1p-8 * fabs(o);
                    ck_assert_msg(fabs(s.out[i * WE + h * 64 + d] - o) <= bound, "%s row %zu head %zu: %g vs %g (bound %g)",
                                  fmts[fi], i, h, (double)s.out[i * WE + h * 64 + d], o, bound);
                }
            }
        }
        free(kd);
        free(vd);
        free(s.q);
        free(s.out);
        lowp_kv_format_free(f);
    }
    /* the kernel has no mxfp8: refused, one line */
    lowp_kv_format_spec sp = {{0}, NULL, NULL, LOWP_KV_ATTN_EMUL, 0, 0};
    lowp_kv_format *f = NULL;
    ck_assert(lowp_kv_choice_parse("mxfp8", &sp.choice, why, sizeof why) == 0);
    ck_assert_int_eq(lowp_kv_format_create(lowp_llama_config_of(m), WCTX, &sp, &f, why, sizeof why), -1);
    ck_assert(f == NULL && one_line(why));
    lowp_llama_free(m);
}
END_TEST

/* Mean next-token NLL of tok[1 .. n) from the hidden rows (binary64 log-softmax). */
static double tiny_nll(const lowp_llama *m, const float *hidden, const int32_t *tok, size_t n)
{
    float z[TV];
    double sum = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        lowp_llama_logits(m, hidden + i * WE, 1, z);
        double mx = z[0], se = 0;
        for (size_t j = 1; j < TV; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (size_t j = 0; j < TV; j++)
            se += exp(z[j] - mx);
        sum += mx + log(se) - z[tok[i + 1]];
    }
    return sum / (double)(n - 1);
}

/* SGLang's prefill and extend data paths in the model's cache (lowp/kv_formats.h), on
 * layer 1 of the wide model (its K/V depend on layer 0's attention, so on the path):
 *   - prefill's effective K/V are lowp_kv_path_run(PREFILL)'s for the K/V written, and
 *     torch_e4m3(RN_bf16(x)) by lowp's codecs without the path code;
 *   - extend's prefix values are that cast of the cache's exact decode (fp32 (e sf) g is
 *     exact in binary32 at g = 1, so the decoded cache is the workspace's fp32 input);
 *   - every query row of extend:1 and extend:3 (two forward calls, the second starting
 *     inside a chunk) equals lowp_llama_attention of that row alone over prefix values
 *     before its chunk's start and chunk values from it, q rounded to BF16: a chunk
 *     boundary one position off changes which rule a key follows and fails here;
 *   - extend:C with C >= the window gives prefill's hidden states bit for bit;
 *   - the perplexity moves away from the binary32 cache's by a finite amount;
 *   - extend on a cache that is not NVFP4, chunk 0 or past the capacity: refused. */
START_TEST(kv_sglang_paths)
{
    lowp_llama *m = wide_model(lowp_test_stream(lowp_test_seed("test_model", 21), 10, 0, 0));
    const lowp_llama_config *c = lowp_llama_config_of(m);
    enum { N = 40, N0 = 22, KW = WKV * 64 };
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)((i * 7 + 3) % TV);
    char why[256];
    lowp_codec bf, e4;
    ck_assert(lowp_codec_init(&bf, LOWP_BF16, LOWP_PROFILE_CUDA, LOWP_RN, 0, why, sizeof why) == 0);
    ck_assert(lowp_codec_init(&e4, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, why, sizeof why) == 0);
#define WS(x) lowp_decode_f32(LOWP_E4M3, lowp_encode_f32(&e4, lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&bf, (x)))))
    static const struct { const char *name; lowp_kv_attn_mode a; size_t chunk; } modes[] = {
        {"prefill", LOWP_KV_ATTN_PREFILL, 0}, {"extend:40", LOWP_KV_ATTN_EXTEND, N},
        {"extend:1", LOWP_KV_ATTN_EXTEND, 1}, {"extend:3", LOWP_KV_ATTN_EXTEND, 3}};
    float *hid[4], *href = malloc(N * WE * sizeof(float));
    lowp_kv_store ex;
    ck_assert(lowp_kv_f32_create(c, WCTX, &ex, why, sizeof why) == 0);
    ck_assert_msg(lowp_llama_forward(m, &ex, tok, N, 0, href, why, sizeof why) == 0, "%s", why);
    double nll_ref = tiny_nll(m, href, tok, N);
    for (size_t mi = 0; mi < 4; mi++) {
        lowp_kv_attn_mode pa;
        size_t pc;
        ck_assert(lowp_kv_attn_mode_parse(modes[mi].name, &pa, &pc) == 0 && pa == modes[mi].a);
        lowp_kv_format_spec sp = {{0}, NULL, NULL, modes[mi].a, 0, modes[mi].chunk};
        ck_assert(pa != LOWP_KV_ATTN_EXTEND || pc == modes[mi].chunk);
        ck_assert(lowp_kv_choice_parse("nvfp4:1.0", &sp.choice, why, sizeof why) == 0);
        lowp_kv_format *f;
        ck_assert_msg(lowp_kv_format_create(c, WCTX, &sp, &f, why, sizeof why) == 0, "%s", why);
        attend_spy s = {.inner = lowp_kv_format_store(f), .layer = 1, .q = malloc(N * WE * sizeof(float)),
                        .out = malloc(N * WE * sizeof(float)), .k = malloc(N * KW * sizeof(float)),
                        .v = malloc(N * KW * sizeof(float))};
        lowp_kv_store st = {&s, spy_fwd_write, NULL, spy_attend};
        hid[mi] = malloc(N * WE * sizeof(float));
        ck_assert_msg(lowp_llama_forward(m, &st, tok, N0, 0, hid[mi], why, sizeof why) == 0, "%s", why);
        ck_assert_msg(lowp_llama_forward(m, &st, tok + N0, N - N0, N0, hid[mi] + N0 * WE, why, sizeof why) == 0,
                      "%s", why);
        const float *kf = lowp_kv_format_path_rows(f, LOWP_KV_K, 1, 0), *vf = lowp_kv_format_path_rows(f, LOWP_KV_V, 1, 0);
        const float *kp = lowp_kv_format_path_rows(f, LOWP_KV_K, 1, 1), *vp = lowp_kv_format_path_rows(f, LOWP_KV_V, 1, 1);
        const float *kd = lowp_kv_format_decoded(f, LOWP_KV_K, 1), *vd = lowp_kv_format_decoded(f, LOWP_KV_V, 1);
        ck_assert(kf != NULL && vf != NULL && (kp != NULL) == (modes[mi].a == LOWP_KV_ATTN_EXTEND));
        /* the chunk rule: lowp_kv_path_run(PREFILL) of the same K/V, and the codecs' cast */
        lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 1, 1, WKV, 64, 64);
        cfg.recipe = sp.choice.recipe;
        lowp_kv_path_args a = lowp_kv_path_args_init(LOWP_KV_PATH_PREFILL, &cfg, N, 0, 0, NULL, s.k, s.v);
        double *pk = malloc(N * KW * sizeof(double)), *pv = malloc(N * KW * sizeof(double));
        ck_assert_msg(lowp_kv_path_run(&a, 1, NULL, pk, pv, NULL, NULL, NULL, why, sizeof why) == 0, "%s", why);
        for (size_t i = 0; i < N * KW; i++) {
            ck_assert_msg(memcmp(&kf[i], &(float){(float)pk[i]}, 4) == 0 && memcmp(&vf[i], &(float){(float)pv[i]}, 4) == 0,
                          "%s element %zu: %g vs path %g", modes[mi].name, i, (double)kf[i], pk[i]);
            ck_assert(kf[i] == WS(s.k[i]) && vf[i] == WS(s.v[i]));
            /* the prefix rule on the cache's bytes */
            ck_assert(kp == NULL || (kp[i] == WS(kd[i]) && vp[i] == WS(vd[i])));
        }
        free(pk);
        free(pv);
        /* every query row alone over the rule its chunk gives each key */
        size_t C = modes[mi].a == LOWP_KV_ATTN_EXTEND ? modes[mi].chunk : N;
        float *K = malloc(N * KW * sizeof(float)), *V = malloc(N * KW * sizeof(float)), qb[WE], ob[WE];
        for (size_t i = 0; i < N; i++) {
            size_t start = i / C * C;
            for (size_t t = 0; t <= i; t++)
                for (size_t d = 0; d < KW; d++) {
                    K[t * KW + d] = t < start ? kp[t * KW + d] : kf[t * KW + d];
                    V[t * KW + d] = t < start ? vp[t * KW + d] : vf[t * KW + d];
                }
            for (size_t j = 0; j < WE; j++)
                qb[j] = lowp_f32_from_bf16(lowp_bf16_from_f32(s.q[i * WE + j]));
            ck_assert(lowp_llama_attention(m, qb, WE, 1, i, K, V, KW, ob, why, sizeof why) == 0);
            ck_assert_msg(memcmp(ob, s.out + i * WE, sizeof ob) == 0, "%s: query %zu (chunk from %zu) differs",
                          modes[mi].name, i, start);
        }
        double nll = tiny_nll(m, hid[mi], tok, N);
        ck_assert_msg(isfinite(nll) && nll != nll_ref, "%s: nll %g, binary32 cache %g", modes[mi].name, nll, nll_ref);
        free(K);
        free(V);
        free(s.q);
        free(s.out);
        free(s.k);
        free(s.v);
        lowp_kv_format_free(f);
    }
#undef WS
    ck_assert_msg(memcmp(hid[0], hid[1], N * WE * sizeof(float)) == 0, "extend:%d is not prefill", N);
    ck_assert_msg(memcmp(hid[0], hid[2], N * WE * sizeof(float)) != 0, "extend:1 is prefill (the prefix unread)");
    for (size_t mi = 0; mi < 4; mi++)
        free(hid[mi]);
    /* refusals: one line each */
    static const struct { const char *fmt; size_t chunk; } bad[] = {{"mxfp4", 4}, {"fp8_e4m3:1.0", 4},
                                                                    {"nvfp4:1.0", 0}, {"nvfp4:1.0", WCTX + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lowp_kv_format_spec sp = {{0}, NULL, NULL, LOWP_KV_ATTN_EXTEND, 0, bad[i].chunk};
        ck_assert(lowp_kv_choice_parse(bad[i].fmt, &sp.choice, why, sizeof why) == 0);
        lowp_kv_format *f = NULL;
        why[0] = '\0';
        ck_assert_int_eq(lowp_kv_format_create(c, WCTX, &sp, &f, why, sizeof why), -1);
        ck_assert(f == NULL && one_line(why));
    }
    static const char *const bad_modes[] = {"extend", "extend:", "extend:0", "extend:-1", "extend:4x", "prefill:2"};
    for (size_t i = 0; i < sizeof bad_modes / sizeof bad_modes[0]; i++) {
        lowp_kv_attn_mode pa;
        size_t pc;
        ck_assert_msg(lowp_kv_attn_mode_parse(bad_modes[i], &pa, &pc) == -1, "'%s' accepted", bad_modes[i]);
    }
    lowp_kv_f32_free(&ex);
    free(href);
    lowp_llama_free(m);
}
END_TEST

START_TEST(kv_choice_names)
{
    static const struct {
        const char *in, *name;
        lowp_block_format f;
        int calibrated;
        lowp_kv_scale_gran gran;
    } ok[] = {
        {"bf16", "bf16", LOWP_BF16_PASS, 0, LOWP_KV_SCALE_TENSOR},
        {"nvfp4", "nvfp4:1.0", LOWP_NVFP4, 0, LOWP_KV_SCALE_TENSOR},
        {"nvfp4:tensor", "nvfp4:tensor", LOWP_NVFP4, 1, LOWP_KV_SCALE_TENSOR},
        {"nvfp4:head:exact", "nvfp4:head:exact", LOWP_NVFP4, 1, LOWP_KV_SCALE_HEAD},
        {"fp8_e4m3", "fp8_e4m3:tensor", LOWP_FP8_E4M3, 1, LOWP_KV_SCALE_TENSOR},
        {"fp8_e4m3:1.0", "fp8_e4m3:1.0", LOWP_FP8_E4M3, 0, LOWP_KV_SCALE_TENSOR},
        {"mxfp4:rceil", "mxfp4:rceil", LOWP_MXFP4, 0, LOWP_KV_SCALE_TENSOR},
        {"mxfp8", "mxfp8", LOWP_MXFP8, 0, LOWP_KV_SCALE_TENSOR},
    };
    char why[256];
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        lowp_kv_choice ch;
        ck_assert_msg(lowp_kv_choice_parse(ok[i].in, &ch, why, sizeof why) == 0, "%s: %s", ok[i].in, why);
        ck_assert_str_eq(ch.name, ok[i].name);
        ck_assert(ch.format == ok[i].f && ch.calibrated == ok[i].calibrated && ch.gran == ok[i].gran);
        lowp_kv_choice again;
        ck_assert(lowp_kv_choice_parse(ch.name, &again, why, sizeof why) == 0 && strcmp(again.name, ch.name) == 0);
    }
    static const char *const bad[] = {"fp4", "", "mxfp4:head", "bf16:1.0", "nvfp4:ocp", "nvfp4:1.0:head",
                                      "nvfp4:exact:trtllm", "nvfp4:2.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lowp_kv_choice ch;
        why[0] = '\0';
        ck_assert_msg(lowp_kv_choice_parse(bad[i], &ch, why, sizeof why) == -1, "%s accepted", bad[i]);
        ck_assert(one_line(why));
    }
}
END_TEST

/* The metrics on logits worked out by hand, and the bootstrap on columns whose every
 * resample is known. */
START_TEST(eval_metrics_by_hand)
{
    const float l2 = (float)log(2.0), l3 = (float)log(3.0);
    float a[3] = {0.0f, 0.0f, l2}; /* p = 1/4, 1/4, 1/2 */
    lowp_eval_token t = lowp_eval_token_stats(a, a, 3, 2);
    ck_assert(t.kl == 0.0 && t.top1 == 1 && t.nll == t.nll_ref);
    ck_assert(fabs(t.nll - log(2.0)) < 1e-7); /* l2 is log 2 rounded to binary32 */
    float r[2] = {0.0f, 0.0f}, q[2] = {0.0f, l3}; /* p_ref = 1/2, 1/2; p = 1/4, 3/4 */
    t = lowp_eval_token_stats(r, q, 2, 0);
    double kl = 0.5 * log(0.5 / 0.25) + 0.5 * log(0.5 / 0.75);
    ck_assert_msg(fabs(t.kl - kl) < 1e-7, "KL %.17g, by hand %.17g", t.kl, kl);
    ck_assert(fabs(t.nll - log(4.0)) < 1e-7 && fabs(t.nll_ref - log(2.0)) < 1e-12);
    ck_assert(t.top1 == 0); /* argmax r is 0 (a tie: the first index), argmax q is 1 */
    q[0] = 2.0f; /* argmax q is 0 now, as r's */
    ck_assert(lowp_eval_token_stats(r, q, 2, 0).top1 == 1);
    float q2[2] = {0.0f, 1.0f};
    ck_assert(lowp_eval_token_stats(a, a, 3, 0).top1 == 1 && lowp_eval_token_stats(r, q2, 2, 0).top1 == 0);
    int32_t g1[5] = {1, 2, 3, 4, 5}, g2[5] = {1, 2, 9, 4, 5};
    ck_assert(lowp_eval_agree_len(g1, g2, 5) == 2 && lowp_eval_agree_len(g1, g1, 5) == 5);
    /* equal distributions everywhere: KL 0, agreement 1, ppl = ppl_ref, every interval a point */
    lowp_eval_token tk[10];
    for (int i = 0; i < 10; i++)
        tk[i] = (lowp_eval_token){1.0, 1.0, 0.0, 1};
    lowp_eval_ci ci[LOWP_EVAL_STAT_COUNT];
    char why[256];
    ck_assert(lowp_eval_bootstrap(tk, 10, 3, 200, 7, ci, why, sizeof why) == 0);
    ck_assert(ci[LOWP_EVAL_MEAN_KL].est == 0 && ci[LOWP_EVAL_MEAN_KL].hi == 0);
    ck_assert(ci[LOWP_EVAL_TOP1_AGREE].lo == 1 && ci[LOWP_EVAL_TOP1_AGREE].hi == 1);
    ck_assert(ci[LOWP_EVAL_DPPL].est == 0 && ci[LOWP_EVAL_DPPL].lo == 0 && ci[LOWP_EVAL_DPPL].hi == 0);
    ck_assert(fabs(ci[LOWP_EVAL_PPL].est - exp(1.0)) < 1e-15);
    /* blocks of 5 tokens that are all 0 or all 1 in the top-1 column: every replicate of
     * 2 blocks has mean 0, 1/2 or 1, each interval end is one of them and the estimate 1/2 */
    for (int i = 0; i < 10; i++)
        tk[i].top1 = i < 5;
    ck_assert(lowp_eval_bootstrap(tk, 10, 5, 400, 11, ci, why, sizeof why) == 0);
    lowp_eval_ci c1 = ci[LOWP_EVAL_TOP1_AGREE];
    ck_assert(c1.est == 0.5 && c1.lo == 0.0 && c1.hi == 1.0); /* P(0) = P(1) = 1/4: both ends reached */
    /* tokens in blocks of one instead: 10 independent draws, mean never exactly 0 or 1 in
     * 400 replicates with overwhelming probability (2 * 400 / 1024 ... ) is not assumed;
     * the interval must be inside [0, 1] and narrower than the blocked one */
    ck_assert(lowp_eval_bootstrap(tk, 10, 1, 400, 11, ci, why, sizeof why) == 0);
    ck_assert(ci[LOWP_EVAL_TOP1_AGREE].hi - ci[LOWP_EVAL_TOP1_AGREE].lo < 1.0);
    /* the same seed, the same interval; reps 0: the estimate alone */
    lowp_eval_ci again[LOWP_EVAL_STAT_COUNT];
    ck_assert(lowp_eval_bootstrap(tk, 10, 1, 400, 11, again, why, sizeof why) == 0);
    ck_assert(memcmp(ci, again, sizeof ci) == 0);
    ck_assert(lowp_eval_bootstrap(tk, 10, 1, 0, 11, again, why, sizeof why) == 0);
    ck_assert(again[LOWP_EVAL_TOP1_AGREE].lo == 0.5 && again[LOWP_EVAL_TOP1_AGREE].hi == 0.5);
    ck_assert(lowp_eval_bootstrap(tk, 0, 1, 10, 11, again, why, sizeof why) == -1 && one_line(why));
    double x[4] = {2, 2, 2, 2};
    lowp_eval_ci mc;
    ck_assert(lowp_eval_bootstrap_mean(x, 4, 100, 3, &mc, why, sizeof why) == 0);
    ck_assert(mc.est == 2 && mc.lo == 2 && mc.hi == 2);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("reader");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, valid_file_parses);
    tcase_add_test(tc, every_prefix_refused);
    tcase_add_loop_test(tc, variants_refused_or_accepted, 0, (int)(sizeof variants / sizeof variants[0]));
    tcase_add_test(tc, open_errors);
    tcase_add_test(tc, dequantize_blocks);
    suite_add_tcase(s, tc);
    tc = tcase_create("tokenizer");
    tcase_add_test(tc, tokenizer_rules);
    suite_add_tcase(s, tc);
    tc = tcase_create("forward");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gemm_isas_agree);
    tcase_add_test(tc, softmax_exp_agree);
    tcase_add_test(tc, tiny_forward);
    tcase_add_test(tc, tiny_refusals);
    tcase_add_test(tc, kv_store_hook);
    suite_add_tcase(s, tc);
    tc = tcase_create("kv_formats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kv_bf16_is_the_codec);
    tcase_add_test(tc, kv_emul_is_the_kernel);
    tcase_add_test(tc, kv_sglang_paths);
    tcase_add_test(tc, kv_choice_names);
    tcase_add_test(tc, eval_metrics_by_hand);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    (void)lowp_test_tier("test_model", argc, argv);
    printf("test_model: GGUF reader, dequantizers and tokenizer on files built here\n");
    return lowp_test_main(suite(), LOWP_TEST_FORK);
}
