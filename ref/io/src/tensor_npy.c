/* ref/io/src/tensor_npy.c: the NumPy .npy format (versions 1.0, 2.0, 3.0), read and write.
 *
 * Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE for 2.0
 * and 3.0), the header (a Python dict literal: 'descr', 'fortran_order', 'shape'), the
 * data. lowp reads the header with a small parser for exactly that literal, never with an
 * evaluator; lowp/tensor.h lists what is accepted and refused.
 *
 * Invariants of lowp_npy_parse: it reads only buf[0..len), allocates only after the
 * header proved that count * itemsize equals the bytes present (so a lying header cannot
 * make it allocate more than the file holds), and fails with one sentence otherwise. */
#include "lowp/tensor.h"

#include "lowp/why.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64          /* numpy ARRAY_ALIGN */
#define NPY_GROWTH_DIGITS 21  /* numpy GROWTH_AXIS_MAX_DIGITS */

/* descr strings lowp writes for each dtype (numpy's dtype.str where numpy has the type;
 * raw bits for BF16 and the float8 types, which numpy lacks). */
static const char *const write_descr[LOWP_DTYPE_COUNT] = {
    [LOWP_DT_BOOL] = "|b1",    [LOWP_DT_U8] = "|u1",      [LOWP_DT_I8] = "|i1",
    [LOWP_DT_F8_E5M2] = "|u1", [LOWP_DT_F8_E4M3] = "|u1", [LOWP_DT_F8_E8M0] = "|u1",
    [LOWP_DT_I16] = "<i2",     [LOWP_DT_U16] = "<u2",     [LOWP_DT_F16] = "<f2",
    [LOWP_DT_BF16] = "<u2",    [LOWP_DT_I32] = "<i4",     [LOWP_DT_U32] = "<u4",
    [LOWP_DT_F32] = "<f4",     [LOWP_DT_F64] = "<f8",     [LOWP_DT_I64] = "<i8",
    [LOWP_DT_U64] = "<u8",
};

/* Type code + size (the descr without its byte-order character) -> dtype. */
static const struct {
    const char *code;
    lowp_dtype dt;
} read_descr[] = {
    {"b1", LOWP_DT_BOOL}, {"u1", LOWP_DT_U8},  {"i1", LOWP_DT_I8},  {"i2", LOWP_DT_I16},
    {"u2", LOWP_DT_U16},  {"f2", LOWP_DT_F16}, {"i4", LOWP_DT_I32}, {"u4", LOWP_DT_U32},
    {"f4", LOWP_DT_F32},  {"f8", LOWP_DT_F64}, {"i8", LOWP_DT_I64}, {"u8", LOWP_DT_U64},
};

static int descr_to_dtype(const char *d, lowp_dtype *out, char *why, size_t why_len)
{
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return lowp_why_set(why, why_len,
                            "descr '%s' has no byte-order character ('<' or '|' expected)", d);
    const char *code = d + 1;
    if (code[0] == 'V')
        return lowp_why_set(
            why, why_len,
            "descr '%s' is an opaque void type (how ml_dtypes saves bfloat16 and float8): the "
            "element format is not recorded; save a uint16/uint8 view or use .safetensors",
            d);
    if (code[0] == 'O')
        return lowp_why_set(why, why_len,
                            "descr '%s' is an object array (a pickle), which lowp never loads", d);
    for (size_t i = 0; i < sizeof read_descr / sizeof read_descr[0]; i++) {
        if (strcmp(code, read_descr[i].code) != 0)
            continue;
        lowp_dtype dt = read_descr[i].dt;
        if (lowp_dtype_size(dt) > 1 && order == '>')
            return lowp_why_set(
                why, why_len, "descr '%s' is big-endian; lowp reads little-endian ('<') data only",
                d);
        if (lowp_dtype_size(dt) > 1 && order != '<')
            return lowp_why_set(why, why_len,
                                "descr '%s' does not state little-endian byte order ('<')", d);
        *out = dt;
        return 0;
    }
    return lowp_why_set(
        why, why_len, "descr '%s' is not a dtype lowp reads (b1 u1 i1 i2 u2 f2 i4 u4 f4 f8 i8 u8)",
        d);
}

/* ---------------------------------------------------------------------------------- */
/* header parser: exactly the dict literal np.save writes, with Python's freedom in      */
/* whitespace, quote style, key order and trailing commas                               */

typedef struct hparse {
    const unsigned char *s;
    size_t n, i;
    int allow_long; /* Python 2 files (versions 1.0 and 2.0) may write 3L */
} hparse;

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static void skip_ws(hparse *p)
{
    while (p->i < p->n && is_ws(p->s[p->i]))
        p->i++;
}

static int peek(const hparse *p)
{
    return p->i < p->n ? p->s[p->i] : -1;
}

