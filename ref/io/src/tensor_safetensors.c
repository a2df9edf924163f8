/* ref/io/src/tensor_safetensors.c: the safetensors format, read and write. The header's JSON
 * is parsed by jansson (RFC 8259); lowp's limits are checked around it.
 *
 * Layout: N (uint64 LE), N bytes of UTF-8 JSON, then the data buffer. The JSON object maps
 * each tensor name to {"dtype": NAME, "shape": [d...], "data_offsets": [begin, end]} with
 * offsets relative to the data buffer, plus an optional "__metadata__": {string: string}.
 *
 * Reading is in two stages, so that nothing is allocated for tensor data before the header
 * is proved consistent with the bytes present:
 *   1. check the framing (N <= LOWP_SAFETENSORS_MAX_HEADER, N within the file), UTF-8, no
 *      NUL byte and the nesting depth (<= LOWP_JSON_MAX_DEPTH) on the raw bytes, then parse
 *      them with jansson (duplicate keys and \u0000 refused);
 *   2. check the tree against the schema and the buffer (lowp/tensor.h lists every rule),
 *      then copy each tensor's bytes.
 * The writer is lowp's own: it must give the bytes the safetensors crate (serde_json) gives. */
#include "lowp/tensor.h"
#include "lowp/why.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define META_KEY "__metadata__"

/* A name made fit for a one-line message: at most 48 bytes, control characters as '?'. */
static const char *printable(const char *name, char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = name; *p != '\0' && n + 4 < len; p++)
        buf[n++] = ((unsigned char)*p < 0x20 || *p == 0x7f) ? '?' : *p;
    if (name[n] != '\0') {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if invalid: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static int valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0)
            return 0;
        i += k;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------- */
/* JSON: parsed by jansson, inside lowp's own limits                                    */

/* Nesting depth of the header, counted on the raw bytes before jansson sees them, so that
 * LOWP_JSON_MAX_DEPTH (not jansson's compile-time JSON_PARSER_MAX_DEPTH, 2048 in Debian's
 * build) bounds the tree. Brackets inside strings do not count; an escape skips the byte
 * after the backslash. On malformed text the count may be off, but such text is then
 * refused by jansson anyway, whose own depth limit still bounds its recursion. */
static int check_depth(const unsigned char *h, size_t n, char *why, size_t why_len)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = h[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > LOWP_JSON_MAX_DEPTH)
                return lowp_why_set(why, why_len, "header: JSON nested deeper than %d levels at byte %zu",
                            LOWP_JSON_MAX_DEPTH, i);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return 0;
}

/* jansson's refusal as one line: lowp's words for the class of error, then jansson's own
 * text (which quotes the offending token; control characters in it become '?'). */
static int json_refusal(const json_error_t *e, char *why, size_t why_len)
{
    const char *what;
    switch (json_error_code(e)) {
    case json_error_out_of_memory: what = "out of memory for the JSON tree"; break;
    case json_error_stack_overflow: what = "JSON nested too deep"; break;
    case json_error_invalid_utf8: what = "invalid UTF-8"; break;
    case json_error_premature_end_of_input: what = "unexpected end of the JSON"; break;
    case json_error_end_of_input_expected: what = "unexpected text after the JSON value"; break;
    case json_error_null_character:
    case json_error_null_byte_in_key: what = "string contains U+0000, which lowp does not accept"; break;
    case json_error_duplicate_key: what = "a key appears twice in one object"; break;
    case json_error_numeric_overflow: what = "a number out of range"; break;
    default: what = "invalid JSON"; break;
    }
    char text[JSON_ERROR_TEXT_LENGTH];
    snprintf(text, sizeof text, "%s", e->text);
    for (char *c = text; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return lowp_why_set(why, why_len, "header: %s at byte %d (%s)", what, e->position, text);
}

/* ---------------------------------------------------------------------------------- */
/* schema                                                                               */

/* A JSON integer that is non-negative. jansson holds integers exactly as json_int_t (64-bit
 * signed) and refuses larger ones at parse time ("a number out of range"), so shape entries
 * and data offsets are exact up to 2^63-1; no file has a byte offset beyond that. A
 * fraction or exponent makes a real, which is refused here. */
static int jsize(const json_t *j, size_t *out)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return -1;
    *out = (size_t)json_integer_value(j);
    return 0;
}

