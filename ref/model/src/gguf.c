/* ref/model/src/gguf.c: the GGUF reader (lowp/gguf.h states the format and the checks).
 *
 * Parsing is one pass over the bytes through a cursor that refuses every read past the end,
 * then the tables are checked (distinct keys and names, tensor data inside the file and
 * disjoint). Counts are checked against the bytes left before anything is allocated: a
 * key/value pair takes at least 13 bytes (8-byte key length, 4-byte type, 1-byte value),
 * a tensor info at least 24 (8 + 4 + 4 + 8 with n_dims 0), an array element at least its
 * scalar size (8 for a string's length), so a 64 KiB input allocates at most a few
 * thousand entries whatever its counts say. */
#define _POSIX_C_SOURCE 200809L
#include "lowp/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lowp/why.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the reader uses the file's bytes in place");

/* ggml's type table: block size (elements), bytes per block, name. The numbers are those
 * of ggml.h's enum ggml_type and type_traits (the same as PyPI gguf's GGML_QUANT_SIZES). */
static const struct {
    uint32_t type;
    uint32_t block, bytes;
    const char *name;
} types[] = {
    {0, 1, 4, "F32"},         {1, 1, 2, "F16"},           {2, 32, 18, "Q4_0"},
    {3, 32, 20, "Q4_1"},      {6, 32, 22, "Q5_0"},        {7, 32, 24, "Q5_1"},
    {8, 32, 34, "Q8_0"},      {9, 32, 40, "Q8_1"},        {10, 256, 84, "Q2_K"},
    {11, 256, 110, "Q3_K"},   {12, 256, 144, "Q4_K"},     {13, 256, 176, "Q5_K"},
    {14, 256, 210, "Q6_K"},   {15, 256, 292, "Q8_K"},     {16, 256, 66, "IQ2_XXS"},
    {17, 256, 74, "IQ2_XS"},  {18, 256, 98, "IQ3_XXS"},   {19, 256, 50, "IQ1_S"},
    {20, 32, 18, "IQ4_NL"},   {21, 256, 110, "IQ3_S"},    {22, 256, 82, "IQ2_S"},
    {23, 256, 136, "IQ4_XS"}, {24, 1, 1, "I8"},           {25, 1, 2, "I16"},
    {26, 1, 4, "I32"},        {27, 1, 8, "I64"},          {28, 1, 8, "F64"},
    {29, 256, 56, "IQ1_M"},   {30, 1, 2, "BF16"},         {34, 256, 54, "TQ1_0"},
    {35, 256, 66, "TQ2_0"},   {39, 32, 17, "MXFP4"},
};

int lowp_gguf_type_info(uint32_t type, uint64_t *block, uint64_t *block_bytes, const char **name)
{
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i].type == type) {
            if (block != NULL)
                *block = types[i].block;
            if (block_bytes != NULL)
                *block_bytes = types[i].bytes;
            if (name != NULL)
                *name = types[i].name;
            return 1;
        }
    if (name != NULL)
        *name = "unknown";
    return 0;
}

