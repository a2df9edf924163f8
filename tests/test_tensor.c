/* tests/test_tensor.c: unit tests of lowp/tensor.h (.npy and .safetensors) and of the block
 * quantizer's round trip through tensor files.
 *
 * Expected file bytes are written out here from the format definitions (NumPy's format.py
 * and the safetensors spec/crate: header layout, padding, data order), never produced by
 * lowp. Every malformed file is built here, one defect each, and must give -1 with a
 * one-line message naming the defect. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lowp/block.h"
#include "lowp/format.h"
#include "lowp/tensor.h"
#include "lowp_test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double rng_normal(uint64_t *s) /* Box-Muller; only needs to be deterministic */
{
    double u1 = ((double)(rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static char tmpdir[256];

static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR"); /* POSIX's default when unset: /tmp */
    snprintf(tmpdir, sizeof tmpdir, "%s/lowp_test_tensor.XXXXXX",
             base != NULL && *base != '\0' ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL)
        abort();
}

static void remove_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

static void fill_bytes(lowp_tensor *t, uint64_t seed)
{
    for (size_t i = 0; i < t->nbytes; i++)
        t->data[i] = (unsigned char)rng_next(&seed);
}

/* The one-line error discipline: a non-empty message without newlines. */
static void check_message(const char *why, const char *want, const char *label)
{
    ck_assert_msg(why[0] != '\0', "%s: empty message", label);
    ck_assert_msg(strchr(why, '\n') == NULL, "%s: message has a newline: %s", label, why);
    ck_assert_msg(strstr(why, want) != NULL, "%s: message '%s' does not mention '%s'", label, why, want);
}

/* ---------------------------------------------------------------------------------- */
/* dtypes and shapes                                                                    */

START_TEST(dtype_names_sizes_and_safetensors_order)
{
    /* the safetensors crate's Dtype order, which its writer sorts by */
    static const struct {
        const char *name;
        size_t size;
    } want[LOWP_DTYPE_COUNT] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
        {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},
    };
    for (int i = 0; i < LOWP_DTYPE_COUNT; i++) {
        ck_assert_str_eq(lowp_dtype_name((lowp_dtype)i), want[i].name);
        ck_assert_uint_eq(lowp_dtype_size((lowp_dtype)i), want[i].size);
        lowp_dtype dt;
        ck_assert_int_eq(lowp_dtype_parse(want[i].name, &dt), 0);
        ck_assert_int_eq(dt, i);
    }
    lowp_dtype dt;
    ck_assert_int_eq(lowp_dtype_parse("F4", &dt), -1);
    ck_assert_int_eq(lowp_dtype_parse("f32", &dt), -1);
}
END_TEST

/* The two spellings of a shape, and truncation to the buffer. */
START_TEST(shape_text_json_and_tuple)
{
    static const size_t sh[3] = {2, 3, 40};
    static const struct {
        int ndim;
        lowp_shape_style style;
        const char *want;
    } t[] = {
        {0, LOWP_SHAPE_JSON, "[]"},    {1, LOWP_SHAPE_JSON, "[2]"},
        {3, LOWP_SHAPE_JSON, "[2, 3, 40]"},
        {0, LOWP_SHAPE_TUPLE, "()"},   {1, LOWP_SHAPE_TUPLE, "(2,)"},
        {2, LOWP_SHAPE_TUPLE, "(2, 3)"},
    };
    char buf[32];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        lowp_shape_text(buf, sizeof buf, t[i].ndim, sh, t[i].style);
        ck_assert_str_eq(buf, t[i].want);
    }
    lowp_shape_text(buf, 6, 3, sh, LOWP_SHAPE_JSON); /* "[2, 3, 40]" cut to 5 bytes */
    ck_assert_str_eq(buf, "[2, 3");
}
END_TEST

