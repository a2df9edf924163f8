/* ref/io/src/tensor.c: dtypes, in-memory tensors and tensor files, files by extension, atomic
 * writes and the float loader. The two on-disk codecs are tensor_npy.c and
 * tensor_safetensors.c; this file never looks inside their bytes. */
#define _POSIX_C_SOURCE 200809L
#include "lowp/bits.h"
#include "lowp/tensor.h"

#include "lowp/why.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tensor data is kept in file byte order (little-endian) and read as C arrays. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "lowp tensors need a little-endian host");

/* A name made fit for a one-line message: at most 48 bytes, control characters as '?'. */
static const char *printable(const char *name, char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = name; *p != '\0' && n + 4 < len; p++)
        buf[n++] = ((unsigned char)*p < 0x20 || *p == 0x7f) ? '?' : *p;
    if (name[n] != '\0' && n + 4 >= len) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* ---------------------------------------------------------------------------------- */
/* dtypes                                                                               */

static const struct {
    const char *name;
    size_t size;
} dtypes[LOWP_DTYPE_COUNT] = {
    [LOWP_DT_BOOL] = {"BOOL", 1},       [LOWP_DT_U8] = {"U8", 1},
    [LOWP_DT_I8] = {"I8", 1},           [LOWP_DT_F8_E5M2] = {"F8_E5M2", 1},
    [LOWP_DT_F8_E4M3] = {"F8_E4M3", 1}, [LOWP_DT_F8_E8M0] = {"F8_E8M0", 1},
    [LOWP_DT_I16] = {"I16", 2},         [LOWP_DT_U16] = {"U16", 2},
    [LOWP_DT_F16] = {"F16", 2},         [LOWP_DT_BF16] = {"BF16", 2},
    [LOWP_DT_I32] = {"I32", 4},         [LOWP_DT_U32] = {"U32", 4},
    [LOWP_DT_F32] = {"F32", 4},         [LOWP_DT_F64] = {"F64", 8},
    [LOWP_DT_I64] = {"I64", 8},         [LOWP_DT_U64] = {"U64", 8},
};

const char *lowp_dtype_name(lowp_dtype dt)
{
    return (unsigned)dt < LOWP_DTYPE_COUNT ? dtypes[dt].name : "?";
}

size_t lowp_dtype_size(lowp_dtype dt)
{
    return (unsigned)dt < LOWP_DTYPE_COUNT ? dtypes[dt].size : 0;
}

int lowp_dtype_parse(const char *name, lowp_dtype *out)
{
    for (int i = 0; i < LOWP_DTYPE_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (lowp_dtype)i;
            return 0;
        }
    }
    return -1;
}

void lowp_shape_text(char *buf, size_t len, int ndim, const size_t *shape,
                     lowp_shape_style style)
{
    const int tuple = style == LOWP_SHAPE_TUPLE;
    size_t k = (size_t)snprintf(buf, len, tuple ? "(" : "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %zu" : "%zu", shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, !tuple ? "]" : ndim == 1 ? ",)" : ")");
}

/* ---------------------------------------------------------------------------------- */
/* tensors                                                                              */

int lowp_shape_size(int ndim, const size_t *shape, size_t elem_size, size_t *count,
                    size_t *nbytes)
{
    if (ndim < 0 || ndim > LOWP_TENSOR_MAX_DIMS)
        return -1;
    size_t c = 1, b;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(c, shape[i], &c))
            return -1;
    if (__builtin_mul_overflow(c, elem_size, &b))
        return -1;
    if (count != NULL)
        *count = c;
    if (nbytes != NULL)
        *nbytes = b;
    return 0;
}

int lowp_tensor_alloc(lowp_tensor *t, const char *name, lowp_dtype dt, int ndim,
                      const size_t *shape, char *why, size_t why_len)
{
    memset(t, 0, sizeof *t);
    if ((unsigned)dt >= LOWP_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "dtype %d is not a lowp dtype", (int)dt);
    if (ndim < 0 || ndim > LOWP_TENSOR_MAX_DIMS)
        return lowp_why_set(why, why_len, "%d dimensions is outside 0..%d", ndim,
                            LOWP_TENSOR_MAX_DIMS);
    size_t count, nbytes;
    if (lowp_shape_size(ndim, shape, lowp_dtype_size(dt), &count, &nbytes))
        return lowp_why_set(why, why_len, "the shape's byte size overflows size_t");
    t->name = strdup(name != NULL ? name : "");
    /* calloc(0) may return NULL; one spare byte keeps data non-NULL for empty tensors. */
    t->data = calloc(nbytes ? nbytes : 1, 1);
    if (t->name == NULL || t->data == NULL) {
        lowp_tensor_free(t);
        return lowp_why_set(why, why_len, "out of memory for a tensor of %zu bytes", nbytes);
    }
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->count = count;
    t->nbytes = nbytes;
    return 0;
}