typedef struct entry {
    const char *name;        /* a key of the JSON tree, valid while the tree lives */
    lowp_dtype dtype;
    int ndim;
    size_t shape[LOWP_TENSOR_MAX_DIMS];
    size_t begin, end;
} entry;

static int entry_by_offsets(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin)
        return (x->begin > y->begin) - (x->begin < y->begin);
    return (x->end > y->end) - (x->end < y->end);
}

static int check_entry(json_t *t, entry *e, size_t data_len, char *why, size_t why_len)
{
    char pn[52];
    printable(e->name, pn, sizeof pn);
    if (!json_is_object(t))
        return lowp_why_set(why, why_len, "header: tensor '%s' is not a JSON object", pn);
    json_t *dtype = NULL, *shape = NULL, *offs = NULL;
    const char *k;
    json_t *v;
    json_object_foreach(t, k, v) {
        if (strcmp(k, "dtype") == 0)
            dtype = v;
        else if (strcmp(k, "shape") == 0)
            shape = v;
        else if (strcmp(k, "data_offsets") == 0)
            offs = v;
        else {
            char pk[52];
            return lowp_why_set(why, why_len, "header: tensor '%s' has an unknown key '%s' (dtype, shape, data_offsets expected)",
                        pn, printable(k, pk, sizeof pk));
        }
    }
    if (dtype == NULL || shape == NULL || offs == NULL)
        return lowp_why_set(why, why_len, "header: tensor '%s' has no \"%s\"", pn,
                    dtype == NULL ? "dtype" : shape == NULL ? "shape" : "data_offsets");
    if (!json_is_string(dtype))
        return lowp_why_set(why, why_len, "header: tensor '%s' has a dtype that is not a string", pn);
    const char *dn = json_string_value(dtype);
    if (lowp_dtype_parse(dn, &e->dtype)) {
        char pd[52];
        return lowp_why_set(why, why_len, "header: tensor '%s' has dtype '%s', which lowp does not read", pn,
                    printable(dn, pd, sizeof pd));
    }
    if (!json_is_array(shape))
        return lowp_why_set(why, why_len, "header: tensor '%s' has a shape that is not an array", pn);
    if (json_array_size(shape) > LOWP_TENSOR_MAX_DIMS)
        return lowp_why_set(why, why_len, "header: tensor '%s' has %zu dimensions, more than %d", pn,
                    json_array_size(shape), LOWP_TENSOR_MAX_DIMS);
    e->ndim = (int)json_array_size(shape);
    for (int d = 0; d < e->ndim; d++)
        if (jsize(json_array_get(shape, (size_t)d), &e->shape[d]))
            return lowp_why_set(why, why_len, "header: tensor '%s' has a shape entry that is not a non-negative integer in range", pn);
    if (!json_is_array(offs) || json_array_size(offs) != 2 || jsize(json_array_get(offs, 0), &e->begin) ||
        jsize(json_array_get(offs, 1), &e->end))
        return lowp_why_set(why, why_len, "header: tensor '%s' has data_offsets that are not [begin, end] integers in range", pn);
    if (e->begin > e->end)
        return lowp_why_set(why, why_len, "tensor '%s': data_offsets [%zu, %zu] run backwards", pn, e->begin, e->end);
    if (e->end > data_len)
        return lowp_why_set(why, why_len, "tensor '%s': data_offsets [%zu, %zu] run past the %zu-byte data buffer", pn,
                    e->begin, e->end, data_len);
    size_t count, nbytes;
    char st[200];
    lowp_shape_text(st, sizeof st, e->ndim, e->shape, LOWP_SHAPE_JSON);
    if (lowp_shape_size(e->ndim, e->shape, lowp_dtype_size(e->dtype), &count, &nbytes))
        return lowp_why_set(why, why_len, "tensor '%s': shape %s of %s overflows size_t", pn, st, dn);
    if (nbytes != e->end - e->begin)
        return lowp_why_set(why, why_len, "tensor '%s': shape %s of %s is %zu bytes but data_offsets [%zu, %zu] hold %zu",
                    pn, st, dn, nbytes, e->begin, e->end, e->end - e->begin);
    return 0;
}