START_TEST(shape_product_overflow_is_refused)
{
    size_t count, nbytes;
    size_t big[2] = {(SIZE_MAX >> 1) + 1, 2};
    ck_assert_int_eq(lowp_shape_size(2, big, 1, &count, &nbytes), -1);
    size_t fits[2] = {SIZE_MAX >> 2, 2}; /* count fits, count * 4 does not */
    ck_assert_int_eq(lowp_shape_size(2, fits, 1, &count, &nbytes), 0);
    ck_assert_int_eq(lowp_shape_size(2, fits, 4, &count, &nbytes), -1);
    size_t zero[3] = {SIZE_MAX, 0, SIZE_MAX}; /* the running product never overflows */
    ck_assert_int_eq(lowp_shape_size(3, zero, 8, &count, &nbytes), 0);
    ck_assert_uint_eq(count, 0);
    size_t late_zero[3] = {SIZE_MAX, 2, 0}; /* the running product overflows before the 0 */
    ck_assert_int_eq(lowp_shape_size(3, late_zero, 1, &count, &nbytes), -1);
    size_t ok[3] = {2, 0, SIZE_MAX};
    ck_assert_int_eq(lowp_shape_size(3, ok, 8, &count, &nbytes), 0);
    ck_assert_uint_eq(count, 0);
    ck_assert_int_eq(lowp_shape_size(9, ok, 1, &count, &nbytes), -1);
    ck_assert_int_eq(lowp_shape_size(0, NULL, 4, &count, &nbytes), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_uint_eq(nbytes, 4);

    lowp_tensor t;
    char why[256] = "";
    ck_assert_int_eq(lowp_tensor_alloc(&t, "x", LOWP_DT_F64, 2, fits, why, sizeof why), -1);
    check_message(why, "overflow", "alloc");
    ck_assert_ptr_null(t.data);
    lowp_tensor_free(&t);
}
END_TEST

START_TEST(tensor_file_names_and_metadata)
{
    lowp_tensor_file f;
    char why[256] = "";
    size_t sh[1] = {3};
    lowp_tensor_file_init(&f);
    ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, "a", LOWP_DT_F32, 1, sh, why, sizeof why));
    ck_assert_ptr_null(lowp_tensor_file_add(&f, "a", LOWP_DT_U8, 1, sh, why, sizeof why));
    check_message(why, "already", "duplicate add");
    ck_assert_int_eq(lowp_tensor_file_set_meta(&f, "k", "1", why, sizeof why), 0);
    ck_assert_int_eq(lowp_tensor_file_set_meta(&f, "k", "2", why, sizeof why), 0);
    ck_assert_uint_eq(f.n_meta, 1);
    ck_assert_str_eq(lowp_tensor_file_meta(&f, "k"), "2");
    ck_assert_ptr_null(lowp_tensor_file_meta(&f, "missing"));
    ck_assert_ptr_nonnull(lowp_tensor_file_find(&f, "a"));
    lowp_tensor_file_free(&f);
    ck_assert_uint_eq(f.n_tensors, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* exact bytes                                                                          */

/* np.save(np.array([1.0, 2.0], np.float32)): magic, version 1.0, header length 118
 * (0x76), the dict with sorted keys, 20 growth spaces + 40 alignment spaces, '\n'
 * (10 + 118 = 128, a multiple of 64), then 1.0f and 2.0f little-endian. */
static const unsigned char npy_f32_2[] =
    "\x93NUMPY\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
    "          " "          " "          " "          " "          " "          " /* 60 spaces */
    "\n"
    "\x00\x00\x80\x3f\x00\x00\x00\x40";

/* np.save(np.array([[1, 2, 3], [4, 5, 6]], np.int16)): 'shape': (2, 3), the same 60
 * spaces (the growth padding depends on the first dimension only). */
static const unsigned char npy_i16_2x3[] =
    "\x93NUMPY\x01\x00\x76\x00"
    "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }"
    "          " "          " "          " "          " "          " "        " /* 58 spaces */
    "\n"
    "\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00";

/* safetensors of {"a": U8 [1, 2], "b": F32 [1.0]} with metadata {"k": "v"}: length 136,
 * "__metadata__" first, F32 before U8 (larger dtype first), 5 spaces of padding to a
 * multiple of 8, then b's 4 bytes and a's 2 bytes. */
static const unsigned char st_small[] =
    "\x88\x00\x00\x00\x00\x00\x00\x00"
    "{\"__metadata__\":{\"k\":\"v\"},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
    "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}"
    "     "
    "\x00\x00\x80\x3f\x01\x02";

START_TEST(npy_exact_bytes_written_and_read)
{
    char why[256] = "";
    lowp_tensor t;
    size_t sh[2] = {2, 3};
    unsigned char *buf;
    size_t len;

    ck_assert_int_eq(lowp_tensor_alloc(&t, "", LOWP_DT_F32, 1, sh, why, sizeof why), 0);
    float v[2] = {1.0f, 2.0f};
    memcpy(t.data, v, sizeof v);
    ck_assert_int_eq(lowp_npy_serialize(&t, &buf, &len, why, sizeof why), 0);
    ck_assert_uint_eq(len, sizeof npy_f32_2 - 1);
    ck_assert_mem_eq(buf, npy_f32_2, len);
    free(buf);
    lowp_tensor_free(&t);

    ck_assert_int_eq(lowp_tensor_alloc(&t, "", LOWP_DT_I16, 2, sh, why, sizeof why), 0);
    for (int i = 0; i < 6; i++) {
        int16_t x = (int16_t)(i + 1);
        memcpy(t.data + 2 * i, &x, 2);
    }
    ck_assert_int_eq(lowp_npy_serialize(&t, &buf, &len, why, sizeof why), 0);
    ck_assert_uint_eq(len, sizeof npy_i16_2x3 - 1);
    ck_assert_mem_eq(buf, npy_i16_2x3, len);
    free(buf);
    lowp_tensor_free(&t);

    ck_assert_int_eq(lowp_npy_parse(npy_i16_2x3, sizeof npy_i16_2x3 - 1, &t, why, sizeof why), 0);
    ck_assert_int_eq(t.dtype, LOWP_DT_I16);
    ck_assert_int_eq(t.ndim, 2);
    ck_assert_uint_eq(t.shape[0], 2);
    ck_assert_uint_eq(t.shape[1], 3);
    ck_assert_str_eq(t.name, "");
    ck_assert_mem_eq(t.data, npy_i16_2x3 + 128, 12);
    lowp_tensor_free(&t);
}
END_TEST

START_TEST(npy_other_header_spellings_are_read)
{
    /* What other writers produce: double quotes, other key order, no trailing comma,
     * version 2.0 and 3.0, a Python 2 long, a scalar, an empty array. */
    static const struct {
        unsigned major;
        const char *dict;
        int ndim;
        size_t d0, d1;
        lowp_dtype dt;
    } cases[] = {
        {1, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}", 1, 2, 0, LOWP_DT_F32},
        {1, "{'shape': (1, 2), 'fortran_order': False, 'descr': '|u1'}\n", 2, 1, 2, LOWP_DT_U8},
        {2, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, 1, 0, LOWP_DT_F64},
        {3, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 1), }", 2, 2, 1, LOWP_DT_F16},
        {1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1L, 2L), }", 2, 1, 2, LOWP_DT_U16},
        {1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 0, 0, 0, LOWP_DT_I64},
        {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 5), }", 2, 0, 5, LOWP_DT_I32},
        {1, "{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", 1, 2, 0, LOWP_DT_U8},
        {1, "{'descr':'|b1','fortran_order':False,'shape':(2,),}", 1, 2, 0, LOWP_DT_BOOL},
    };
    for (size_t c = 0; c < N_ELEMS(cases); c++) {
        unsigned char buf[512];
        size_t dl = strlen(cases[c].dict), pre = cases[c].major == 1 ? 10 : 12;
        memcpy(buf, "\x93NUMPY", 6);
        buf[6] = (unsigned char)cases[c].major;
        buf[7] = 0;
        buf[8] = (unsigned char)dl;
        buf[9] = 0;
        buf[10] = buf[11] = 0;
        memcpy(buf + pre, cases[c].dict, dl);
        size_t count = cases[c].ndim == 0 ? 1 : cases[c].ndim == 1 ? cases[c].d0 : cases[c].d0 * cases[c].d1;
        size_t nbytes = count * lowp_dtype_size(cases[c].dt);
        memset(buf + pre + dl, 0x5a, nbytes);
        lowp_tensor t;
        char why[256] = "";
        int rc = lowp_npy_parse(buf, pre + dl + nbytes, &t, why, sizeof why);
        ck_assert_msg(rc == 0, "case %zu: %s", c, why);
        ck_assert_int_eq(t.dtype, cases[c].dt);
        ck_assert_int_eq(t.ndim, cases[c].ndim);
        ck_assert_uint_eq(t.count, count);
        lowp_tensor_free(&t);
    }
}
END_TEST

START_TEST(safetensors_exact_bytes_written_and_read)
{
    char why[256] = "";
    lowp_tensor_file f;
    lowp_tensor_file_init(&f);
    size_t sh[1] = {2};
    lowp_tensor *a = lowp_tensor_file_add(&f, "a", LOWP_DT_U8, 1, sh, why, sizeof why);
    ck_assert_ptr_nonnull(a);
    a->data[0] = 1;
    a->data[1] = 2;
    sh[0] = 1;
    lowp_tensor *b = lowp_tensor_file_add(&f, "b", LOWP_DT_F32, 1, sh, why, sizeof why);
    ck_assert_ptr_nonnull(b);
    float one = 1.0f;
    memcpy(b->data, &one, 4);
    ck_assert_int_eq(lowp_tensor_file_set_meta(&f, "k", "v", why, sizeof why), 0);
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why), 0);
    ck_assert_uint_eq(len, sizeof st_small - 1);
    ck_assert_mem_eq(buf, st_small, len);
    free(buf);
    lowp_tensor_file_free(&f);

    ck_assert_int_eq(lowp_safetensors_parse(st_small, sizeof st_small - 1, &f, why, sizeof why), 0);
    ck_assert_uint_eq(f.n_tensors, 2);
    ck_assert_str_eq(f.tensors[0].name, "b"); /* header order */
    ck_assert_int_eq(f.tensors[0].dtype, LOWP_DT_F32);
    ck_assert_mem_eq(f.tensors[0].data, "\x00\x00\x80\x3f", 4);
    ck_assert_str_eq(f.tensors[1].name, "a");
    ck_assert_mem_eq(f.tensors[1].data, "\x01\x02", 2);
    ck_assert_str_eq(lowp_tensor_file_meta(&f, "k"), "v");
    lowp_tensor_file_free(&f);
}
END_TEST