static int expect(hparse *p, char c, const char *what, char *why, size_t why_len)
{
    skip_ws(p);
    if (peek(p) != c)
        return lowp_why_set(why, why_len, "header: expected '%c' %s at byte %zu", c, what, p->i);
    p->i++;
    return 0;
}

/* A quoted string without escapes, at most cap - 1 bytes. */
static int parse_str(hparse *p, char *out, size_t cap, const char *what, char *why, size_t why_len)
{
    skip_ws(p);
    int q = peek(p);
    if (q != '\'' && q != '"')
        return lowp_why_set(why, why_len, "header: expected a quoted %s at byte %zu", what, p->i);
    size_t start = ++p->i, k = 0;
    while (p->i < p->n && p->s[p->i] != q) {
        if (p->s[p->i] == '\\')
            return lowp_why_set(why, why_len, "header: escape sequence in the %s at byte %zu", what,
                                p->i);
        if (p->s[p->i] < 0x20) /* a Python string literal holds no raw line break */
            return lowp_why_set(why, why_len,
                                "header: control byte 0x%02x inside the %s at byte %zu", p->s[p->i],
                                what, p->i);
        if (k + 1 >= cap)
            return lowp_why_set(why, why_len, "header: the %s starting at byte %zu is too long",
                                what, start);
        out[k++] = (char)p->s[p->i++];
    }
    if (p->i >= p->n)
        return lowp_why_set(why, why_len, "header: unterminated %s starting at byte %zu", what,
                            start);
    p->i++;
    out[k] = '\0';
    return 0;
}

static int parse_dim(hparse *p, size_t *out, char *why, size_t why_len)
{
    skip_ws(p);
    size_t start = p->i;
    if (peek(p) == '-')
        return lowp_why_set(why, why_len, "header: negative dimension at byte %zu", start);
    if (peek(p) < '0' || peek(p) > '9')
        return lowp_why_set(why, why_len,
                            "header: expected a dimension (a decimal integer) at byte %zu", start);
    if (peek(p) == '0' && p->i + 1 < p->n && p->s[p->i + 1] >= '0' && p->s[p->i + 1] <= '9')
        return lowp_why_set(why, why_len, "header: dimension with a leading zero at byte %zu",
                            start);
    size_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
        if (__builtin_mul_overflow(v, (size_t)10, &v) ||
            __builtin_add_overflow(v, (size_t)(p->s[p->i] - '0'), &v))
            return lowp_why_set(why, why_len,
                                "header: dimension at byte %zu does not fit in size_t", start);
        p->i++;
    }
    if (p->allow_long && (peek(p) == 'L' || peek(p) == 'l'))
        p->i++;
    *out = v;
    return 0;
}

/* '(' [dim (',' dim)* [',']] ')' where a single dim needs its comma to be a tuple. */
static int parse_shape(hparse *p, int *ndim, size_t *shape, char *why, size_t why_len)
{
    skip_ws(p);
    if (peek(p) == '[')
        return lowp_why_set(why, why_len, "header: shape at byte %zu is a list, not a tuple", p->i);
    if (expect(p, '(', "to open the shape tuple", why, why_len))
        return -1;
    int nd = 0, commas = 0;
    skip_ws(p);
    while (peek(p) != ')') {
        if (nd == LOWP_TENSOR_MAX_DIMS)
            return lowp_why_set(why, why_len, "header: shape has more than %d dimensions",
                                LOWP_TENSOR_MAX_DIMS);
        if (parse_dim(p, &shape[nd], why, why_len))
            return -1;
        nd++;
        skip_ws(p);
        if (peek(p) == ',') {
            p->i++;
            commas++;
            skip_ws(p);
        } else if (peek(p) != ')') {
            return lowp_why_set(why, why_len,
                                "header: expected ',' or ')' in the shape at byte %zu", p->i);
        }
    }
    p->i++;
    if (nd == 1 && commas == 0)
        return lowp_why_set(why, why_len,
                            "header: shape (%zu) is an integer, not a tuple (write (%zu,))",
                            shape[0], shape[0]);
    *ndim = nd;
    return 0;
}

static int parse_bool(hparse *p, int *out, char *why, size_t why_len)
{
    skip_ws(p);
    if (p->n - p->i >= 4 && memcmp(p->s + p->i, "True", 4) == 0) {
        p->i += 4;
        *out = 1;
    } else if (p->n - p->i >= 5 && memcmp(p->s + p->i, "False", 5) == 0) {
        p->i += 5;
        *out = 0;
    } else {
        return lowp_why_set(why, why_len, "header: fortran_order at byte %zu is not True or False",
                            p->i);
    }
    /* "Truex" is a different identifier */
    int c = peek(p);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
        return lowp_why_set(why, why_len, "header: fortran_order at byte %zu is not True or False",
                            p->i);
    return 0;
}