static int read_metadata(json_t *m, lowp_tensor_file *out, char *why, size_t why_len)
{
    if (json_is_null(m))
        return 0;
    if (!json_is_object(m))
        return lowp_why_set(why, why_len, "header: __metadata__ is not an object of strings");
    size_t n = json_object_size(m);
    if (n == 0)
        return 0;
    out->meta = calloc(n, sizeof *out->meta);
    if (out->meta == NULL)
        return lowp_why_set(why, why_len, "out of memory for metadata");
    out->cap_meta = n;
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) {
        if (!json_is_string(v)) {
            char pk[52];
            return lowp_why_set(why, why_len, "header: metadata value for key '%s' is not a string", printable(k, pk, sizeof pk));
        }
        /* no U+0000 inside (jansson refuses it without JSON_ALLOW_NUL): C strings suffice */
        lowp_meta_entry *me = &out->meta[out->n_meta];
        size_t kl = strlen(k), vl = json_string_length(v);
        me->key = malloc(kl + 1u);
        me->value = malloc(vl + 1u);
        if (me->key == NULL || me->value == NULL) {
            free(me->key);
            free(me->value);
            me->key = me->value = NULL;
            return lowp_why_set(why, why_len, "out of memory for metadata");
        }
        memcpy(me->key, k, kl + 1u);
        memcpy(me->value, json_string_value(v), vl + 1u);
        out->n_meta++;
    }
    return 0;
}

static int build(json_t *root, const unsigned char *data, size_t data_len, lowp_tensor_file *out,
                 char *why, size_t why_len)
{
    if (!json_is_object(root))
        return lowp_why_set(why, why_len, "header: the JSON is not an object");
    size_t n = 0;
    const char *key;
    json_t *val;
    /* jansson keeps an object's keys in the order of the text: tensors come out in that order */
    json_object_foreach(root, key, val) {
        if (strcmp(key, META_KEY) == 0) {
            if (read_metadata(val, out, why, why_len))
                return -1;
        } else {
            n++;
        }
    }
    if (n == 0) {
        if (data_len != 0)
            return lowp_why_set(why, why_len, "the %zu-byte data buffer belongs to no tensor", data_len);
        return 0;
    }
    entry *ents = calloc(n, sizeof *ents);
    entry **sorted = calloc(n, sizeof *sorted);
    out->tensors = calloc(n, sizeof *out->tensors);
    int rc = -1;
    if (ents == NULL || sorted == NULL || out->tensors == NULL) {
        lowp_why_set(why, why_len, "out of memory for %zu tensors", n);
        goto done;
    }
    out->cap_tensors = n;
    size_t k = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, META_KEY) == 0)
            continue;
        ents[k].name = key;
        if (check_entry(val, &ents[k], data_len, why, why_len))
            goto done;
        sorted[k] = &ents[k];
        k++;
    }
    /* Sorted by offsets, the tensors must tile [0, data_len) exactly. */
    qsort(sorted, n, sizeof *sorted, entry_by_offsets);
    size_t expect = 0;
    for (size_t i = 0; i < n; i++) {
        char pn[52];
        const entry *e = sorted[i];
        printable(e->name, pn, sizeof pn);
        if (e->begin > expect) {
            lowp_why_set(why, why_len, "bytes [%zu, %zu) of the data buffer belong to no tensor (a gap before '%s')",
                 expect, e->begin, pn);
            goto done;
        }
        if (e->begin < expect) {
            lowp_why_set(why, why_len, "tensor '%s' at [%zu, %zu) overlaps the tensor before it, which ends at %zu",
                 pn, e->begin, e->end, expect);
            goto done;
        }
        expect = e->end;
    }
    if (expect != data_len) {
        lowp_why_set(why, why_len, "the last %zu bytes of the data buffer belong to no tensor", data_len - expect);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        lowp_tensor *t = &out->tensors[i];
        if (lowp_tensor_alloc(t, ents[i].name, ents[i].dtype, ents[i].ndim, ents[i].shape, why, why_len))
            goto done;
        out->n_tensors++;
        if (t->nbytes)
            memcpy(t->data, data + ents[i].begin, t->nbytes);
    }
    rc = 0;