/* Scalar sizes of the value types; 0 for STRING and ARRAY (variable). */
static const uint8_t vsize[LOWP_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vname[LOWP_GGUF_VTYPE_COUNT] = {
    "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
    "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};

/* A string of the file for a message: at most 48 bytes, bytes outside printable ASCII
 * shown as '?', so a message stays one line whatever the file holds. */
static const char *show(lowp_gguf_str s, char buf[64])
{
    size_t n = s.len < 48 ? (size_t)s.len : 48, j = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.data[i];
        buf[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    if (s.len > 48) {
        memcpy(buf + j, "...", 3);
        j += 3;
    }
    buf[j] = '\0';
    return buf;
}

typedef struct cursor {
    const unsigned char *p;
    uint64_t pos, size;
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

static int take(cursor *c, uint64_t n, const unsigned char **out)
{
    if (n > left(c))
        return -1;
    *out = c->p + c->pos;
    c->pos += n;
    return 0;
}

/* n little-endian bytes into *v (a uint32_t or uint64_t: the host is little-endian) */
static int rd(cursor *c, void *v, uint64_t n)
{
    const unsigned char *b;
    if (take(c, n, &b))
        return -1;
    memcpy(v, b, (size_t)n);
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v) { return rd(c, v, 4); }
static int rd_u64(cursor *c, uint64_t *v) { return rd(c, v, 8); }

static int rd_str(cursor *c, lowp_gguf_str *s)
{
    const unsigned char *b;
    if (rd_u64(c, &s->len) || take(c, s->len, &b))
        return -1;
    s->data = (const char *)b;
    return 0;
}

/* Skip one value of scalar or string type t (not ARRAY), checking a BOOL's byte. */
static int skip_value(cursor *c, uint32_t t, const char *what, char *why, size_t why_len)
{
    if (t == LOWP_GGUF_STRING) {
        lowp_gguf_str s;
        if (rd_str(c, &s))
            return lowp_why_set(why, why_len, "%s: a string runs past the end of the file", what);
        return 0;
    }
    const unsigned char *b;
    if (take(c, vsize[t], &b))
        return lowp_why_set(why, why_len, "%s: the %s value runs past the end of the file", what, vname[t]);
    if (t == LOWP_GGUF_BOOL && b[0] > 1)
        return lowp_why_set(why, why_len, "%s: BOOL value %u is neither 0 nor 1", what, b[0]);
    return 0;
}

static int parse_kv(cursor *c, uint64_t idx, lowp_gguf_kv *kv, char *why, size_t why_len)
{
    char what[128], sb[64];
    if (rd_str(c, &kv->key))
        return lowp_why_set(why, why_len, "key/value pair %llu: the key runs past the end of the file",
                            (unsigned long long)idx);
    snprintf(what, sizeof what, "key '%s'", show(kv->key, sb));
    if (rd_u32(c, &kv->type))
        return lowp_why_set(why, why_len, "%s: the value type runs past the end of the file", what);
    if (kv->type >= LOWP_GGUF_VTYPE_COUNT)
        return lowp_why_set(why, why_len, "%s: unknown value type %u", what, kv->type);
    kv->elem_type = kv->type;
    kv->count = 1;
    if (kv->type == LOWP_GGUF_ARRAY) {
        if (rd_u32(c, &kv->elem_type) || rd_u64(c, &kv->count))
            return lowp_why_set(why, why_len, "%s: the array header runs past the end of the file", what);
        if (kv->elem_type >= LOWP_GGUF_VTYPE_COUNT)
            return lowp_why_set(why, why_len, "%s: unknown array element type %u", what, kv->elem_type);
        if (kv->elem_type == LOWP_GGUF_ARRAY)
            return lowp_why_set(why, why_len, "%s: arrays of arrays are not supported", what);
        uint64_t min = kv->elem_type == LOWP_GGUF_STRING ? 8 : vsize[kv->elem_type];
        if (kv->count > left(c) / min)
            return lowp_why_set(why, why_len, "%s: %llu array elements cannot fit in the %llu bytes left",
                                what, (unsigned long long)kv->count, (unsigned long long)left(c));
    }
    kv->value = c->p + c->pos;
    uint64_t start = c->pos;
    if (kv->elem_type != LOWP_GGUF_STRING && kv->elem_type != LOWP_GGUF_BOOL) {
        const unsigned char *b; /* fixed-size elements: one bounds check (count checked above) */
        if (take(c, kv->count * vsize[kv->elem_type], &b))
            return lowp_why_set(why, why_len, "%s: the value runs past the end of the file", what);
    } else {
        for (uint64_t i = 0; i < kv->count; i++)
            if (skip_value(c, kv->elem_type, what, why, why_len))
                return -1;
    }
    kv->value_len = c->pos - start;
    return 0;
}

static int parse_tensor(cursor *c, uint64_t idx, lowp_gguf_tensor *t, char *why, size_t why_len)
{
    char sb[64];
    if (rd_str(c, &t->name))
        return lowp_why_set(why, why_len, "tensor info %llu: the name runs past the end of the file",
                            (unsigned long long)idx);
    const char *nm = show(t->name, sb);
    if (t->name.len >= LOWP_GGUF_MAX_NAME)
        return lowp_why_set(why, why_len, "tensor '%s': name of %llu bytes (at most %d)", nm,
                            (unsigned long long)t->name.len, LOWP_GGUF_MAX_NAME - 1);
    if (rd_u32(c, &t->n_dims))
        return lowp_why_set(why, why_len, "tensor '%s': n_dims runs past the end of the file", nm);
    if (t->n_dims > LOWP_GGUF_MAX_DIMS)
        return lowp_why_set(why, why_len, "tensor '%s': %u dimensions (at most %d)", nm, t->n_dims,
                            LOWP_GGUF_MAX_DIMS);
    t->n_elements = 1;
    for (uint32_t d = 0; d < LOWP_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && rd_u64(c, &t->ne[d]))
            return lowp_why_set(why, why_len, "tensor '%s': its shape runs past the end of the file", nm);
        /* ne >= 1, and the product within int64 (ggml's element count is int64_t) */
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX / t->n_elements)
            return lowp_why_set(why, why_len, "tensor '%s': dimension %u is %llu (each must be >= 1, "
                                "the product at most 2^63 - 1)", nm, d, (unsigned long long)t->ne[d]);
        t->n_elements *= t->ne[d];
    }
    if (rd_u32(c, &t->type) || rd_u64(c, &t->offset))
        return lowp_why_set(why, why_len, "tensor '%s': its type and offset run past the end of the file", nm);
    uint64_t block, bytes;
    const char *tn;
    if (!lowp_gguf_type_info(t->type, &block, &bytes, &tn))
        return lowp_why_set(why, why_len, "tensor '%s': unsupported ggml type %u", nm, t->type);
    if (t->ne[0] % block != 0)
        return lowp_why_set(why, why_len, "tensor '%s': ne[0] = %llu is not a multiple of %s's block of %llu",
                            nm, (unsigned long long)t->ne[0], tn, (unsigned long long)block);
    /* bytes <= 292 and n_elements / block < 2^63, but the product can overflow: check */
    uint64_t nb;
    if (__builtin_mul_overflow(t->n_elements / block, bytes, &nb))
        return lowp_why_set(why, why_len, "tensor '%s': its size overflows 64 bits", nm);
    t->nbytes = nb;
    return 0;
}

static int cmp_str(lowp_gguf_str a, lowp_gguf_str b)
{
    uint64_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.data, b.data, (size_t)n) : 0;
    return r != 0 ? r : (a.len < b.len ? -1 : a.len > b.len);
}

static int cmp_kv(const void *x, const void *y)
{
    return cmp_str((*(const lowp_gguf_kv *const *)x)->key, (*(const lowp_gguf_kv *const *)y)->key);
}

static int cmp_tname(const void *x, const void *y)
{
    return cmp_str((*(const lowp_gguf_tensor *const *)x)->name, (*(const lowp_gguf_tensor *const *)y)->name);
}

static int cmp_toff(const void *x, const void *y)
{
    const lowp_gguf_tensor *a = *(const lowp_gguf_tensor *const *)x, *b = *(const lowp_gguf_tensor *const *)y;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* Distinct keys, distinct names, disjoint tensor data: sorted pointer arrays, O(n log n). */
static int check_tables(const lowp_gguf *g, char *why, size_t why_len)
{
    uint64_t n = g->n_kv > g->n_tensors ? g->n_kv : g->n_tensors;
    if (n == 0)
        return 0;
    const void **ptr = malloc((size_t)n * sizeof *ptr);
    if (ptr == NULL)
        return lowp_why_set(why, why_len, "out of memory for %llu table entries", (unsigned long long)n);
    char sb[64];
    int rc = 0;
    for (uint64_t i = 0; i < g->n_kv; i++)
        ptr[i] = &g->kv[i];
    qsort(ptr, (size_t)g->n_kv, sizeof *ptr, cmp_kv);
    for (uint64_t i = 1; i < g->n_kv && rc == 0; i++)
        if (cmp_kv(&ptr[i - 1], &ptr[i]) == 0)
            rc = lowp_why_set(why, why_len, "key '%s' appears twice",
                              show(((const lowp_gguf_kv *)ptr[i])->key, sb));
    for (uint64_t i = 0; i < g->n_tensors && rc == 0; i++)
        ptr[i] = &g->tensors[i];
    if (rc == 0)
        qsort(ptr, (size_t)g->n_tensors, sizeof *ptr, cmp_tname);
    for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++)
        if (cmp_tname(&ptr[i - 1], &ptr[i]) == 0)
            rc = lowp_why_set(why, why_len, "tensor name '%s' appears twice",
                              show(((const lowp_gguf_tensor *)ptr[i])->name, sb));
    if (rc == 0)
        qsort(ptr, (size_t)g->n_tensors, sizeof *ptr, cmp_toff);
    for (uint64_t i = 1; i < g->n_tensors && rc == 0; i++) {
        const lowp_gguf_tensor *a = ptr[i - 1], *b = ptr[i];
        if (a->offset + a->nbytes > b->offset) { /* no overflow: both end within the file */
            char sb2[64];
            rc = lowp_why_set(why, why_len, "tensors '%s' and '%s' overlap in the data section",
                              show(a->name, sb), show(b->name, sb2));
        }
    }
    free(ptr);
    return rc;
}

static void reset(lowp_gguf *g)
{
    memset(g, 0, sizeof *g);
}

int lowp_gguf_parse(const unsigned char *buf, size_t len, lowp_gguf *g, char *why, size_t why_len)
{
    reset(g);
    cursor c = {buf, 0, len};
    const unsigned char *magic;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (take(&c, 4, &magic) || memcmp(magic, "GGUF", 4) != 0)
        return lowp_why_set(why, why_len, "not a GGUF file (no 'GGUF' magic)");
    if (rd_u32(&c, &version))
        return lowp_why_set(why, why_len, "the GGUF header is truncated (no version)");
    if (version == 1)
        return lowp_why_set(why, why_len, "GGUF version 1 (32-bit counts) is not supported (versions 2 and 3 are)");
    if (version != 2 && version != 3) {
        if ((version & 0xffffu) == 0 && version != 0)
            return lowp_why_set(why, why_len, "GGUF version 0x%08x: a big-endian file, which is not supported",
                                version);
        return lowp_why_set(why, why_len, "unsupported GGUF version %u (versions 2 and 3 are supported)", version);
    }
    if (rd_u64(&c, &n_tensors) || rd_u64(&c, &n_kv))
        return lowp_why_set(why, why_len, "the GGUF header is truncated (no tensor and key/value counts)");
    if (n_kv > left(&c) / 13)
        return lowp_why_set(why, why_len, "%llu key/value pairs cannot fit in a file of %llu bytes",
                            (unsigned long long)n_kv, (unsigned long long)len);
    g->version = version;
    g->base = buf;
    g->size = len;
    g->alignment = LOWP_GGUF_DEFAULT_ALIGNMENT;
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    if (g->kv == NULL)
        return lowp_why_set(why, why_len, "out of memory for %llu key/value pairs", (unsigned long long)n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        if (parse_kv(&c, i, &g->kv[i], why, why_len))
            goto fail;
        g->n_kv = i + 1;
    }
    const lowp_gguf_kv *al = lowp_gguf_find(g, "general.alignment");
    if (al != NULL) {
        uint32_t a = 0;
        if (al->type == LOWP_GGUF_UINT32)
            memcpy(&a, al->value, 4);
        if (al->type != LOWP_GGUF_UINT32 || a == 0 || (a & (a - 1)) != 0) {
            lowp_why_set(why, why_len, "general.alignment must be a UINT32 power of two");
            goto fail;
        }
        g->alignment = a;
    }
    if (n_tensors > left(&c) / 24) {
        lowp_why_set(why, why_len, "%llu tensor infos cannot fit in the %llu bytes left",
                     (unsigned long long)n_tensors, (unsigned long long)left(&c));
        goto fail;
    }
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (g->tensors == NULL) {
        lowp_why_set(why, why_len, "out of memory for %llu tensor infos", (unsigned long long)n_tensors);
        goto fail;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (parse_tensor(&c, i, &g->tensors[i], why, why_len))
            goto fail;
        g->n_tensors = i + 1;
    }
    /* the data section starts at the next multiple of the alignment (c.pos < 2^63) */
    g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    uint64_t data_size = g->data_offset <= len ? len - g->data_offset : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        lowp_gguf_tensor *t = &g->tensors[i];
        char sb[64];
        if (t->offset % g->alignment != 0) {
            lowp_why_set(why, why_len, "tensor '%s': offset %llu is not a multiple of the alignment %llu",
                         show(t->name, sb), (unsigned long long)t->offset, (unsigned long long)g->alignment);
            goto fail;
        }
        if (g->data_offset > len || t->offset > data_size || t->nbytes > data_size - t->offset) {
            lowp_why_set(why, why_len, "tensor '%s': its %llu bytes at offset %llu are not within the "
                         "file (%llu bytes of data)", show(t->name, sb), (unsigned long long)t->nbytes,
                         (unsigned long long)t->offset, (unsigned long long)data_size);
            goto fail;
        }
        t->data = buf + g->data_offset + t->offset;
    }
    if (check_tables(g, why, why_len))
        goto fail;
    return 0;
fail:
    free(g->kv);
    free(g->tensors);
    reset(g);
    return -1;
}