START_TEST(safetensors_json_escapes_both_ways)
{
    /* serde_json's escapes: \" \\ \n as short forms, other controls \u00xx lowercase,
     * non-ASCII raw. Reading accepts every RFC 8259 escape, surrogate pairs included. */
    char why[256] = "";
    lowp_tensor_file f;
    lowp_tensor_file_init(&f);
    ck_assert_int_eq(lowp_tensor_file_set_meta(&f, "q\"\\\n\x01", "\xc3\xa9\t", why, sizeof why), 0);
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why), 0);
    static const char want[] = "{\"__metadata__\":{\"q\\\"\\\\\\n\\u0001\":\"\xc3\xa9\\t\"}}";
    ck_assert_uint_eq(sizeof want - 1, 41);
    ck_assert_uint_eq(len, 8 + 48); /* 41 bytes of JSON + 7 spaces */
    ck_assert_mem_eq(buf, "\x30\0\0\0\0\0\0\0", 8);
    ck_assert_mem_eq(buf + 8, want, sizeof want - 1);
    ck_assert_mem_eq(buf + 8 + 41, "       ", 7);
    lowp_tensor_file_free(&f);
    ck_assert_int_eq(lowp_safetensors_parse(buf, len, &f, why, sizeof why), 0);
    ck_assert_str_eq(f.meta[0].key, "q\"\\\n\x01");
    free(buf);
    lowp_tensor_file_free(&f);

    static const char hdr[] = "{\"__metadata__\":{\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\r\":\"\\u20AC\"}}";
    unsigned char file[128];
    size_t n = sizeof hdr - 1;
    memset(file, 0, 8);
    file[0] = (unsigned char)n;
    memcpy(file + 8, hdr, n);
    ck_assert_int_eq(lowp_safetensors_parse(file, 8 + n, &f, why, sizeof why), 0);
    ck_assert_str_eq(f.meta[0].key, "\xc3\xa9\xf0\x9f\x98\x80/\b\f\r");
    ck_assert_str_eq(f.meta[0].value, "\xe2\x82\xac");
    lowp_tensor_file_free(&f);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* round trips                                                                          */

static lowp_dtype npy_read_back_dtype(lowp_dtype dt)
{
    switch (dt) {
    case LOWP_DT_BF16: return LOWP_DT_U16; /* written as '<u2' */
    case LOWP_DT_F8_E4M3: case LOWP_DT_F8_E5M2: case LOWP_DT_F8_E8M0: return LOWP_DT_U8; /* '|u1' */
    default: return dt;
    }
}

static void assert_same_tensor(const lowp_tensor *a, const lowp_tensor *b, lowp_dtype want_dt)
{
    ck_assert_int_eq(b->dtype, want_dt);
    ck_assert_int_eq(a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
        ck_assert_uint_eq(a->shape[d], b->shape[d]);
    ck_assert_uint_eq(a->nbytes, b->nbytes);
    if (a->nbytes)
        ck_assert_mem_eq(a->data, b->data, a->nbytes);
}

START_TEST(round_trip_every_dtype_both_formats)
{
    make_tmpdir();
    static const size_t shapes[][4] = {{2, 3, 5, 0}, {7, 0, 0, 0}, {0, 0, 0, 0}, {4, 0, 3, 0}};
    static const int ndims[] = {3, 1, 0, 3};
    char why[512] = "";
    for (int dt = 0; dt < LOWP_DTYPE_COUNT; dt++) {
        for (size_t s = 0; s < N_ELEMS(ndims); s++) {
            lowp_tensor t, back;
            ck_assert_int_eq(lowp_tensor_alloc(&t, "", (lowp_dtype)dt, ndims[s], shapes[s], why, sizeof why), 0);
            fill_bytes(&t, (uint64_t)(dt * 16 + (int)s));
            /* .npy in memory */
            unsigned char *buf;
            size_t len;
            ck_assert_int_eq(lowp_npy_serialize(&t, &buf, &len, why, sizeof why), 0);
            ck_assert_uint_eq((len - t.nbytes) % 64, 0); /* numpy's alignment */
            ck_assert_int_eq(lowp_npy_parse(buf, len, &back, why, sizeof why), 0);
            assert_same_tensor(&t, &back, npy_read_back_dtype((lowp_dtype)dt));
            free(buf);
            lowp_tensor_free(&back);
            /* .npy and .safetensors on disk */
            lowp_tensor_file f, g;
            lowp_tensor_file_init(&f);
            lowp_tensor *ft = lowp_tensor_file_add(&f, "", (lowp_dtype)dt, ndims[s], shapes[s], why, sizeof why);
            ck_assert_ptr_nonnull(ft);
            memcpy(ft->data, t.data, t.nbytes);
            char path[400];
            snprintf(path, sizeof path, "%s/t.npy", tmpdir);
            ck_assert_msg(lowp_tensor_file_write(path, &f, why, sizeof why) == 0, "%s", why);
            ck_assert_msg(lowp_tensor_file_read(path, &g, why, sizeof why) == 0, "%s", why);
            ck_assert_uint_eq(g.n_tensors, 1);
            assert_same_tensor(&t, &g.tensors[0], npy_read_back_dtype((lowp_dtype)dt));
            lowp_tensor_file_free(&g);
            /* several tensors of mixed dtypes, names and metadata in one safetensors file */
            size_t one = 3;
            lowp_tensor *pad = lowp_tensor_file_add(&f, "pad", LOWP_DT_U8, 1, &one, why, sizeof why);
            ck_assert_ptr_nonnull(pad);
            memcpy(pad->data, "xyz", 3);
            ck_assert_int_eq(lowp_tensor_file_set_meta(&f, "dtype", lowp_dtype_name((lowp_dtype)dt), why, sizeof why), 0);
            snprintf(path, sizeof path, "%s/t.safetensors", tmpdir);
            ck_assert_msg(lowp_tensor_file_write(path, &f, why, sizeof why) == 0, "%s", why);
            ck_assert_msg(lowp_tensor_file_read(path, &g, why, sizeof why) == 0, "%s", why);
            ck_assert_uint_eq(g.n_tensors, 2);
            const lowp_tensor *gt = lowp_tensor_file_find(&g, "");
            ck_assert_ptr_nonnull(gt);
            assert_same_tensor(&t, gt, (lowp_dtype)dt);
            gt = lowp_tensor_file_find(&g, "pad");
            ck_assert_ptr_nonnull(gt);
            ck_assert_mem_eq(gt->data, "xyz", 3);
            ck_assert_str_eq(lowp_tensor_file_meta(&g, "dtype"), lowp_dtype_name((lowp_dtype)dt));
            lowp_tensor_file_free(&g);
            lowp_tensor_file_free(&f);
            lowp_tensor_free(&t);
        }
    }
    remove_tmpdir();
}
END_TEST

START_TEST(safetensors_data_is_aligned_and_ordered)
{
    /* dtype descending then name: every tensor starts at a multiple of its element size */
    char why[256] = "";
    lowp_tensor_file f, g;
    lowp_tensor_file_init(&f);
    size_t sh[1] = {3};
    const lowp_dtype order[] = {LOWP_DT_U8, LOWP_DT_F64, LOWP_DT_BF16, LOWP_DT_F32, LOWP_DT_I8, LOWP_DT_I64};
    const char *names[] = {"u8", "f64", "bf16", "f32", "i8", "i64"};
    for (size_t i = 0; i < N_ELEMS(order); i++)
        ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, names[i], order[i], 1, sh, why, sizeof why));
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why), 0);
    size_t hl = 0;
    memcpy(&hl, buf, 8);
    ck_assert_uint_eq(hl % 8, 0);
    /* expected order: I64 (enum after F64), F64, F32, BF16, I8, U8 */
    const char *want = "\"i64\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
                       "\"f64\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[24,48]},"
                       "\"f32\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[48,60]},"
                       "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[60,66]},"
                       "\"i8\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[66,69]},"
                       "\"u8\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[69,72]}}";
    ck_assert_mem_eq(buf + 9, want, strlen(want));
    ck_assert_int_eq(lowp_safetensors_parse(buf, len, &g, why, sizeof why), 0);
    ck_assert_str_eq(g.tensors[0].name, "i64");
    free(buf);
    lowp_tensor_file_free(&f);
    lowp_tensor_file_free(&g);
}
END_TEST