done:
    free(ents);
    free(sorted);
    return rc;
}

int lowp_safetensors_parse(const unsigned char *buf, size_t len, lowp_tensor_file *out,
                           char *why, size_t why_len)
{
    lowp_tensor_file_init(out);
    if (len < 8)
        return lowp_why_set(why, why_len, "%zu bytes is too short for a .safetensors file (at least 8)", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | buf[i];
    if (n > LOWP_SAFETENSORS_MAX_HEADER)
        return lowp_why_set(why, why_len, "the header length %llu is more than the %u bytes safetensors allows",
                    (unsigned long long)n, LOWP_SAFETENSORS_MAX_HEADER);
    if (n > len - 8)
        return lowp_why_set(why, why_len, "the header length %llu runs past the end of the %zu-byte file",
                    (unsigned long long)n, len);
    /* lowp's limits first, with lowp's messages: UTF-8 (jansson checks it too, but names no
     * byte), a NUL byte (jansson would take it for the end of the text), the depth. */
    const unsigned char *h = buf + 8;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(h + i, (size_t)n - i);
        if (k == 0)
            return lowp_why_set(why, why_len, "header: invalid UTF-8 at byte %zu", i);
        if (h[i] == 0)
            return lowp_why_set(why, why_len, "header: a NUL byte at byte %zu", i);
        i += k;
    }
    if (check_depth(h, (size_t)n, why, why_len))
        return -1;
    /* JSON_REJECT_DUPLICATES: a key twice in one object is refused (the safetensors crate
     * keeps the last; lowp refuses rather than guess). JSON_DECODE_ANY: a root that is not
     * an object gets the schema's message below. No JSON_ALLOW_NUL: \u0000 is refused. */
    json_error_t err;
    json_t *root = json_loadb((const char *)h, (size_t)n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (root == NULL)
        return json_refusal(&err, why, why_len);
    int rc = build(root, h + n, len - 8 - (size_t)n, out, why, why_len);
    json_decref(root);
    if (rc)
        lowp_tensor_file_free(out);
    return rc;
}
/* ---------------------------------------------------------------------------------- */
/* writer                                                                               */

typedef struct sbuf {
    char *b;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *s, const char *x, size_t len)
{
    if (s->oom)
        return;
    if (s->n + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->n + len + 1)
            cap *= 2;
        char *nb = realloc(s->b, cap);
        if (nb == NULL) {
            s->oom = 1;
            return;
        }
        s->b = nb;
        s->cap = cap;
    }
    memcpy(s->b + s->n, x, len);
    s->n += len;
    s->b[s->n] = '\0';
}

static void sb_str(sbuf *s, const char *x)
{
    sb_put(s, x, strlen(x));
}

/* A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other controls as \u00xx. */
static void sb_json(sbuf *s, const char *x)
{
    sb_put(s, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)x; *c; c++) {
        char esc[8];
        switch (*c) {
        case '"': sb_put(s, "\\\"", 2); break;
        case '\\': sb_put(s, "\\\\", 2); break;
        case '\b': sb_put(s, "\\b", 2); break;
        case '\f': sb_put(s, "\\f", 2); break;
        case '\n': sb_put(s, "\\n", 2); break;
        case '\r': sb_put(s, "\\r", 2); break;
        case '\t': sb_put(s, "\\t", 2); break;
        default:
            if (*c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *c);
                sb_put(s, esc, 6);
            } else {
                sb_put(s, (const char *)c, 1);
            }
        }
    }
    sb_put(s, "\"", 1);
}