int lowp_gguf_open(const char *path, lowp_gguf *g, char *why, size_t why_len)
{
    reset(g);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lowp_why_set(why, why_len, "cannot open model file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lowp_why_set(why, why_len, "model file '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return lowp_why_set(why, why_len, "model file '%s' is empty", path);
    }
    size_t n = (size_t)st.st_size;
    void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (m == MAP_FAILED)
        return lowp_why_set(why, why_len, "cannot map model file '%s': %s", path, strerror(errno));
    char inner[400];
    if (lowp_gguf_parse(m, n, g, inner, sizeof inner) != 0) {
        munmap(m, n);
        return lowp_why_set(why, why_len, "model file '%s': %s", path, inner);
    }
    g->map = m;
    g->map_len = n;
    return 0;
}

void lowp_gguf_close(lowp_gguf *g)
{
    if (g == NULL)
        return;
    free(g->kv);
    free(g->tensors);
    if (g->map != NULL)
        munmap(g->map, g->map_len);
    reset(g);
}

int lowp_gguf_str_eq(lowp_gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.data, c, n) == 0;
}

const lowp_gguf_kv *lowp_gguf_find(const lowp_gguf *g, const char *key)
{
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (lowp_gguf_str_eq(g->kv[i].key, key))
            return &g->kv[i];
    return NULL;
}