typedef struct npy_header {
    char descr[40];
    int fortran;
    int ndim;
    size_t shape[LOWP_TENSOR_MAX_DIMS];
} npy_header;

static int parse_header(hparse *p, npy_header *h, char *why, size_t why_len)
{
    for (size_t i = 0; i < p->n; i++) {
        unsigned char c = p->s[i];
        if (c >= 0x80)
            return lowp_why_set(why, why_len, "header: non-ASCII byte 0x%02x at byte %zu", c, i);
        if (c < 0x20 && !is_ws(c))
            return lowp_why_set(why, why_len, "header: control byte 0x%02x at byte %zu", c, i);
    }
    int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
    if (expect(p, '{', "to open the header dict", why, why_len))
        return -1;
    for (;;) {
        skip_ws(p);
        if (peek(p) == '}') {
            p->i++;
            break;
        }
        char key[32];
        size_t at = p->i;
        if (parse_str(p, key, sizeof key, "key", why, why_len))
            return -1;
        if (expect(p, ':', "after a key", why, why_len))
            return -1;
        int *seen;
        if (strcmp(key, "descr") == 0)
            seen = &seen_descr;
        else if (strcmp(key, "fortran_order") == 0)
            seen = &seen_fortran;
        else if (strcmp(key, "shape") == 0)
            seen = &seen_shape;
        else
            return lowp_why_set(
                why, why_len,
                "header: unknown key '%s' at byte %zu (descr, fortran_order, shape expected)", key,
                at);
        if (*seen)
            return lowp_why_set(why, why_len, "header: key '%s' appears twice", key);
        *seen = 1;
        if (seen == &seen_descr) {
            skip_ws(p);
            if (peek(p) == '[')
                return lowp_why_set(
                    why, why_len,
                    "header: descr is a list (a structured dtype), which lowp does not read");
            if (parse_str(p, h->descr, sizeof h->descr, "descr", why, why_len))
                return -1;
        } else if (seen == &seen_fortran) {
            if (parse_bool(p, &h->fortran, why, why_len))
                return -1;
        } else if (parse_shape(p, &h->ndim, h->shape, why, why_len)) {
            return -1;
        }
        skip_ws(p);
        if (peek(p) == ',') {
            p->i++;
        } else if (peek(p) != '}') {
            return lowp_why_set(why, why_len, "header: expected ',' or '}' at byte %zu", p->i);
        }
    }
    skip_ws(p);
    if (p->i != p->n)
        return lowp_why_set(why, why_len, "header: unexpected text after the dict at byte %zu",
                            p->i);
    if (!seen_descr || !seen_fortran || !seen_shape)
        return lowp_why_set(why, why_len, "header: missing key '%s'",
                            !seen_descr     ? "descr"
                            : !seen_fortran ? "fortran_order"
                                            : "shape");
    return 0;
}