/* Sort keys for the writer: the name check and the safetensors crate's data order. */
typedef struct wkey {
    const char *name;
    lowp_dtype dtype;
    size_t index;
} wkey;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const wkey *)a)->name, ((const wkey *)b)->name);
}

/* dtype descending (the enum order), then name ascending (bytewise, as Rust's String) */
static int by_dtype_then_name(const void *a, const void *b)
{
    const wkey *x = a, *y = b;
    if (x->dtype != y->dtype)
        return x->dtype < y->dtype ? 1 : -1;
    return strcmp(x->name, y->name);
}

int lowp_safetensors_header(const lowp_tensor_file *f, unsigned char **hdr, size_t *hdr_len,
                            size_t *order, char *why, size_t why_len)
{
    *hdr = NULL;
    *hdr_len = 0;
    char pn[52];
    for (size_t i = 0; i < f->n_meta; i++)
        if (!valid_utf8(f->meta[i].key) || !valid_utf8(f->meta[i].value))
            return lowp_why_set(why, why_len, "metadata entry '%s' is not valid UTF-8", printable(f->meta[i].key, pn, sizeof pn));
    for (size_t i = 0; i < f->n_meta; i++) /* few entries: a quadratic check is fine */
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->meta[i].key, f->meta[j].key) == 0)
                return lowp_why_set(why, why_len, "metadata key '%s' appears twice", printable(f->meta[i].key, pn, sizeof pn));
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lowp_tensor *t = &f->tensors[i];
        printable(t->name, pn, sizeof pn);
        if (!valid_utf8(t->name))
            return lowp_why_set(why, why_len, "tensor name '%s' is not valid UTF-8", pn);
        if (strcmp(t->name, META_KEY) == 0)
            return lowp_why_set(why, why_len, "a tensor cannot be named %s", META_KEY);
        if ((unsigned)t->dtype >= LOWP_DTYPE_COUNT || t->ndim < 0 || t->ndim > LOWP_TENSOR_MAX_DIMS)
            return lowp_why_set(why, why_len, "tensor '%s' has an invalid dtype or rank", pn);
        size_t count, nbytes;
        if (lowp_shape_size(t->ndim, t->shape, lowp_dtype_size(t->dtype), &count, &nbytes) ||
            nbytes != t->nbytes)
            return lowp_why_set(why, why_len, "tensor '%s' has a byte size that does not match its shape", pn);
    }
    wkey *keys = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *keys);
    if (keys == NULL)
        return lowp_why_set(why, why_len, "out of memory");
    for (size_t i = 0; i < f->n_tensors; i++)
        keys[i] = (wkey){f->tensors[i].name, f->tensors[i].dtype, i};
    qsort(keys, f->n_tensors, sizeof *keys, by_name);
    for (size_t i = 1; i < f->n_tensors; i++) {
        if (strcmp(keys[i - 1].name, keys[i].name) == 0) {
            printable(keys[i].name, pn, sizeof pn);
            free(keys);
            return lowp_why_set(why, why_len, "two tensors are named '%s'", pn);
        }
    }
    qsort(keys, f->n_tensors, sizeof *keys, by_dtype_then_name);
    size_t *idx = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *idx);
    if (idx == NULL) {
        free(keys);
        return lowp_why_set(why, why_len, "out of memory");
    }
    for (size_t i = 0; i < f->n_tensors; i++)
        idx[i] = keys[i].index;
    free(keys);

    sbuf s = {0};
    sb_put(&s, "        ", 8); /* the length, filled in below */
    sb_put(&s, "{", 1);
    int first = 1;
    if (f->n_meta > 0) {
        sb_json(&s, META_KEY);
        sb_put(&s, ":{", 2);
        for (size_t i = 0; i < f->n_meta; i++) {
            if (i)
                sb_put(&s, ",", 1);
            sb_json(&s, f->meta[i].key);
            sb_put(&s, ":", 1);
            sb_json(&s, f->meta[i].value);
        }
        sb_put(&s, "}", 1);
        first = 0;
    }
    size_t off = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lowp_tensor *t = &f->tensors[idx[i]];
        char num[64];
        if (!first)
            sb_put(&s, ",", 1);
        first = 0;
        sb_json(&s, t->name);
        sb_str(&s, ":{\"dtype\":");
        sb_json(&s, lowp_dtype_name(t->dtype));
        sb_str(&s, ",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, d ? ",%zu" : "%zu", t->shape[d]);
            sb_str(&s, num);
        }
        size_t end;
        if (__builtin_add_overflow(off, t->nbytes, &end)) {
            free(s.b);
            free(idx);
            return lowp_why_set(why, why_len, "the data buffer size overflows size_t");
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", off, end);
        sb_str(&s, num);
        off = end;
    }
    sb_put(&s, "}", 1);
    while ((s.n - 8) % 8 != 0) /* pad with spaces so the data starts 8-aligned */
        sb_put(&s, " ", 1);
    if (s.oom) {
        free(s.b);
        free(idx);
        return lowp_why_set(why, why_len, "out of memory for the header");
    }
    uint64_t hl = (uint64_t)(s.n - 8);
    if (hl > LOWP_SAFETENSORS_MAX_HEADER) {
        free(s.b);
        free(idx);
        return lowp_why_set(why, why_len, "the header would be %llu bytes, more than safetensors allows",
                    (unsigned long long)hl);
    }
    for (int i = 0; i < 8; i++)
        s.b[i] = (char)(hl >> (8 * i));
    if (order != NULL)
        memcpy(order, idx, f->n_tensors * sizeof *idx);
    free(idx);
    *hdr = (unsigned char *)s.b;
    *hdr_len = s.n;
    return 0;
}