void lowp_tensor_free(lowp_tensor *t)
{
    if (t == NULL)
        return;
    free(t->name);
    free(t->data);
    memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------------------------- */
/* tensor files                                                                         */

void lowp_tensor_file_init(lowp_tensor_file *f)
{
    memset(f, 0, sizeof *f);
}

void lowp_tensor_file_free(lowp_tensor_file *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n_tensors; i++)
        lowp_tensor_free(&f->tensors[i]);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->tensors);
    free(f->meta);
    lowp_tensor_file_init(f);
}

const lowp_tensor *lowp_tensor_file_find(const lowp_tensor_file *f, const char *name)
{
    for (size_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

lowp_tensor *lowp_tensor_file_add(lowp_tensor_file *f, const char *name, lowp_dtype dt,
                                  int ndim, const size_t *shape, char *why, size_t why_len)
{
    char pn[52];
    if (name == NULL)
        name = "";
    if (lowp_tensor_file_find(f, name) != NULL) {
        lowp_why_set(why, why_len, "a tensor named '%s' is already in the file",
                     printable(name, pn, sizeof pn));
        return NULL;
    }
    if (f->n_tensors == f->cap_tensors) {
        size_t cap = f->cap_tensors ? 2 * f->cap_tensors : 4;
        lowp_tensor *nt = realloc(f->tensors, cap * sizeof *nt);
        if (nt == NULL) {
            lowp_why_set(why, why_len, "out of memory for the tensor list");
            return NULL;
        }
        f->tensors = nt;
        f->cap_tensors = cap;
    }
    lowp_tensor *t = &f->tensors[f->n_tensors];
    if (lowp_tensor_alloc(t, name, dt, ndim, shape, why, why_len))
        return NULL;
    f->n_tensors++;
    return t;
}

int lowp_tensor_file_set_meta(lowp_tensor_file *f, const char *key, const char *value,
                              char *why, size_t why_len)
{
    char *v = strdup(value);
    if (v == NULL)
        return lowp_why_set(why, why_len, "out of memory for metadata");
    for (size_t i = 0; i < f->n_meta; i++) {
        if (strcmp(f->meta[i].key, key) == 0) {
            free(f->meta[i].value);
            f->meta[i].value = v;
            return 0;
        }
    }
    if (f->n_meta == f->cap_meta) {
        size_t cap = f->cap_meta ? 2 * f->cap_meta : 8;
        lowp_meta_entry *nm = realloc(f->meta, cap * sizeof *nm);
        if (nm == NULL) {
            free(v);
            return lowp_why_set(why, why_len, "out of memory for metadata");
        }
        f->meta = nm;
        f->cap_meta = cap;
    }
    char *k = strdup(key);
    if (k == NULL) {
        free(v);
        return lowp_why_set(why, why_len, "out of memory for metadata");
    }
    f->meta[f->n_meta].key = k;
    f->meta[f->n_meta].value = v;
    f->n_meta++;
    return 0;
}

const char *lowp_tensor_file_meta(const lowp_tensor_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* files by extension                                                                   */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcasecmp(s + n - m, suffix) == 0;
}

lowp_tensor_file_kind lowp_tensor_file_kind_of(const char *path)
{
    if (path == NULL)
        return LOWP_FILE_UNKNOWN;
    if (ends_with(path, ".npy"))
        return LOWP_FILE_NPY;
    if (ends_with(path, ".safetensors"))
        return LOWP_FILE_SAFETENSORS;
    return LOWP_FILE_UNKNOWN;
}

/* The whole file in memory (one spare byte so an empty file is a non-NULL buffer). */
static int read_whole(const char *path, unsigned char **buf, size_t *len, char *why, size_t why_len)
{
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return lowp_why_set(why, why_len, "cannot read '%s': %s", path, strerror(errno));
    /* A regular file is read into a buffer of its size (plus the byte that shows the end
     * came where fstat said): no doubling past it, which would reserve up to twice the
     * file. A pipe, or a file that grows meanwhile, still grows the buffer by doubling. */
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (uintmax_t)st.st_size < SIZE_MAX / 2 && (size_t)st.st_size + 1 > cap)
        cap = (size_t)st.st_size + 1;
    unsigned char *b = malloc(cap);
    while (b != NULL) {
        if (n == cap) {
            unsigned char *nb = (cap > SIZE_MAX / 2) ? NULL : realloc(b, cap * 2);
            if (nb == NULL) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (b == NULL) {
        fclose(f);
        return lowp_why_set(why, why_len, "out of memory reading '%s'", path);
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(b);
        return lowp_why_set(why, why_len, "cannot read '%s': %s", path, strerror(e));
    }
    fclose(f);
    *buf = b;
    *len = n;
    return 0;
}

/* Prefix a codec's reason with the path, keeping one sentence. */
static int fail_in(const char *path, const char *reason, char *why, size_t why_len)
{
    return lowp_why_set(why, why_len, "'%s': %s", path, reason);
}

int lowp_tensor_file_read(const char *path, lowp_tensor_file *out, char *why, size_t why_len)
{
    lowp_tensor_file_init(out);
    lowp_tensor_file_kind kind = lowp_tensor_file_kind_of(path);
    if (kind == LOWP_FILE_UNKNOWN)
        return lowp_why_set(why, why_len,
                            "cannot tell the file type of '%s' (expected .npy or .safetensors)",
                            path != NULL ? path : "(null)");
    unsigned char *buf;
    size_t len;
    if (read_whole(path, &buf, &len, why, why_len))
        return -1;
    char reason[512];
    int rc;
    if (kind == LOWP_FILE_NPY) {
        lowp_tensor t;
        rc = lowp_npy_parse(buf, len, &t, reason, sizeof reason);
        if (rc == 0) {
            out->tensors = malloc(sizeof *out->tensors);
            if (out->tensors == NULL) {
                lowp_tensor_free(&t);
                snprintf(reason, sizeof reason, "out of memory");
                rc = -1;
            } else {
                out->tensors[0] = t;
                out->n_tensors = out->cap_tensors = 1;
            }
        }
    } else {
        rc = lowp_safetensors_parse(buf, len, out, reason, sizeof reason);
    }
    free(buf);
    if (rc)
        return fail_in(path, reason, why, why_len);
    return 0;
}

int lowp_write_atomic(const char *path, int (*emit)(FILE *, const void *, char *, size_t),
                      const void *ctx, char *why, size_t why_len)
{
    static unsigned long serial; /* distinct temporaries within one process */
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (tmp == NULL)
        return lowp_why_set(why, why_len, "out of memory");
    snprintf(tmp, n, "%s.tmp.%ld.%lu", path, (long)getpid(), serial++);
    FILE *f = fopen(tmp, "wbx"); /* C11 exclusive mode: never clobber a stranger's file */
    if (f == NULL) {
        int e = errno;
        free(tmp);
        return lowp_why_set(why, why_len, "cannot write '%s': %s", path, strerror(e));
    }
    char reason[512] = "write failed";
    int rc = emit(f, ctx, reason, sizeof reason);
    if (rc == 0 && (fflush(f) != 0 || ferror(f))) {
        snprintf(reason, sizeof reason, "%s", strerror(errno));
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        snprintf(reason, sizeof reason, "%s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        snprintf(reason, sizeof reason, "%s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        remove(tmp);
        lowp_why_set(why, why_len, "cannot write '%s': %s", path, reason);
    }
    free(tmp);
    return rc;
}

static int emit_npy(FILE *out, const void *ctx, char *why, size_t why_len)
{
    return lowp_npy_emit(out, ctx, why, why_len);
}

static int emit_safetensors(FILE *out, const void *ctx, char *why, size_t why_len)
{
    return lowp_safetensors_emit(out, ctx, why, why_len);
}

int lowp_tensor_file_write(const char *path, const lowp_tensor_file *f, char *why,
                           size_t why_len)
{
    switch (lowp_tensor_file_kind_of(path)) {
    case LOWP_FILE_NPY:
        if (f->n_tensors != 1)
            return lowp_why_set(why, why_len, "an .npy file holds exactly one array, not %zu",
                                f->n_tensors);
        if (f->n_meta != 0)
            return lowp_why_set(why, why_len,
                                "an .npy file cannot hold metadata (%zu entries would be lost)",
                                f->n_meta);
        return lowp_write_atomic(path, emit_npy, &f->tensors[0], why, why_len);
    case LOWP_FILE_SAFETENSORS:
        return lowp_write_atomic(path, emit_safetensors, f, why, why_len);
    default:
        return lowp_why_set(why, why_len,
                            "cannot tell the file type of '%s' (expected .npy or .safetensors)",
                            path);
    }
}

/* ---------------------------------------------------------------------------------- */
/* float tensors                                                                        */

float lowp_f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in binary32 */
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) /* Inf or NaN, payload kept in the top mantissa bits */
        return lowp_f32_from_bits(sign | 0x7f800000u | m << 13);
    return lowp_f32_from_bits(sign | (e - 15 + 127) << 23 | m << 13);
}

int lowp_tensor_to_f32(const lowp_tensor *in, lowp_tensor *out, size_t *rounded, char *why,
                       size_t why_len)
{
    char pn[52];
    if (rounded != NULL)
        *rounded = 0;
    switch (in->dtype) {
    case LOWP_DT_F32: case LOWP_DT_F64: case LOWP_DT_F16: case LOWP_DT_BF16:
        break;
    default:
        memset(out, 0, sizeof *out);
        return lowp_why_set(why, why_len,
                            "tensor '%s' has dtype %s, not a float type (F32, F64, F16, BF16)",
                            printable(in->name, pn, sizeof pn), lowp_dtype_name(in->dtype));
    }
    if (lowp_tensor_alloc(out, in->name, LOWP_DT_F32, in->ndim, in->shape, why, why_len))
        return -1;
    float *y = (float *)(void *)out->data;
    size_t n = in->count, changed = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = in->data + i * lowp_dtype_size(in->dtype);
        switch (in->dtype) {
        case LOWP_DT_F32:
            memcpy(&y[i], p, 4);
            break;
        case LOWP_DT_F16:
            y[i] = lowp_f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8));
            break;
        case LOWP_DT_BF16:
            y[i] = lowp_f32_from_bf16((uint16_t)(p[0] | p[1] << 8));
            break;
        default: { /* F64: one rounding to nearest */
            double d;
            memcpy(&d, p, 8);
            y[i] = (float)d;
            if (!isnan(d) && (double)y[i] != d)
                changed++;
        }
        }
    }
    if (rounded != NULL)
        *rounded = changed;
    return 0;
}

