/* ref/io/src/tensor_safetensors.c: the safetensors format, read and write, with its own strict
 * JSON parser (RFC 8259, no dependencies).
 *
 * Layout: N (uint64 LE), N bytes of UTF-8 JSON, then the data buffer. The JSON object maps
 * each tensor name to {"dtype": NAME, "shape": [d...], "data_offsets": [begin, end]} with
 * offsets relative to the data buffer, plus an optional "__metadata__": {string: string}.
 *
 * Reading is in two stages, so that nothing is allocated for tensor data before the header
 * is proved consistent with the bytes present:
 *   1. parse the header into a small DOM (bounded by the header size and LOWP_JSON_MAX_DEPTH);
 *   2. check it against the schema and the buffer (lowp/tensor.h lists every rule), then
 *      copy each tensor's bytes.
 * All positions, lengths and node indices fit in uint32_t because N <= 100,000,000. */
#include "lowp/tensor.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define META_KEY "__metadata__"

static int fail(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t why_len, const char *fmt, ...)
{
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

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
/* JSON: a DOM of nodes in one array, strings decoded into one arena                    */

enum { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };
#define J_NONE UINT32_MAX

typedef struct jnode {
    uint8_t type;
    uint32_t pos;            /* byte offset of the value in the header */
    uint32_t next;           /* next sibling, or J_NONE */
    uint32_t first;          /* J_ARR/J_OBJ: first child, or J_NONE */
    uint32_t count;          /* J_ARR/J_OBJ: number of children */
    uint32_t str, len;       /* J_STR: arena offset and length; J_NUM: source span */
    uint32_t key, key_len;   /* member of an object: its key (arena offset, length) */
} jnode;

typedef struct jparser {
    const unsigned char *s;
    uint32_t n, i;
    jnode *nodes;
    uint32_t n_nodes, cap_nodes;
    char *arena;             /* decoded strings, each NUL-terminated; never longer than the source */
    uint32_t arena_used;
    char *why;
    size_t why_len;
} jparser;

static int jfail(jparser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(jparser *p, const char *fmt, ...)
{
    if (p->why != NULL && p->why_len > 0) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(p->why, p->why_len, "header: %s at byte %u", msg, (unsigned)p->i);
    }
    return -1;
}

static void jskip_ws(jparser *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static uint32_t jnew(jparser *p, uint8_t type)
{
    if (p->n_nodes == p->cap_nodes) {
        uint32_t cap = p->cap_nodes ? p->cap_nodes * 2 : 64;
        jnode *nn = realloc(p->nodes, (size_t)cap * sizeof *nn);
        if (nn == NULL) {
            jfail(p, "out of memory for the JSON tree");
            return J_NONE;
        }
        p->nodes = nn;
        p->cap_nodes = cap;
    }
    jnode *j = &p->nodes[p->n_nodes];
    memset(j, 0, sizeof *j);
    j->type = type;
    j->pos = p->i;
    j->next = j->first = J_NONE;
    return p->n_nodes++;
}

static int hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

/* A string at p->i (the opening quote) decoded into the arena. */
static int jstring(jparser *p, uint32_t *off, uint32_t *len)
{
    p->i++;
    uint32_t start = p->arena_used, k = start;
    for (;;) {
        if (p->i >= p->n)
            return jfail(p, "unterminated string");
        unsigned char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20)
            return jfail(p, "control character 0x%02x inside a string", c);
        if (c != '\\') {
            p->arena[k++] = (char)c; /* UTF-8 was validated for the whole header */
            p->i++;
            continue;
        }
        if (p->i + 1 >= p->n)
            return jfail(p, "unterminated escape");
        unsigned char e = p->s[p->i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != 'u') {
            if (simple == NULL || e == '\0')
                return jfail(p, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
            static const char repl[] = "\"\\/\b\f\n\r\t";
            p->arena[k++] = repl[simple - "\"\\/bfnrt"];
            p->i += 2;
            continue;
        }
        uint32_t cp, lo;
        if (p->n - p->i < 6 || hex4(p->s + p->i + 2, &cp))
            return jfail(p, "invalid \\u escape");
        p->i += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            return jfail(p, "lone low surrogate \\u%04X", (unsigned)cp);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                hex4(p->s + p->i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return jfail(p, "high surrogate \\u%04X without its low surrogate", (unsigned)cp);
            p->i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp == 0)
            return jfail(p, "string contains U+0000, which lowp does not accept");
        /* UTF-8 of cp is never longer than its 6- or 12-byte escape */
        if (cp < 0x80) {
            p->arena[k++] = (char)cp;
        } else if (cp < 0x800) {
            p->arena[k++] = (char)(0xC0 | cp >> 6);
            p->arena[k++] = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            p->arena[k++] = (char)(0xE0 | cp >> 12);
            p->arena[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            p->arena[k++] = (char)(0x80 | (cp & 0x3f));
        } else {
            p->arena[k++] = (char)(0xF0 | cp >> 18);
            p->arena[k++] = (char)(0x80 | ((cp >> 12) & 0x3f));
            p->arena[k++] = (char)(0x80 | ((cp >> 6) & 0x3f));
            p->arena[k++] = (char)(0x80 | (cp & 0x3f));
        }
    }
    p->arena[k] = '\0';
    *off = start;
    *len = k - start;
    p->arena_used = k + 1;
    return 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, kept as its source span */
static int jnumber(jparser *p, uint32_t node)
{
    uint32_t start = p->i;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return jfail(p, "invalid number");
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            return jfail(p, "number with a leading zero");
    } else {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return jfail(p, "invalid fraction");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return jfail(p, "invalid exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    p->nodes[node].str = start;
    p->nodes[node].len = p->i - start;
    return 0;
}

static uint32_t jvalue(jparser *p, int depth);

/* Arrays and objects: children linked in order. */
static uint32_t jcontainer(jparser *p, int depth, int is_obj)
{
    if (depth >= LOWP_JSON_MAX_DEPTH) {
        jfail(p, "JSON nested deeper than %d levels", LOWP_JSON_MAX_DEPTH);
        return J_NONE;
    }
    uint32_t self = jnew(p, is_obj ? J_OBJ : J_ARR);
    if (self == J_NONE)
        return J_NONE;
    char close = is_obj ? '}' : ']';
    p->i++;
    jskip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return self;
    }
    uint32_t last = J_NONE;
    for (;;) {
        uint32_t key = 0, key_len = 0;
        jskip_ws(p);
        if (is_obj) {
            if (p->i >= p->n || p->s[p->i] != '"') {
                jfail(p, "expected a string key");
                return J_NONE;
            }
            if (jstring(p, &key, &key_len))
                return J_NONE;
            jskip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                jfail(p, "expected ':' after a key");
                return J_NONE;
            }
            p->i++;
        }
        uint32_t child = jvalue(p, depth + 1);
        if (child == J_NONE)
            return J_NONE;
        p->nodes[child].key = key;
        p->nodes[child].key_len = key_len;
        if (last == J_NONE)
            p->nodes[self].first = child;
        else
            p->nodes[last].next = child;
        last = child;
        p->nodes[self].count++;
        jskip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return self;
        }
        jfail(p, "expected ',' or '%c'", close);
        return J_NONE;
    }
}

static uint32_t jvalue(jparser *p, int depth)
{
    jskip_ws(p);
    if (p->i >= p->n) {
        jfail(p, "unexpected end of the JSON");
        return J_NONE;
    }
    unsigned char c = p->s[p->i];
    if (c == '{' || c == '[')
        return jcontainer(p, depth, c == '{');
    if (c == '"') {
        uint32_t node = jnew(p, J_STR);
        if (node == J_NONE)
            return J_NONE;
        uint32_t off, len;
        if (jstring(p, &off, &len))
            return J_NONE;
        p->nodes[node].str = off;
        p->nodes[node].len = len;
        return node;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        uint32_t node = jnew(p, J_NUM);
        if (node == J_NONE || jnumber(p, node))
            return J_NONE;
        return node;
    }
    static const struct {
        const char *word;
        uint8_t type;
    } lits[] = {{"true", J_TRUE}, {"false", J_FALSE}, {"null", J_NULL}};
    for (size_t k = 0; k < 3; k++) {
        size_t wl = strlen(lits[k].word);
        if (p->n - p->i >= wl && memcmp(p->s + p->i, lits[k].word, wl) == 0) {
            uint32_t node = jnew(p, lits[k].type);
            p->i += (uint32_t)wl;
            return node;
        }
    }
    jfail(p, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
    return J_NONE;
}

/* Duplicate keys among an object's members: sorted copies of (key, length) compared. */
typedef struct keyref {
    const char *key;
    uint32_t len, pos;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, m);
    if (c != 0)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int jcheck_duplicates(const jparser *p, uint32_t obj, char *why, size_t why_len)
{
    const jnode *o = &p->nodes[obj];
    if (o->count < 2)
        return 0;
    keyref *refs = malloc((size_t)o->count * sizeof *refs);
    if (refs == NULL)
        return fail(why, why_len, "out of memory checking keys");
    uint32_t k = 0;
    for (uint32_t c = o->first; c != J_NONE; c = p->nodes[c].next)
        refs[k++] = (keyref){p->arena + p->nodes[c].key, p->nodes[c].key_len, p->nodes[c].pos};
    qsort(refs, k, sizeof *refs, keyref_cmp);
    for (uint32_t i = 1; i < k; i++) {
        if (keyref_cmp(&refs[i - 1], &refs[i]) == 0) {
            char pn[52];
            printable(refs[i].key, pn, sizeof pn);
            free(refs);
            return fail(why, why_len, "header: key '%s' appears twice in one object", pn);
        }
    }
    free(refs);
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* schema                                                                               */

/* A JSON number that is a non-negative integer fitting in size_t. */
static int jsize(const jparser *p, uint32_t node, size_t *out)
{
    const jnode *j = &p->nodes[node];
    if (j->type != J_NUM)
        return -1;
    size_t v = 0;
    for (uint32_t i = 0; i < j->len; i++) {
        unsigned char c = p->s[j->str + i];
        if (c < '0' || c > '9')
            return -1; /* sign, fraction or exponent */
        if (__builtin_mul_overflow(v, (size_t)10, &v) || __builtin_add_overflow(v, (size_t)(c - '0'), &v))
            return -1;
    }
    *out = v;
    return 0;
}

typedef struct entry {
    uint32_t node;           /* the tensor's JSON object */
    const char *name;
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

static void shape_text(char *buf, size_t len, int ndim, const size_t *shape)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %zu" : "%zu", shape[i]);
    if (k < len)
        snprintf(buf + k, len - k, "]");
}

static int check_entry(const jparser *p, uint32_t node, entry *e, size_t data_len, char *why,
                       size_t why_len)
{
    char pn[52];
    const jnode *t = &p->nodes[node];
    printable(e->name, pn, sizeof pn);
    if (t->type != J_OBJ)
        return fail(why, why_len, "header: tensor '%s' is not a JSON object", pn);
    if (jcheck_duplicates(p, node, why, why_len))
        return -1;
    uint32_t dtype = J_NONE, shape = J_NONE, offs = J_NONE;
    for (uint32_t c = t->first; c != J_NONE; c = p->nodes[c].next) {
        const char *k = p->arena + p->nodes[c].key;
        if (strcmp(k, "dtype") == 0)
            dtype = c;
        else if (strcmp(k, "shape") == 0)
            shape = c;
        else if (strcmp(k, "data_offsets") == 0)
            offs = c;
        else {
            char pk[52];
            return fail(why, why_len, "header: tensor '%s' has an unknown key '%s' (dtype, shape, data_offsets expected)",
                        pn, printable(k, pk, sizeof pk));
        }
    }
    if (dtype == J_NONE || shape == J_NONE || offs == J_NONE)
        return fail(why, why_len, "header: tensor '%s' has no \"%s\"", pn,
                    dtype == J_NONE ? "dtype" : shape == J_NONE ? "shape" : "data_offsets");
    if (p->nodes[dtype].type != J_STR)
        return fail(why, why_len, "header: tensor '%s' has a dtype that is not a string", pn);
    const char *dn = p->arena + p->nodes[dtype].str;
    if (lowp_dtype_parse(dn, &e->dtype)) {
        char pd[52];
        return fail(why, why_len, "header: tensor '%s' has dtype '%s', which lowp does not read", pn,
                    printable(dn, pd, sizeof pd));
    }
    const jnode *s = &p->nodes[shape];
    if (s->type != J_ARR)
        return fail(why, why_len, "header: tensor '%s' has a shape that is not an array", pn);
    if (s->count > LOWP_TENSOR_MAX_DIMS)
        return fail(why, why_len, "header: tensor '%s' has %u dimensions, more than %d", pn,
                    (unsigned)s->count, LOWP_TENSOR_MAX_DIMS);
    e->ndim = 0;
    for (uint32_t c = s->first; c != J_NONE; c = p->nodes[c].next)
        if (jsize(p, c, &e->shape[e->ndim++]))
            return fail(why, why_len, "header: tensor '%s' has a shape entry that is not a non-negative integer in range", pn);
    const jnode *o = &p->nodes[offs];
    if (o->type != J_ARR || o->count != 2 || jsize(p, o->first, &e->begin) ||
        jsize(p, p->nodes[o->first].next, &e->end))
        return fail(why, why_len, "header: tensor '%s' has data_offsets that are not [begin, end] integers in range", pn);
    if (e->begin > e->end)
        return fail(why, why_len, "tensor '%s': data_offsets [%zu, %zu] run backwards", pn, e->begin, e->end);
    if (e->end > data_len)
        return fail(why, why_len, "tensor '%s': data_offsets [%zu, %zu] run past the %zu-byte data buffer", pn,
                    e->begin, e->end, data_len);
    size_t count, nbytes;
    char st[200];
    shape_text(st, sizeof st, e->ndim, e->shape);
    if (lowp_shape_size(e->ndim, e->shape, lowp_dtype_size(e->dtype), &count, &nbytes))
        return fail(why, why_len, "tensor '%s': shape %s of %s overflows size_t", pn, st, dn);
    if (nbytes != e->end - e->begin)
        return fail(why, why_len, "tensor '%s': shape %s of %s is %zu bytes but data_offsets [%zu, %zu] hold %zu",
                    pn, st, dn, nbytes, e->begin, e->end, e->end - e->begin);
    return 0;
}

static int read_metadata(const jparser *p, uint32_t node, lowp_tensor_file *out, char *why,
                         size_t why_len)
{
    const jnode *m = &p->nodes[node];
    if (m->type == J_NULL)
        return 0;
    if (m->type != J_OBJ)
        return fail(why, why_len, "header: __metadata__ is not an object of strings");
    if (jcheck_duplicates(p, node, why, why_len))
        return -1;
    if (m->count == 0)
        return 0;
    out->meta = calloc(m->count, sizeof *out->meta);
    if (out->meta == NULL)
        return fail(why, why_len, "out of memory for metadata");
    out->cap_meta = m->count;
    for (uint32_t c = m->first; c != J_NONE; c = p->nodes[c].next) {
        const char *k = p->arena + p->nodes[c].key;
        if (p->nodes[c].type != J_STR) {
            char pk[52];
            return fail(why, why_len, "header: metadata value for key '%s' is not a string", printable(k, pk, sizeof pk));
        }
        lowp_meta_entry *me = &out->meta[out->n_meta];
        me->key = malloc(p->nodes[c].key_len + 1u);
        me->value = malloc(p->nodes[c].len + 1u);
        if (me->key == NULL || me->value == NULL) {
            free(me->key);
            free(me->value);
            me->key = me->value = NULL;
            return fail(why, why_len, "out of memory for metadata");
        }
        memcpy(me->key, k, p->nodes[c].key_len + 1u);
        memcpy(me->value, p->arena + p->nodes[c].str, p->nodes[c].len + 1u);
        out->n_meta++;
    }
    return 0;
}

static int build(const jparser *p, uint32_t root, const unsigned char *data, size_t data_len,
                 lowp_tensor_file *out, char *why, size_t why_len)
{
    const jnode *r = &p->nodes[root];
    if (r->type != J_OBJ)
        return fail(why, why_len, "header: the JSON is not an object");
    if (jcheck_duplicates(p, root, why, why_len))
        return -1;
    uint32_t n = 0;
    for (uint32_t c = r->first; c != J_NONE; c = p->nodes[c].next) {
        if (strcmp(p->arena + p->nodes[c].key, META_KEY) == 0) {
            if (read_metadata(p, c, out, why, why_len))
                return -1;
        } else {
            n++;
        }
    }
    if (n == 0) {
        if (data_len != 0)
            return fail(why, why_len, "the %zu-byte data buffer belongs to no tensor", data_len);
        return 0;
    }
    entry *ents = calloc(n, sizeof *ents);
    entry **sorted = calloc(n, sizeof *sorted);
    out->tensors = calloc(n, sizeof *out->tensors);
    int rc = -1;
    if (ents == NULL || sorted == NULL || out->tensors == NULL) {
        fail(why, why_len, "out of memory for %u tensors", (unsigned)n);
        goto done;
    }
    out->cap_tensors = n;
    uint32_t k = 0;
    for (uint32_t c = r->first; c != J_NONE; c = p->nodes[c].next) {
        const char *name = p->arena + p->nodes[c].key;
        if (strcmp(name, META_KEY) == 0)
            continue;
        ents[k].node = c;
        ents[k].name = name;
        if (check_entry(p, c, &ents[k], data_len, why, why_len))
            goto done;
        sorted[k] = &ents[k];
        k++;
    }
    /* Sorted by offsets, the tensors must tile [0, data_len) exactly. */
    qsort(sorted, n, sizeof *sorted, entry_by_offsets);
    size_t expect = 0;
    for (uint32_t i = 0; i < n; i++) {
        char pn[52];
        const entry *e = sorted[i];
        printable(e->name, pn, sizeof pn);
        if (e->begin > expect) {
            fail(why, why_len, "bytes [%zu, %zu) of the data buffer belong to no tensor (a gap before '%s')",
                 expect, e->begin, pn);
            goto done;
        }
        if (e->begin < expect) {
            fail(why, why_len, "tensor '%s' at [%zu, %zu) overlaps the tensor before it, which ends at %zu",
                 pn, e->begin, e->end, expect);
            goto done;
        }
        expect = e->end;
    }
    if (expect != data_len) {
        fail(why, why_len, "the last %zu bytes of the data buffer belong to no tensor", data_len - expect);
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
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
        return fail(why, why_len, "%zu bytes is too short for a .safetensors file (at least 8)", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | buf[i];
    if (n > LOWP_SAFETENSORS_MAX_HEADER)
        return fail(why, why_len, "the header length %llu is more than the %u bytes safetensors allows",
                    (unsigned long long)n, LOWP_SAFETENSORS_MAX_HEADER);
    if (n > len - 8)
        return fail(why, why_len, "the header length %llu runs past the end of the %zu-byte file",
                    (unsigned long long)n, len);
    const unsigned char *h = buf + 8;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(h + i, (size_t)n - i);
        if (k == 0)
            return fail(why, why_len, "header: invalid UTF-8 at byte %zu", i);
        i += k;
    }
    jparser p;
    memset(&p, 0, sizeof p);
    p.s = h;
    p.n = (uint32_t)n;
    p.why = why;
    p.why_len = why_len;
    p.arena = malloc((size_t)n + 1);
    int rc = -1;
    if (p.arena == NULL) {
        fail(why, why_len, "out of memory for the header");
        goto done;
    }
    uint32_t root = jvalue(&p, 0);
    if (root == J_NONE)
        goto done;
    jskip_ws(&p);
    if (p.i != p.n) {
        jfail(&p, "unexpected text after the JSON value");
        goto done;
    }
    rc = build(&p, root, h + n, len - 8 - (size_t)n, out, why, why_len);
done:
    free(p.nodes);
    free(p.arena);
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
            return fail(why, why_len, "metadata entry '%s' is not valid UTF-8", printable(f->meta[i].key, pn, sizeof pn));
    for (size_t i = 0; i < f->n_meta; i++) /* few entries: a quadratic check is fine */
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->meta[i].key, f->meta[j].key) == 0)
                return fail(why, why_len, "metadata key '%s' appears twice", printable(f->meta[i].key, pn, sizeof pn));
    for (size_t i = 0; i < f->n_tensors; i++) {
        const lowp_tensor *t = &f->tensors[i];
        printable(t->name, pn, sizeof pn);
        if (!valid_utf8(t->name))
            return fail(why, why_len, "tensor name '%s' is not valid UTF-8", pn);
        if (strcmp(t->name, META_KEY) == 0)
            return fail(why, why_len, "a tensor cannot be named %s", META_KEY);
        if ((unsigned)t->dtype >= LOWP_DTYPE_COUNT || t->ndim < 0 || t->ndim > LOWP_TENSOR_MAX_DIMS)
            return fail(why, why_len, "tensor '%s' has an invalid dtype or rank", pn);
        size_t count, nbytes;
        if (lowp_shape_size(t->ndim, t->shape, lowp_dtype_size(t->dtype), &count, &nbytes) ||
            nbytes != t->nbytes)
            return fail(why, why_len, "tensor '%s' has a byte size that does not match its shape", pn);
    }
    wkey *keys = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *keys);
    if (keys == NULL)
        return fail(why, why_len, "out of memory");
    for (size_t i = 0; i < f->n_tensors; i++)
        keys[i] = (wkey){f->tensors[i].name, f->tensors[i].dtype, i};
    qsort(keys, f->n_tensors, sizeof *keys, by_name);
    for (size_t i = 1; i < f->n_tensors; i++) {
        if (strcmp(keys[i - 1].name, keys[i].name) == 0) {
            printable(keys[i].name, pn, sizeof pn);
            free(keys);
            return fail(why, why_len, "two tensors are named '%s'", pn);
        }
    }
    qsort(keys, f->n_tensors, sizeof *keys, by_dtype_then_name);
    size_t *idx = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *idx);
    if (idx == NULL) {
        free(keys);
        return fail(why, why_len, "out of memory");
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
            return fail(why, why_len, "the data buffer size overflows size_t");
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
        return fail(why, why_len, "out of memory for the header");
    }
    uint64_t hl = (uint64_t)(s.n - 8);
    if (hl > LOWP_SAFETENSORS_MAX_HEADER) {
        free(s.b);
        free(idx);
        return fail(why, why_len, "the header would be %llu bytes, more than safetensors allows",
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

int lowp_safetensors_emit(FILE *out, const lowp_tensor_file *f, char *why, size_t why_len)
{
    unsigned char *hdr;
    size_t hl;
    size_t *order = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (order == NULL)
        return fail(why, why_len, "out of memory");
    if (lowp_safetensors_header(f, &hdr, &hl, order, why, why_len)) {
        free(order);
        return -1;
    }
    int bad = fwrite(hdr, 1, hl, out) != hl;
    for (size_t i = 0; i < f->n_tensors && !bad; i++) {
        const lowp_tensor *t = &f->tensors[order[i]];
        bad = t->nbytes && fwrite(t->data, 1, t->nbytes, out) != t->nbytes;
    }
    free(hdr);
    free(order);
    if (bad)
        return fail(why, why_len, "write error");
    return 0;
}

int lowp_safetensors_serialize(const lowp_tensor_file *f, unsigned char **buf, size_t *len,
                               char *why, size_t why_len)
{
    *buf = NULL;
    *len = 0;
    unsigned char *hdr;
    size_t hl, total;
    size_t *order = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *order);
    if (order == NULL)
        return fail(why, why_len, "out of memory");
    if (lowp_safetensors_header(f, &hdr, &hl, order, why, why_len)) {
        free(order);
        return -1;
    }
    total = hl;
    for (size_t i = 0; i < f->n_tensors; i++)
        total += f->tensors[i].nbytes; /* the header check proved the sum fits */
    unsigned char *b = realloc(hdr, total);
    if (b == NULL) {
        free(hdr);
        free(order);
        return fail(why, why_len, "out of memory");
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