START_TEST(writer_refusals)
{
    char why[256] = "";
    lowp_tensor_file f;
    lowp_tensor_file_init(&f);
    size_t sh[1] = {1};
    ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, "__metadata__", LOWP_DT_U8, 1, sh, why, sizeof why));
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why), -1);
    check_message(why, "__metadata__", "reserved name");
    lowp_tensor_file_free(&f);

    ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, "bad\xff", LOWP_DT_U8, 1, sh, why, sizeof why));
    ck_assert_int_eq(lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why), -1);
    check_message(why, "UTF-8", "non-UTF-8 name");
    lowp_tensor_file_free(&f);

    make_tmpdir();
    char path[400];
    ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, "a", LOWP_DT_U8, 1, sh, why, sizeof why));
    ck_assert_ptr_nonnull(lowp_tensor_file_add(&f, "b", LOWP_DT_U8, 1, sh, why, sizeof why));
    snprintf(path, sizeof path, "%s/two.npy", tmpdir);
    ck_assert_int_eq(lowp_tensor_file_write(path, &f, why, sizeof why), -1);
    check_message(why, "one array", "npy of two tensors");
    ck_assert_int_eq(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/t.bin", tmpdir);
    ck_assert_int_eq(lowp_tensor_file_write(path, &f, why, sizeof why), -1);
    check_message(why, "file type", "unknown extension");
    snprintf(path, sizeof path, "%s/no/such/dir/t.safetensors", tmpdir);
    ck_assert_int_eq(lowp_tensor_file_write(path, &f, why, sizeof why), -1);
    check_message(why, "cannot write", "missing directory");
    /* nothing but the directory itself is left */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    lowp_tensor_file_free(&f);
    remove_tmpdir();
}
END_TEST

START_TEST(float_loader_converts_exactly)
{
    make_tmpdir();
    char why[512] = "", path[400];
    lowp_tensor_file f;
    lowp_tensor_file_init(&f);
    size_t sh[1] = {6};
    /* f16 bits: 1.0, -2.0, smallest subnormal 2^-24, 65504, -Inf, NaN */
    static const uint16_t h[6] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0xfc00, 0x7e00};
    static const float hv[5] = {1.0f, -2.0f, 0x1p-24f, 65504.0f, -INFINITY};
    lowp_tensor *t = lowp_tensor_file_add(&f, "h", LOWP_DT_F16, 1, sh, why, sizeof why);
    memcpy(t->data, h, sizeof h);
    /* bf16 bits: 1.0, -0.0, 2^-133 (subnormal), 3.3895e38 (max), +Inf, 1.5 */
    static const uint16_t b[6] = {0x3f80, 0x8000, 0x0001, 0x7f7f, 0x7f80, 0x3fc0};
    t = lowp_tensor_file_add(&f, "b", LOWP_DT_BF16, 1, sh, why, sizeof why);
    memcpy(t->data, b, sizeof b);
    /* f64: exact, rounded, overflowing to Inf, NaN */
    static const double d[6] = {0.5, 0.1, 1e300, NAN, -3.0, 0x1.000001p0};
    t = lowp_tensor_file_add(&f, "d", LOWP_DT_F64, 1, sh, why, sizeof why);
    memcpy(t->data, d, sizeof d);
    t = lowp_tensor_file_add(&f, "i", LOWP_DT_I32, 1, sh, why, sizeof why);
    snprintf(path, sizeof path, "%s/f.safetensors", tmpdir);
    ck_assert_int_eq(lowp_tensor_file_write(path, &f, why, sizeof why), 0);

    lowp_tensor x;
    lowp_dtype src;
    size_t rounded;
    ck_assert_int_eq(lowp_tensor_load_float(path, "h", &x, &src, &rounded, why, sizeof why), 0);
    ck_assert_int_eq(src, LOWP_DT_F16);
    const float *xv = (const float *)(const void *)x.data;
    for (int i = 0; i < 5; i++)
        ck_assert_msg(memcmp(&xv[i], &hv[i], 4) == 0, "f16 %d: %a", i, (double)xv[i]);
    ck_assert(isnan(xv[5]));
    ck_assert_uint_eq(rounded, 0);
    lowp_tensor_free(&x);

    ck_assert_int_eq(lowp_tensor_load_float(path, "b", &x, &src, &rounded, why, sizeof why), 0);
    xv = (const float *)(const void *)x.data;
    ck_assert(xv[0] == 1.0f && xv[1] == 0.0f && signbit(xv[1]) && xv[2] == 0x1p-133f);
    ck_assert(xv[3] == 0x1.fep127f && isinf(xv[4]) && xv[5] == 1.5f);
    lowp_tensor_free(&x);

    ck_assert_int_eq(lowp_tensor_load_float(path, "d", &x, &src, &rounded, why, sizeof why), 0);
    xv = (const float *)(const void *)x.data;
    ck_assert(xv[0] == 0.5f && xv[1] == 0.1f && isinf(xv[2]) && isnan(xv[3]) && xv[4] == -3.0f && xv[5] == 1.0f);
    ck_assert_uint_eq(rounded, 3); /* 0.1, 1e300, 1 + 2^-24 */
    lowp_tensor_free(&x);

    ck_assert_int_eq(lowp_tensor_load_float(path, "i", &x, &src, &rounded, why, sizeof why), -1);
    check_message(why, "not a float type", "I32");
    ck_assert_int_eq(lowp_tensor_load_float(path, NULL, &x, &src, &rounded, why, sizeof why), -1);
    check_message(why, "4 tensors", "ambiguous");
    ck_assert_int_eq(lowp_tensor_load_float(path, "zz", &x, &src, &rounded, why, sizeof why), -1);
    check_message(why, "no tensor named", "missing");
    snprintf(path, sizeof path, "%s/missing.npy", tmpdir);
    ck_assert_int_eq(lowp_tensor_load_float(path, NULL, &x, &src, &rounded, why, sizeof why), -1);
    check_message(why, "cannot read", "missing file");
    ck_assert_int_eq(lowp_tensor_load_float(path, "h", &x, &src, &rounded, why, sizeof why), -1);
    check_message(why, "unnamed", "npy with a name");
    lowp_tensor_file_free(&f);
    remove_tmpdir();
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* malformed .npy                                                                       */