const lowp_gguf_tensor *lowp_gguf_find_tensor(const lowp_gguf *g, const char *name)
{
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (lowp_gguf_str_eq(g->tensors[i].name, name))
            return &g->tensors[i];
    return NULL;
}

/* An integer element of type t at p as int64; -1 for a non-integer type or a UINT64 above
 * INT64_MAX. */
static int int_at(uint32_t t, const unsigned char *p, int64_t *out)
{
    switch (t) {
    case LOWP_GGUF_UINT8: *out = p[0]; return 0;
    case LOWP_GGUF_INT8: *out = (int8_t)p[0]; return 0;
    case LOWP_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case LOWP_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case LOWP_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case LOWP_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case LOWP_GGUF_INT64: memcpy(out, p, 8); return 0;
    case LOWP_GGUF_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
        return 0;
    }
    default: return -1;
    }
}

static const lowp_gguf_kv *need(const lowp_gguf *g, const char *key, char *why, size_t why_len)
{
    const lowp_gguf_kv *kv = lowp_gguf_find(g, key);
    if (kv == NULL)
        lowp_why_set(why, why_len, "the model has no metadata key '%s'", key);
    return kv;
}

int lowp_gguf_get_uint(const lowp_gguf *g, const char *key, uint64_t *out, char *why, size_t why_len)
{
    const lowp_gguf_kv *kv = need(g, key, why, why_len);
    if (kv == NULL)
        return -1;
    if (kv->type == LOWP_GGUF_UINT64) {
        memcpy(out, kv->value, 8);
        return 0;
    }
    int64_t v;
    if (kv->type == LOWP_GGUF_ARRAY || int_at(kv->type, kv->value, &v) != 0 || v < 0)
        return lowp_why_set(why, why_len, "metadata '%s' is not a non-negative integer", key);
    *out = (uint64_t)v;
    return 0;
}