/* lowp_safetensors_header with the order it lays the data out in: *hdr and *order are
 * malloc'd (the caller frees both) on success; on failure nothing is left allocated. */
static int header_and_order(const lowp_tensor_file *f, unsigned char **hdr, size_t *hl,
                            size_t **order, char *why, size_t why_len)
{
    *order = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof **order);
    if (*order == NULL)
        return lowp_why_set(why, why_len, "out of memory");
    if (lowp_safetensors_header(f, hdr, hl, *order, why, why_len)) {
        free(*order);
        *order = NULL;
        return -1;
    }
    return 0;
}

int lowp_safetensors_emit(FILE *out, const lowp_tensor_file *f, char *why, size_t why_len)
{
    unsigned char *hdr;
    size_t hl, *order;
    if (header_and_order(f, &hdr, &hl, &order, why, why_len))
        return -1;
    int bad = fwrite(hdr, 1, hl, out) != hl;
    for (size_t i = 0; i < f->n_tensors && !bad; i++) {
        const lowp_tensor *t = &f->tensors[order[i]];
        bad = t->nbytes && fwrite(t->data, 1, t->nbytes, out) != t->nbytes;
    }
    free(hdr);
    free(order);
    if (bad)
        return lowp_why_set(why, why_len, "write error");
    return 0;
}

int lowp_safetensors_serialize(const lowp_tensor_file *f, unsigned char **buf, size_t *len,
                               char *why, size_t why_len)
{
    *buf = NULL;
    *len = 0;
    unsigned char *hdr;
    size_t hl, total, *order;
    if (header_and_order(f, &hdr, &hl, &order, why, why_len))
        return -1;
    total = hl;
    for (size_t i = 0; i < f->n_tensors; i++)
        total += f->tensors[i].nbytes; /* the header check proved the sum fits */
    unsigned char *b = realloc(hdr, total);
    if (b == NULL) {
        free(hdr);
        free(order);
        return lowp_why_set(why, why_len, "out of memory");
    }
    size_t o = hl;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lowp_tensor *t = &f->tensors[order[i]];
        if (t->nbytes)
            memcpy(b + o, t->data, t->nbytes);
        o += t->nbytes;
    }
    free(order);
    *buf = b;
    *len = total;
    return 0;
}