int lowp_tensor_load_float(const char *path, const char *name, lowp_tensor *out,
                           lowp_dtype *src_dtype, size_t *rounded, char *why, size_t why_len)
{
    char pn[52];
    memset(out, 0, sizeof *out);
    lowp_tensor_file_kind kind = lowp_tensor_file_kind_of(path);
    if (kind == LOWP_FILE_NPY && name != NULL)
        return lowp_why_set(why, why_len,
                            "'%s' is an .npy file, which holds one unnamed array; a tensor name "
                            "applies to .safetensors only",
                            path);
    lowp_tensor_file f;
    if (lowp_tensor_file_read(path, &f, why, why_len))
        return -1;
    const lowp_tensor *t = NULL;
    if (name != NULL) {
        t = lowp_tensor_file_find(&f, name);
        if (t == NULL) {
            lowp_tensor_file_free(&f);
            return lowp_why_set(why, why_len, "'%s' has no tensor named '%s'", path,
                                printable(name, pn, sizeof pn));
        }
    } else if (f.n_tensors == 1) {
        t = &f.tensors[0];
    } else {
        size_t n = f.n_tensors;
        lowp_tensor_file_free(&f);
        return lowp_why_set(why, why_len, "'%s' holds %zu tensors; name the one to use", path, n);
    }
    char reason[256];
    if (src_dtype != NULL)
        *src_dtype = t->dtype;
    if (t->dtype == LOWP_DT_F32) {
        /* already binary32: hand the file's tensor over rather than convert it into a
         * second copy (the same bytes lowp_tensor_to_f32 would give) */
        size_t at = (size_t)(t - f.tensors);
        *out = f.tensors[at];
        memset(&f.tensors[at], 0, sizeof f.tensors[at]);
        lowp_tensor_file_free(&f);
        if (rounded != NULL)
            *rounded = 0;
        return 0;
    }
    int rc = lowp_tensor_to_f32(t, out, rounded, reason, sizeof reason);
    lowp_tensor_file_free(&f);
    if (rc)
        return fail_in(path, reason, why, why_len);
    return 0;
}