int lowp_gguf_get_float(const lowp_gguf *g, const char *key, double *out, char *why, size_t why_len)
{
    const lowp_gguf_kv *kv = need(g, key, why, why_len);
    if (kv == NULL)
        return -1;
    if (kv->type == LOWP_GGUF_FLOAT32) {
        float f;
        memcpy(&f, kv->value, 4);
        *out = f;
    } else if (kv->type == LOWP_GGUF_FLOAT64) {
        memcpy(out, kv->value, 8);
    } else {
        return lowp_why_set(why, why_len, "metadata '%s' is a %s, not a FLOAT32 or FLOAT64", key,
                            vname[kv->type]);
    }
    return 0;
}

int lowp_gguf_get_string(const lowp_gguf *g, const char *key, lowp_gguf_str *out, char *why,
                         size_t why_len)
{
    const lowp_gguf_kv *kv = need(g, key, why, why_len);
    if (kv == NULL)
        return -1;
    if (kv->type != LOWP_GGUF_STRING)
        return lowp_why_set(why, why_len, "metadata '%s' is a %s, not a STRING", key, vname[kv->type]);
    memcpy(&out->len, kv->value, 8); /* checked in bounds by the parser */
    out->data = (const char *)kv->value + 8;
    return 0;
}

int lowp_gguf_get_bool(const lowp_gguf *g, const char *key, int *out, char *why, size_t why_len)
{
    const lowp_gguf_kv *kv = need(g, key, why, why_len);
    if (kv == NULL)
        return -1;
    if (kv->type != LOWP_GGUF_BOOL)
        return lowp_why_set(why, why_len, "metadata '%s' is a %s, not a BOOL", key, vname[kv->type]);
    *out = kv->value[0];
    return 0;
}