/* magic, version major.0, the header length field as given, the header, data bytes */
static unsigned char *npy_build(unsigned major, const char *dict, size_t dict_len, size_t len_field,
                                size_t data_len, size_t *out_len)
{
    size_t pre = major == 1 ? 10 : 12;
    size_t n = pre + dict_len + data_len;
    unsigned char *b = calloc(n ? n : 1, 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (unsigned char)(len_field >> (8 * i));
    memcpy(b + pre, dict, dict_len);
    *out_len = n;
    return b;
}

START_TEST(npy_malformed_inputs_are_refused)
{
    static const struct {
        const char *label;
        unsigned major;
        const char *dict;
        size_t data;    /* bytes of data after the header */
        const char *want; /* a word the message must contain */
    } cases[] = {
        {"fortran order", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, "fortran_order"},
        {"big-endian", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian"},
        {"native order", 1, "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }", 8, "little-endian"},
        {"ml_dtypes bf16", 1, "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }", 4, "void"},
        {"object", 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, "object"},
        {"complex", 1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "not a dtype"},
        {"no byte order", 1, "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }", 8, "byte-order"},
        {"structured", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured"},
        {"missing key", 1, "{'descr': '<f4', 'shape': (2,), }", 8, "missing key"},
        {"unknown key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "unknown key"},
        {"duplicate key", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, "twice"},
        {"shape list", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8, "list"},
        {"shape int", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", 8, "not a tuple"},
        {"negative dim", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "negative"},
        {"leading zero", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (02,), }", 8, "leading zero"},
        {"nine dims", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 1, "more than 8"},
        {"huge dim", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999999,), }", 1, "size_t"},
        {"overflow", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8, "overflows"},
        {"overflow by itemsize", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,), }", 8, "overflows"},
        {"truncated data", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, "truncated"},
        {"trailing data", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "follow"},
        {"text after dict", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8, "after the dict"},
        {"unterminated string", 1, "{'descr': '<f4", 0, "unterminated"},
        {"bad bool", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8, "True or False"},
        {"Truex", 1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }", 8, "True or False"},
        {"line break in descr", 1, "{'descr': '<f\n4', 'fortran_order': False, 'shape': (2,), }", 8, "control byte 0x0a"},
        {"escape", 1, "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,), }", 8, "escape"},
        {"non-ASCII", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), '\xc3\xa9': 1}", 8, "non-ASCII"},
        {"not a dict", 1, "('<f4', False, (2,))", 8, "expected '{'"},
        {"empty header", 1, "", 8, "expected '{'"},
        {"long suffix in 3.0", 3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", 8, "expected ','"},
    };
    for (size_t c = 0; c < N_ELEMS(cases); c++) {
        size_t dl = strlen(cases[c].dict);
        size_t len;
        unsigned char *b = npy_build(cases[c].major, cases[c].dict, dl, dl, cases[c].data, &len);
        lowp_tensor t;
        char why[512] = "";
        int rc = lowp_npy_parse(b, len, &t, why, sizeof why);
        ck_assert_msg(rc == -1, "%s: accepted", cases[c].label);
        ck_assert_ptr_null(t.data);
        check_message(why, cases[c].want, cases[c].label);
        free(b);
    }

    { /* a NUL byte inside the header (Python source cannot contain one) */
        static const char nul[] = "{'descr': '<f4',\0 'fortran_order': False, 'shape': (2,), }";
        size_t len;
        unsigned char *b = npy_build(1, nul, sizeof nul - 1, sizeof nul - 1, 8, &len);
        lowp_tensor t;
        char why[512] = "";
        ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
        check_message(why, "control byte 0x00", "NUL byte");
        free(b);
    }

    /* preamble defects */
    static const char good[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    size_t gl = strlen(good), len;
    char why[512] = "";
    lowp_tensor t;
    unsigned char *b = npy_build(1, good, gl, gl, 8, &len);
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), 0);
    lowp_tensor_free(&t);
    ck_assert_int_eq(lowp_npy_parse(b, 9, &t, why, sizeof why), -1);
    check_message(why, "too short", "9 bytes");
    b[0] = 0x92;
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
    check_message(why, "magic", "bad magic");
    b[0] = 0x93;
    b[6] = 4;
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
    check_message(why, "version 4.0", "version 4");
    b[6] = 1;
    b[7] = 1;
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
    check_message(why, "version 1.1", "version 1.1");
    b[7] = 0;
    for (size_t cut = 10; cut < len; cut++) { /* every truncation */
        int rc = lowp_npy_parse(b, cut, &t, why, sizeof why);
        ck_assert_msg(rc == -1, "truncated to %zu: accepted", cut);
        check_message(why, cut < 10 + gl ? "runs past" : "truncated", "truncation");
    }
    free(b);
    /* a header length beyond the file, and one beyond lowp's 1 MiB limit */
    b = npy_build(2, good, gl, 0xfffffff0u, 8, &len);
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
    check_message(why, "runs past", "lying v2 length");
    free(b);
    size_t big = (1u << 20) + 1;
    char *hdr = malloc(big);
    memset(hdr, ' ', big);
    memcpy(hdr, good, gl);
    b = npy_build(2, hdr, big, big, 8, &len);
    ck_assert_int_eq(lowp_npy_parse(b, len, &t, why, sizeof why), -1);
    check_message(why, "1048576", "huge header");
    free(b);
    free(hdr);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* malformed .safetensors                                                               */

static unsigned char *st_build(const char *json, size_t json_len, uint64_t len_field, size_t data_len,
                               size_t *out_len)
{
    size_t n = 8 + json_len + data_len;
    unsigned char *b = calloc(n, 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(len_field >> (8 * i));
    memcpy(b + 8, json, json_len);
    for (size_t i = 0; i < data_len; i++)
        b[8 + json_len + i] = (unsigned char)i;
    *out_len = n;
    return b;
}

#define T1(body) "{\"a\":{" body "}}"
#define OK_A "\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"

START_TEST(safetensors_malformed_inputs_are_refused)
{
    static const struct {
        const char *label;
        const char *json;
        size_t data;
        const char *want;
    } cases[] = {
        /* schema */
        {"unknown dtype", T1("\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]"), 1, "F4"},
        {"dtype not a string", T1("\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]"), 8, "not a string"},
        {"missing dtype", T1("\"shape\":[2],\"data_offsets\":[0,8]"), 8, "no \"dtype\""},
        {"missing shape", T1("\"dtype\":\"F32\",\"data_offsets\":[0,8]"), 8, "no \"shape\""},
        {"missing offsets", T1("\"dtype\":\"F32\",\"shape\":[2]"), 8, "no \"data_offsets\""},
        {"unknown key", T1(OK_A ",\"extra\":1"), 8, "unknown key"},
        {"duplicate key in tensor", T1(OK_A ",\"dtype\":\"F32\""), 8, "twice"},
        {"duplicate tensor", "{\"a\":{" OK_A "},\"a\":{" OK_A "}}", 8, "twice"},
        {"tensor not an object", "{\"a\":[1]}", 0, "not a JSON object"},
        {"root not an object", "[1,2]", 0, "not an object"},
        {"float shape", T1("\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]"), 8, "shape entry"},
        {"negative shape", T1("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]"), 8, "shape entry"},
        {"string shape", T1("\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]"), 8, "shape entry"},
        {"shape not array", T1("\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]"), 8, "not an array"},
        {"nine dims", T1("\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]"), 1, "9 dimensions"},
        {"huge number", T1("\"dtype\":\"U8\",\"shape\":[123456789012345678901234567890],\"data_offsets\":[0,1]"), 1, "out of range"},
        {"three offsets", T1("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]"), 8, "[begin, end]"},
        {"exponent offset", T1("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8e0]"), 8, "[begin, end]"},
        {"backwards", T1("\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]"), 8, "backwards"},
        {"past the buffer", T1("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"), 4, "run past"},
        {"size mismatch", T1("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]"), 8, "12 bytes"},
        {"shape overflow", T1("\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]"), 8, "overflows"},
        {"itemsize overflow", T1("\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]"), 8, "overflows"},
        {"overlap", "{\"a\":{" OK_A "},\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8, "overlaps"},
        {"gap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4, "belong to no tensor"},
        {"trailing bytes", T1(OK_A), 9, "belong to no tensor"},
        {"data without tensors", "{}", 3, "belongs to no tensor"},
        {"metadata not an object", "{\"__metadata__\":[\"k\"]}", 0, "__metadata__"},
        {"metadata number", "{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
        {"metadata duplicate", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "twice"},
        {"metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "twice"},
        /* integers are exact to 2^63-1 (a double would make 2^53+1 into 2^53) */
        {"offset 2^53+1", T1("\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[9007199254740993,9007199254740993]"), 0,
         "[9007199254740993, 9007199254740993] run past"},
        /* JSON */
        {"2^63 in a shape", T1("\"dtype\":\"U8\",\"shape\":[9223372036854775808,0],\"data_offsets\":[0,0]"), 0, "out of range"},
        {"cut inside a number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2", 0, "end of the JSON"},
        {"cut inside an escape", "{\"__metadata__\":{\"k\":\"\\u00e", 0, "invalid escape"},
        {"trailing comma", "{\"a\":{" OK_A ",}}", 8, "string or '}' expected"},
        {"single quotes", "{'a':1}", 0, "string or '}' expected"},
        {"unterminated", "{\"a\":{" OK_A, 8, "end of the JSON"},
        {"unterminated string", "{\"a", 0, "end of the JSON"},
        {"bad escape", "{\"__metadata__\":{\"k\":\"\\x41\"}}", 0, "invalid escape"},
        {"short unicode escape", "{\"__metadata__\":{\"k\":\"\\u00\"}}", 0, "invalid escape"},
        {"lone high surrogate", "{\"__metadata__\":{\"k\":\"\\ud800\"}}", 0, "invalid Unicode '\\uD800'"},
        {"lone low surrogate", "{\"__metadata__\":{\"k\":\"\\udc00\"}}", 0, "invalid Unicode '\\uDC00'"},
        {"U+0000", "{\"__metadata__\":{\"k\\u0000\":\"v\"}}", 0, "U+0000"},
        {"raw control", "{\"__metadata__\":{\"k\":\"a\tb\"}}", 0, "control character"},
        {"leading zero", T1("\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]"), 8, "invalid token near '0'"},
        {"bad fraction", "{\"__metadata__\":1.}", 0, "near '1.'"},
        {"bad exponent", "{\"__metadata__\":1e}", 0, "near '1e'"},
        {"minus alone", "{\"__metadata__\":-}", 0, "near '-'"},
        {"bare word", "{\"__metadata__\":nul}", 0, "near 'nul'"},
        {"text after", T1(OK_A) "x", 8, "after the JSON"},
        {"two values", T1(OK_A) " {}", 8, "after the JSON"},
        {"empty header", "", 0, "end of the JSON"},
        {"only spaces", "        ", 0, "end of the JSON"},
    };
    for (size_t c = 0; c < N_ELEMS(cases); c++) {
        size_t jl = strlen(cases[c].json), len;
        unsigned char *b = st_build(cases[c].json, jl, jl, cases[c].data, &len);
        lowp_tensor_file f;
        char why[512] = "";
        int rc = lowp_safetensors_parse(b, len, &f, why, sizeof why);
        ck_assert_msg(rc == -1, "%s: accepted", cases[c].label);
        ck_assert_uint_eq(f.n_tensors, 0);
        ck_assert_uint_eq(f.n_meta, 0);
        check_message(why, cases[c].want, cases[c].label);
        free(b);
    }
}
END_TEST

START_TEST(safetensors_malformed_framing_utf8_and_depth)
{
    char why[512] = "";
    lowp_tensor_file f;
    size_t len;
    const char *good = T1(OK_A);
    size_t gl = strlen(good);
    unsigned char *b = st_build(good, gl, gl, 8, &len);
    ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), 0);
    lowp_tensor_file_free(&f);
    ck_assert_int_eq(lowp_safetensors_parse(b, 7, &f, why, sizeof why), -1);
    check_message(why, "too short", "7 bytes");
    for (size_t cut = 8; cut < len; cut++) {
        ck_assert_int_eq(lowp_safetensors_parse(b, cut, &f, why, sizeof why), -1);
        check_message(why, cut < 8 + gl ? "runs past" : "run past", "truncation");
    }
    free(b);
    b = st_build(good, gl, 100000001u, 8, &len);
    ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
    check_message(why, "100000000", "header above the limit");
    free(b);
    b = st_build(good, gl, UINT64_MAX, 8, &len);
    ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
    check_message(why, "safetensors allows", "2^64-1 header length");
    free(b);
    b = st_build(good, gl, gl + 9, 8, &len);
    ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
    check_message(why, "runs past", "header length one past");
    free(b);

    /* invalid UTF-8: a stray continuation, an overlong '/', an encoded surrogate, a
     * truncated sequence, a code point above U+10FFFF */
    static const char *const bad_utf8[] = {
        "{\"__metadata__\":{\"k\":\"\x80\"}}",     "{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}",
        "{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}", "{\"__metadata__\":{\"k\":\"\xe2\x82\"}}",
        "{\"__metadata__\":{\"k\":\"\xf4\x90\x80\x80\"}}",
    };
    for (size_t i = 0; i < N_ELEMS(bad_utf8); i++) {
        size_t jl = strlen(bad_utf8[i]);
        b = st_build(bad_utf8[i], jl, jl, 0, &len);
        ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
        check_message(why, "UTF-8", "bad UTF-8");
        free(b);
    }
    /* a raw NUL byte, inside a string and between values: refused with its position, not
     * taken for the end of the text */
    static const char nul_in[] = "{\"__metadata__\":{\"k\":\"a\0b\"}}";
    static const char nul_out[] = "{\"__metadata__\":{}}\0";
    const char *const nuls[] = {nul_in, nul_out};
    const size_t nul_len[] = {sizeof nul_in - 1, sizeof nul_out - 1};
    for (size_t i = 0; i < 2; i++) {
        b = st_build(nuls[i], nul_len[i], nul_len[i], 0, &len);
        ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
        check_message(why, "NUL byte at byte", "raw NUL");
        free(b);
    }

    /* nesting: 31 levels inside the root parse (and are then refused by the schema), 33 do not */
    for (int depth = 31; depth <= 33; depth += 2) {
        char json[256];
        size_t k = (size_t)snprintf(json, sizeof json, "{\"__metadata__\":");
        for (int i = 0; i < depth - 1; i++)
            json[k++] = '[';
        for (int i = 0; i < depth - 1; i++)
            json[k++] = ']';
        json[k++] = '}';
        json[k] = '\0';
        b = st_build(json, k, k, 0, &len);
        ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
        check_message(why, depth <= LOWP_JSON_MAX_DEPTH ? "__metadata__" : "deeper", "nesting");
        free(b);
    }
    /* a very deep header does not exhaust the stack */
    size_t deep = 1000000;
    char *json = malloc(2 * deep + 2);
    memset(json, '[', deep);
    memset(json + deep, ']', deep);
    b = st_build(json, 2 * deep, 2 * deep, 0, &len);
    ck_assert_int_eq(lowp_safetensors_parse(b, len, &f, why, sizeof why), -1);
    check_message(why, "deeper", "million levels");
    free(b);
    free(json);

}
END_TEST

START_TEST(safetensors_accepted_edge_cases)
{
    static const struct {
        const char *json;
        size_t data, tensors;
    } ok[] = {
        {"{\"__metadata__\":null,\"a\":{" OK_A "}}", 8, 1},
        {" \t\r\n{\"a\":{" OK_A "}} \n  ", 8, 1},
        {"{}", 0, 0},
        {"{\"__metadata__\":{}}", 0, 0},
        {"{\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},\"a\":{" OK_A "}}", 8, 2},
        {"{\"z\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[8,8]},\"a\":{" OK_A "}}", 8, 2},
        {"{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, 1},
        {"{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]},\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, 2},
    };
    for (size_t c = 0; c < N_ELEMS(ok); c++) {
        size_t jl = strlen(ok[c].json), len;
        unsigned char *b = st_build(ok[c].json, jl, jl, ok[c].data, &len);
        lowp_tensor_file f;
        char why[512] = "";
        ck_assert_msg(lowp_safetensors_parse(b, len, &f, why, sizeof why) == 0, "case %zu: %s", c, why);
        ck_assert_uint_eq(f.n_tensors, ok[c].tensors);
        lowp_tensor_file_free(&f);
        free(b);
    }
    /* the largest integer jansson holds exactly, 2^63-1, as a dimension of an empty tensor */
    static const char big[] = "{\"e\":{\"dtype\":\"U8\",\"shape\":[9223372036854775807,0],\"data_offsets\":[0,0]}}";
    size_t len;
    unsigned char *b = st_build(big, strlen(big), strlen(big), 0, &len);
    lowp_tensor_file f;
    char why[512] = "";
    ck_assert_msg(lowp_safetensors_parse(b, len, &f, why, sizeof why) == 0, "2^63-1: %s", why);
    ck_assert_uint_eq(f.n_tensors, 1);
    ck_assert(f.tensors[0].shape[0] == (size_t)9223372036854775807ull && f.tensors[0].shape[1] == 0);
    lowp_tensor_file_free(&f);
    free(b);
}
END_TEST

/* ---------------------------------------------------------------------------------- */
/* quantize -> tensor file -> dequantize, through the library                           */

START_TEST(block_round_trip_every_format_and_recipe)
{
    make_tmpdir();
    uint64_t seed = 12345;
    char why[512] = "", path[400];
    for (int fi = 0; fi < LOWP_BLOCK_FORMAT_COUNT; fi++) {
        lowp_block_format f = (lowp_block_format)fi;
        for (int ri = 0; ri < LOWP_RECIPE_COUNT; ri++) {
            lowp_recipe r = (lowp_recipe)ri;
            if (lowp_recipe_check(f, r, NULL, 0))
                continue;
            size_t bs = lowp_block_size(f), rows = 3, cols = 64; /* 64: a multiple of 16 and 32 */
            size_t n = rows * cols;
            float *x = malloc(n * sizeof *x);
            float amax = 0.0f;
            for (size_t i = 0; i < n; i++) { /* N(0,1) scaled by 2^k per row, k in -3..3 */
                x[i] = (float)(rng_normal(&seed) * ldexp(1.0, (int)(i / cols) * 3 - 3));
                amax = fmaxf(amax, fabsf(x[i]));
            }
            lowp_global_scale gs = lowp_recipe_global_scale(f, r, amax);
            /* the quantized tensor as `lowp quantize` lays it out, through a file */
            lowp_tensor_file q, back;
            lowp_tensor_file_init(&q);
            size_t cshape[2] = {rows, lowp_block_code_bytes(f, cols)};
            lowp_dtype cdt = lowp_block_element_format(f) == LOWP_E2M1 ? LOWP_DT_U8
                           : f == LOWP_FP8_E5M2 ? LOWP_DT_F8_E5M2 : f == LOWP_BF16_PASS ? LOWP_DT_U8 : LOWP_DT_F8_E4M3;
            ck_assert_ptr_nonnull(lowp_tensor_file_add(&q, "codes", cdt, 2, cshape, why, sizeof why));
            if (lowp_block_has_scales(f)) {
                size_t sshape[2] = {rows, cols / bs};
                ck_assert_ptr_nonnull(lowp_tensor_file_add(&q, "scales", f == LOWP_NVFP4 ? LOWP_DT_F8_E4M3 : LOWP_DT_F8_E8M0,
                                                           2, sshape, why, sizeof why));
            }
            lowp_quant_counts counts;
            memset(&counts, 0, sizeof counts);
            uint8_t *sc = lowp_block_has_scales(f) ? q.tensors[1].data : NULL;
            ck_assert_msg(lowp_block_quantize(f, r, gs, 0, x, n, q.tensors[0].data, sc, &counts, why, sizeof why) == 0,
                          "%s %s: %s", lowp_block_format_name(f), lowp_recipe_name(r), why);
            ck_assert_uint_eq(counts.elements, n);
            ck_assert_uint_eq(counts.nan_in, 0);
            snprintf(path, sizeof path, "%s/q.safetensors", tmpdir);
            ck_assert_int_eq(lowp_tensor_file_write(path, &q, why, sizeof why), 0);
            ck_assert_int_eq(lowp_tensor_file_read(path, &back, why, sizeof why), 0);
            const lowp_tensor *bc = lowp_tensor_file_find(&back, "codes");
            const lowp_tensor *bsc = lowp_tensor_file_find(&back, "scales");
            ck_assert_ptr_nonnull(bc);
            ck_assert_mem_eq(bc->data, q.tensors[0].data, bc->nbytes);
            double *d64 = malloc(n * sizeof *d64);
            float *d32 = malloc(n * sizeof *d32);
            lowp_block_dequantize_f64(f, gs.dec, bc->data, bsc ? bsc->data : NULL, n, d64);
            lowp_block_dequantize_f32(f, gs.dec, bc->data, bsc ? bsc->data : NULL, n, d32);
            lowp_format ef = lowp_block_element_format(f);
            for (size_t i = 0; i < n; i++) {
                /* independent product: element value * scale value * global scale */
                double e = lowp_decode_f64(ef, lowp_block_code_at(f, bc->data, i));
                double s = !bsc ? 1.0 : lowp_decode_f64(f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0, bsc->data[i / bs]);
                double g = lowp_block_has_global_scale(f) ? (double)gs.dec : 1.0;
                double want = e * s * g;
                ck_assert_msg(want == d64[i] || (isnan(want) && isnan(d64[i])), "%s %s [%zu]: %a != %a",
                              lowp_block_format_name(f), lowp_recipe_name(r), i, want, d64[i]);
                ck_assert(d32[i] == (float)d64[i] || (isnan(d32[i]) && isnan(d64[i])));
                /* accuracy: within a third of the block amax (saturation at the top of a
                 * power-of-two MX scale is the worst case: 6 of 8, 448 of 512) */
                size_t b0 = i / bs * bs;
                float bmax = 0.0f;
                for (size_t j = b0; j < b0 + bs; j++)
                    bmax = fmaxf(bmax, fabsf(x[j]));
                ck_assert_msg(fabs(d64[i] - x[i]) <= 0.34 * bmax + 1e-30, "%s %s [%zu]: %g -> %g (block amax %g)",
                              lowp_block_format_name(f), lowp_recipe_name(r), i, (double)x[i], d64[i], (double)bmax);
            }
            free(d64);
            free(d32);
            free(x);
            lowp_tensor_file_free(&q);
            lowp_tensor_file_free(&back);
        }
    }
    remove_tmpdir();
}
END_TEST

/* The loader's binary16 widening (lowp_f16_bits_to_f32, kept in ref/io so that the io layer
 * needs no codec) is the codec's F16 decoder on every one of the 2^16 codes: the same
 * binary32 bits for every non-NaN code, and a NaN of the same sign, with the code's 10
 * payload bits in the top fraction bits, for every NaN code. And BF16 widening
 * (lowp_f32_from_bf16, lowp/bits.h) is the codec's BF16 decoder on every code. */
START_TEST(f16_and_bf16_widening_are_the_codecs)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        const float got = lowp_f16_bits_to_f32((uint16_t)h), want = lowp_decode_f32(LOWP_F16, (uint16_t)h);
        if (lowp_code_is_nan(LOWP_F16, (uint16_t)h)) {
            ck_assert_msg(isnan(got) && signbit(got) == signbit(want), "f16 0x%04x: %a", h, (double)got);
            ck_assert_uint_eq((lowp_f32_bits(got) >> 13) & 0x3ffu, h & 0x3ffu);
        } else {
            ck_assert_msg(lowp_f32_bits(got) == lowp_f32_bits(want), "f16 0x%04x: %a, codec %a", h,
                          (double)got, (double)want);
        }
        const float b = lowp_f32_from_bf16((uint16_t)h), bw = lowp_decode_f32(LOWP_BF16, (uint16_t)h);
        if (lowp_code_is_nan(LOWP_BF16, (uint16_t)h))
            ck_assert_msg(isnan(b) && lowp_f32_bits(b) == (h << 16), "bf16 0x%04x", h);
        else
            ck_assert_msg(lowp_f32_bits(b) == lowp_f32_bits(bw), "bf16 0x%04x: %a, codec %a", h,
                          (double)b, (double)bw);
    }
}
END_TEST

static Suite *tensor_suite(void)
{
    Suite *s = suite_create("tensor");
    lowp_test_tcase(s, "basics", 120,
                    LOWP_TESTS(dtype_names_sizes_and_safetensors_order,
                               shape_product_overflow_is_refused, shape_text_json_and_tuple,
                               tensor_file_names_and_metadata, npy_exact_bytes_written_and_read,
                               npy_other_header_spellings_are_read,
                               safetensors_exact_bytes_written_and_read,
                               safetensors_json_escapes_both_ways,
                               round_trip_every_dtype_both_formats,
                               safetensors_data_is_aligned_and_ordered, writer_refusals,
                               float_loader_converts_exactly,
                               f16_and_bf16_widening_are_the_codecs));
    lowp_test_tcase(s, "malformed", 120,
                    LOWP_TESTS(npy_malformed_inputs_are_refused,
                               safetensors_malformed_inputs_are_refused,
                               safetensors_malformed_framing_utf8_and_depth,
                               safetensors_accepted_edge_cases));
    lowp_test_tcase(s, "block_round_trip", 120,
                    LOWP_TESTS(block_round_trip_every_format_and_recipe));
    return s;
}

int main(void)
{
    return lowp_test_main(tensor_suite(), LOWP_TEST_FORK);
}