int lowp_npy_parse(const unsigned char *buf, size_t len, lowp_tensor *out, char *why,
                   size_t why_len)
{
    memset(out, 0, sizeof *out);
    if (len < 10)
        return lowp_why_set(why, why_len, "%zu bytes is too short for an .npy file (at least 10)",
                            len);
    if (memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return lowp_why_set(why, why_len,
                            "not an .npy file: the magic string \\x93NUMPY is missing");
    unsigned major = buf[6], minor = buf[7];
    if (!(minor == 0 && major >= 1 && major <= 3))
        return lowp_why_set(why, why_len, ".npy format version %u.%u is not 1.0, 2.0 or 3.0", major,
                            minor);
    size_t start, hlen;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else {
        if (len < 12)
            return lowp_why_set(
                why, why_len, "%zu bytes is too short for an .npy %u.0 preamble (12)", len, major);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = 12;
    }
    if (hlen > len - start)
        return lowp_why_set(why, why_len,
                            "the header length %zu runs past the end of the %zu-byte file", hlen,
                            len);
    if (hlen > LOWP_NPY_MAX_HEADER)
        return lowp_why_set(why, why_len,
                            "the header length %zu is more than the %u bytes lowp accepts", hlen,
                            LOWP_NPY_MAX_HEADER);
    npy_header h;
    memset(&h, 0, sizeof h);
    hparse p = {buf + start, hlen, 0, major < 3};
    if (parse_header(&p, &h, why, why_len))
        return -1;
    if (h.fortran)
        return lowp_why_set(why, why_len,
                            "fortran_order is True (column-major data); lowp reads C order only");
    lowp_dtype dt = LOWP_DT_U8;
    if (descr_to_dtype(h.descr, &dt, why, why_len))
        return -1;
    size_t count, nbytes;
    char sh[256];
    lowp_shape_text(sh, sizeof sh, h.ndim, h.shape, LOWP_SHAPE_TUPLE);
    if (lowp_shape_size(h.ndim, h.shape, lowp_dtype_size(dt), &count, &nbytes))
        return lowp_why_set(why, why_len, "shape %s of '%s' overflows size_t", sh, h.descr);
    size_t have = len - start - hlen;
    if (have < nbytes)
        return lowp_why_set(
            why, why_len,
            "the data is truncated: shape %s of '%s' needs %zu bytes, the file has %zu", sh,
            h.descr, nbytes, have);
    if (have > nbytes)
        return lowp_why_set(why, why_len,
                            "%zu bytes follow the %zu bytes of data that shape %s of '%s' needs",
                            have - nbytes, nbytes, sh, h.descr);
    if (lowp_tensor_alloc(out, "", dt, h.ndim, h.shape, why, why_len))
        return -1;
    if (nbytes)
        memcpy(out->data, buf + start + hlen, nbytes);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* writer: np.save's bytes                                                              */

int lowp_npy_header(const lowp_tensor *t, unsigned char **hdr, size_t *hdr_len, char *why,
                    size_t why_len)
{
    *hdr = NULL;
    *hdr_len = 0;
    if ((unsigned)t->dtype >= LOWP_DTYPE_COUNT)
        return lowp_why_set(why, why_len, "dtype %d is not a lowp dtype", (int)t->dtype);
    if (t->ndim < 0 || t->ndim > LOWP_TENSOR_MAX_DIMS)
        return lowp_why_set(why, why_len, "%d dimensions is outside 0..%d", t->ndim,
                            LOWP_TENSOR_MAX_DIMS);
    /* The dict with sorted keys and repr() values, then numpy's growth padding: spaces so
     * the first dimension could grow to 21 digits in place. */
    char dict[512];
    char sh[256];
    lowp_shape_text(sh, sizeof sh, t->ndim, t->shape, LOWP_SHAPE_TUPLE);
    int k = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     write_descr[t->dtype], sh);
    if (t->ndim > 0) {
        char first[32];
        int digits = snprintf(first, sizeof first, "%zu", t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
            dict[k++] = ' ';
        dict[k] = '\0';
    }
    /* hlen counts the final '\n'; the padding makes magic + version + length + header a
     * multiple of 64 (a full 64 when already aligned, as numpy does). */
    size_t dlen = (size_t)k, hl = dlen + 1;
    size_t len_bytes = 2;
    size_t pad = NPY_ALIGN - ((NPY_MAGIC_LEN + 2 + len_bytes + hl) % NPY_ALIGN);
    unsigned major = 1;
    if (hl + pad > 65535) { /* never for <= 8 dimensions, kept for the format's sake */
        len_bytes = 4;
        major = 2;
        pad = NPY_ALIGN - ((NPY_MAGIC_LEN + 2 + len_bytes + hl) % NPY_ALIGN);
    }
    size_t total = NPY_MAGIC_LEN + 2 + len_bytes + hl + pad;
    unsigned char *b = malloc(total);
    if (b == NULL)
        return lowp_why_set(why, why_len, "out of memory");
    memcpy(b, NPY_MAGIC, NPY_MAGIC_LEN);
    b[6] = (unsigned char)major;
    b[7] = 0;
    size_t field = hl + pad;
    for (size_t i = 0; i < len_bytes; i++)
        b[8 + i] = (unsigned char)(field >> (8 * i));
    size_t o = 8 + len_bytes;
    memcpy(b + o, dict, dlen);
    memset(b + o + dlen, ' ', pad);
    b[total - 1] = '\n';
    *hdr = b;
    *hdr_len = total;
    return 0;
}

int lowp_npy_emit(FILE *out, const lowp_tensor *t, char *why, size_t why_len)
{
    unsigned char *hdr;
    size_t hl;
    if (lowp_npy_header(t, &hdr, &hl, why, why_len))
        return -1;
    int bad = fwrite(hdr, 1, hl, out) != hl || (t->nbytes && fwrite(t->data, 1, t->nbytes, out) != t->nbytes);
    free(hdr);
    if (bad)
        return lowp_why_set(why, why_len, "write error");
    return 0;
}

int lowp_npy_serialize(const lowp_tensor *t, unsigned char **buf, size_t *len, char *why,
                       size_t why_len)
{
    unsigned char *hdr;
    size_t hl, total;
    *buf = NULL;
    *len = 0;
    if (lowp_npy_header(t, &hdr, &hl, why, why_len))
        return -1;
    if (__builtin_add_overflow(hl, t->nbytes, &total)) {
        free(hdr);
        return lowp_why_set(why, why_len, "the file size overflows size_t");
    }
    unsigned char *b = realloc(hdr, total ? total : 1);
    if (b == NULL) {
        free(hdr);
        return lowp_why_set(why, why_len, "out of memory");
    }
    if (t->nbytes)
        memcpy(b + hl, t->data, t->nbytes);
    *buf = b;
    *len = total;
    return 0;
}