int lowp_gguf_array_int(const lowp_gguf_kv *kv, uint64_t i, int64_t *out, char *why, size_t why_len)
{
    char sb[64];
    if (kv->type != LOWP_GGUF_ARRAY || kv->elem_type == LOWP_GGUF_STRING || kv->elem_type == LOWP_GGUF_BOOL ||
        kv->elem_type == LOWP_GGUF_FLOAT32 || kv->elem_type == LOWP_GGUF_FLOAT64)
        return lowp_why_set(why, why_len, "metadata '%s' is not an array of integers", show(kv->key, sb));
    if (i >= kv->count)
        return lowp_why_set(why, why_len, "metadata '%s': index %llu past its %llu elements", show(kv->key, sb),
                            (unsigned long long)i, (unsigned long long)kv->count);
    if (int_at(kv->elem_type, kv->value + i * vsize[kv->elem_type], out) != 0)
        return lowp_why_set(why, why_len, "metadata '%s': element %llu does not fit int64", show(kv->key, sb),
                            (unsigned long long)i);
    return 0;
}

int lowp_gguf_array_strings(const lowp_gguf_kv *kv, lowp_gguf_str *out, char *why, size_t why_len)
{
    char sb[64];
    if (kv->type != LOWP_GGUF_ARRAY || kv->elem_type != LOWP_GGUF_STRING)
        return lowp_why_set(why, why_len, "metadata '%s' is not an array of strings", show(kv->key, sb));
    const unsigned char *p = kv->value; /* every length and body was checked by the parser */
    for (uint64_t i = 0; i < kv->count; i++) {
        memcpy(&out[i].len, p, 8);
        out[i].data = (const char *)p + 8;
        p += 8 + out[i].len;
    }
    return 0;
}
