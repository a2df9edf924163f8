/* ref/model/src/tokenizer.c: byte-level BPE with the GPT-2 / smollm pre-tokenizers
 * (lowp/tokenizer.h states the algorithm).
 *
 * Data structures:
 *   - tokens: views of the file's strings; a hash map string -> id (open addressing, the
 *     first id of a repeated string wins);
 *   - byte_id[256]: the token of each byte's GPT-2 character, -1 when the vocabulary has
 *     none (SmolLM2's lacks 21: 0x04 0x06 0x13 0x14 0x16 0x1d 0xc0 0xc1 0xf1 0xf2 0xf5-0xff,
 *     bytes that UTF-8 never uses or control characters; what llama.cpp would do with one
 *     is not pinned down, so text holding one is refused, naming the byte);
 *   - merges: a hash map (left id, right id) -> (rank, merged id), built from the "A B"
 *     strings (split at the first space: byte characters never include U+0020).
 * BPE on a piece of n bytes is a min-heap of candidate pairs ordered by (rank, left
 * position), with stale entries skipped (their symbols were merged since): O(n log n), so
 * a long run without spaces costs no quadratic time. */
#include "lowp/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "lowp/why.h"
#include "unicode_table.h"

typedef struct pair_entry {
    uint64_t key;  /* left << 32 | right; 0 with rank < 0 marks an empty slot */
    int32_t rank, merged;
} pair_entry;

struct lowp_tokenizer {
    lowp_gguf_str *tokens;
    size_t n_tokens;
    int32_t *tok_slots; /* string hash map: token ids, -1 empty */
    size_t tok_cap;     /* power of two */
    pair_entry *pairs;
    size_t pair_cap;    /* power of two */
    int32_t byte_id[256];
    uint32_t byte_char[256];   /* GPT-2's bytes_to_unicode */
    int digits_split;          /* smollm: \p{N} split first */
    int32_t bos, eos;
};

static uint64_t hash_bytes(const char *p, uint64_t n)
{
    uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * UINT64_C(1099511628211);
    return h;
}

static uint64_t hash_u64(uint64_t x) /* splitmix64's finalizer */
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

static int32_t tok_find(const lowp_tokenizer *t, const char *p, uint64_t n)
{
    size_t m = t->tok_cap - 1;
    for (size_t i = (size_t)hash_bytes(p, n) & m;; i = (i + 1) & m) {
        int32_t id = t->tok_slots[i];
        if (id < 0)
            return -1;
        if (t->tokens[id].len == n && (n == 0 || memcmp(t->tokens[id].data, p, (size_t)n) == 0))
            return id;
    }
}

static void tok_insert(lowp_tokenizer *t, int32_t id)
{
    const lowp_gguf_str s = t->tokens[id];
    size_t m = t->tok_cap - 1;
    for (size_t i = (size_t)hash_bytes(s.data, s.len) & m;; i = (i + 1) & m) {
        int32_t o = t->tok_slots[i];
        if (o < 0) {
            t->tok_slots[i] = id;
            return;
        }
        if (t->tokens[o].len == s.len && (s.len == 0 || memcmp(t->tokens[o].data, s.data, (size_t)s.len) == 0))
            return; /* a repeated string: the first id stays */
    }
}

static const pair_entry *pair_find(const lowp_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t m = t->pair_cap - 1;
    for (size_t i = (size_t)hash_u64(key) & m;; i = (i + 1) & m) {
        const pair_entry *e = &t->pairs[i];
        if (e->rank < 0)
            return NULL;
        if (e->key == key)
            return e;
    }
}

/* Insert unless present (a repeated merge keeps its first, lowest rank). */
static void pair_insert(lowp_tokenizer *t, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t m = t->pair_cap - 1;
    for (size_t i = (size_t)hash_u64(key) & m;; i = (i + 1) & m) {
        pair_entry *e = &t->pairs[i];
        if (e->rank < 0) {
            e->key = key;
            e->rank = rank;
            e->merged = merged;
            return;
        }
        if (e->key == key)
            return;
    }
}

static size_t utf8_put(uint32_t c, char *o)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | c >> 6);
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12);
        o[1] = (char)(0x80 | (c >> 6 & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | c >> 18);
    o[1] = (char)(0x80 | (c >> 12 & 0x3f));
    o[2] = (char)(0x80 | (c >> 6 & 0x3f));
    o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, at most U+10FFFF. Returns the
 * sequence length and sets *c, or 0 for an invalid sequence. */
static size_t utf8_get(const unsigned char *p, size_t n, uint32_t *c)
{
    if (p[0] < 0x80) {
        *c = p[0];
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((p[0] & 0xe0) == 0xc0) { len = 2; v = p[0] & 0x1f; min = 0x80; }
    else if ((p[0] & 0xf0) == 0xe0) { len = 3; v = p[0] & 0x0f; min = 0x800; }
    else if ((p[0] & 0xf8) == 0xf0) { len = 4; v = p[0] & 0x07; min = 0x10000; }
    else return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *c = v;
    return len;
}

/* GPT-2's bytes_to_unicode: '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves, the
 * remaining 68 bytes to 256, 257, ... in increasing byte order. */
static void byte_chars(uint32_t out[256])
{
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
        out[b] = keep ? b : next++;
    }
}

void lowp_tokenizer_free(lowp_tokenizer *t)
{
    if (t == NULL)
        return;
    free(t->tokens);
    free(t->tok_slots);
    free(t->pairs);
    free(t);
}

static int32_t opt_id(const lowp_gguf *g, const char *key, size_t n)
{
    uint64_t v;
    if (lowp_gguf_get_uint(g, key, &v, NULL, 0) != 0 || v >= n)
        return -1;
    return (int32_t)v;
}

int lowp_tokenizer_load(const lowp_gguf *g, lowp_tokenizer **out, char *why, size_t why_len)
{
    *out = NULL;
    lowp_gguf_str model, pre;
    if (lowp_gguf_get_string(g, "tokenizer.ggml.model", &model, why, why_len))
        return -1;
    if (!lowp_gguf_str_eq(model, "gpt2"))
        return lowp_why_set(why, why_len, "tokenizer model '%.*s' is not supported (only 'gpt2', byte-level BPE)",
                            (int)(model.len < 40 ? model.len : 40), model.data);
    if (lowp_gguf_get_string(g, "tokenizer.ggml.pre", &pre, why, why_len))
        return -1;
    int digits;
    if (lowp_gguf_str_eq(pre, "smollm"))
        digits = 1;
    else if (lowp_gguf_str_eq(pre, "gpt2"))
        digits = 0;
    else
        return lowp_why_set(why, why_len, "pre-tokenizer '%.*s' is not supported (only 'smollm' and 'gpt2')",
                            (int)(pre.len < 40 ? pre.len : 40), pre.data);
    const lowp_gguf_kv *tk = lowp_gguf_find(g, "tokenizer.ggml.tokens"), *mk = lowp_gguf_find(g, "tokenizer.ggml.merges");
    if (tk == NULL || tk->type != LOWP_GGUF_ARRAY || tk->elem_type != LOWP_GGUF_STRING || tk->count == 0 ||
        tk->count > INT32_MAX)
        return lowp_why_set(why, why_len, "tokenizer.ggml.tokens is missing or not a non-empty array of strings");
    if (mk == NULL || mk->type != LOWP_GGUF_ARRAY || mk->elem_type != LOWP_GGUF_STRING || mk->count > INT32_MAX)
        return lowp_why_set(why, why_len, "tokenizer.ggml.merges is missing or not an array of strings");
    lowp_tokenizer *t = calloc(1, sizeof *t);
    lowp_gguf_str *merges = NULL;
    if (t == NULL)
        return lowp_why_set(why, why_len, "out of memory for the tokenizer");
    t->n_tokens = (size_t)tk->count;
    t->digits_split = digits;
    t->tok_cap = pow2_at_least(2 * t->n_tokens);
    t->pair_cap = pow2_at_least(2 * (size_t)mk->count);
    t->tokens = malloc(t->n_tokens * sizeof *t->tokens);
    t->tok_slots = malloc(t->tok_cap * sizeof *t->tok_slots);
    t->pairs = malloc(t->pair_cap * sizeof *t->pairs);
    merges = malloc(((size_t)mk->count + 1) * sizeof *merges);
    if (t->tokens == NULL || t->tok_slots == NULL || t->pairs == NULL || merges == NULL) {
        lowp_why_set(why, why_len, "out of memory for the tokenizer");
        goto fail;
    }
    memset(t->tok_slots, 0xff, t->tok_cap * sizeof *t->tok_slots);
    for (size_t i = 0; i < t->pair_cap; i++)
        t->pairs[i].rank = -1;
    if (lowp_gguf_array_strings(tk, t->tokens, why, why_len) || lowp_gguf_array_strings(mk, merges, why, why_len))
        goto fail;
    for (size_t i = 0; i < t->n_tokens; i++)
        tok_insert(t, (int32_t)i);
    byte_chars(t->byte_char);
    for (int b = 0; b < 256; b++) {
        char u[4];
        size_t n = utf8_put(t->byte_char[b], u);
        t->byte_id[b] = tok_find(t, u, n); /* -1: text holding the byte is refused */
    }
    char buf[512];
    for (size_t r = 0; r < (size_t)mk->count; r++) {
        lowp_gguf_str m = merges[r];
        const char *sp = m.len ? memchr(m.data, ' ', (size_t)m.len) : NULL;
        size_t la = sp ? (size_t)(sp - m.data) : 0, lb = sp ? (size_t)m.len - la - 1 : 0;
        int32_t a = sp ? tok_find(t, m.data, la) : -1, b = sp ? tok_find(t, sp + 1, lb) : -1, ab = -1;
        if (a >= 0 && b >= 0 && la + lb <= sizeof buf) {
            memcpy(buf, m.data, la);
            memcpy(buf + la, sp + 1, lb);
            ab = tok_find(t, buf, la + lb);
        }
        if (ab < 0) {
            lowp_why_set(why, why_len, "merge %zu ('%.*s') is not two tokens whose concatenation is a token", r,
                         (int)(m.len < 40 ? m.len : 40), m.data);
            goto fail;
        }
        pair_insert(t, a, b, (int32_t)r, ab);
    }
    t->bos = opt_id(g, "tokenizer.ggml.bos_token_id", t->n_tokens);
    t->eos = opt_id(g, "tokenizer.ggml.eos_token_id", t->n_tokens);
    free(merges);
    *out = t;
    return 0;
fail:
    free(merges);
    lowp_tokenizer_free(t);
    return -1;
}

size_t lowp_tokenizer_vocab_size(const lowp_tokenizer *t) { return t->n_tokens; }
int32_t lowp_tokenizer_bos(const lowp_tokenizer *t) { return t->bos; }
int32_t lowp_tokenizer_eos(const lowp_tokenizer *t) { return t->eos; }

/* ---- pre-tokenizer ---- */

enum { C_OTHER = 0, C_LETTER, C_NUMBER, C_SPACE };

/* The Unicode White_Space property (PropList.txt): 25 code points. */
static int is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

static int cls_of(uint32_t c)
{
    if (is_space(c))
        return C_SPACE;
    size_t lo = 0, hi = lowp_uc_n_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c > lowp_uc_ranges[mid].hi)
            lo = mid + 1;
        else if (c < lowp_uc_ranges[mid].lo)
            hi = mid;
        else
            return lowp_uc_ranges[mid].cls == 'L' ? C_LETTER : C_NUMBER;
    }
    return C_OTHER;
}

/* The length of the GPT-2 pattern's match at i within [i, e) (at least 1). */
static size_t gpt2_match(const uint32_t *cp, const unsigned char *cl, size_t i, size_t e)
{
    size_t j;
    if (cp[i] == '\'' && i + 1 < e) {
        uint32_t a = cp[i + 1], b = i + 2 < e ? cp[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return 3;
    }
    size_t k = i + (cp[i] == ' ' && i + 1 < e); /* after the optional space */
    for (int want = C_LETTER; want <= C_NUMBER; want++)
        if (cl[k] == want) { /* " ?\p{L}+" then " ?\p{N}+" */
            for (j = k; j < e && cl[j] == want; j++)
                ;
            return j - i;
        }
    if (cl[k] == C_OTHER) { /* " ?[^\s\p{L}\p{N}]+" */
        for (j = k; j < e && cl[j] == C_OTHER; j++)
            ;
        return j - i;
    }
    for (j = i; j < e && cl[j] == C_SPACE; j++)
        ;
    /* here cl[i] is a space (a space followed by a non-space was taken above) */
    if (j == e || j - i == 1)
        return j - i; /* "\s+(?!\S)" to the end, or "\s+" of one */
    return j - i - 1;   /* "\s+(?!\S)": all but the last, which stays for the next match */
}

int lowp_tokenize(const lowp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *why,
                  size_t why_len)
{
    *ids = NULL;
    *n = 0;
    const unsigned char *s = (const unsigned char *)text;
    uint32_t *cp = malloc((len + 1) * sizeof *cp);
    size_t *off = malloc((len + 1) * sizeof *off);
    unsigned char *cl = malloc(len + 1);
    size_t *starts = malloc((len + 1) * sizeof *starts), n_pieces = 0; /* at most one piece per code point */
    int32_t *out = malloc((len + 1) * sizeof *out); /* at most one token per byte */
    /* BPE scratch, one piece at a time: symbol ids, links, and the heap */
    int32_t *sym = malloc((len + 1) * sizeof *sym);
    int32_t *nxt = malloc((len + 1) * sizeof *nxt), *prv = malloc((len + 1) * sizeof *prv);
    struct cand { int32_t rank, left, right, lid, rid; } *heap = malloc((3 * len + 3) * sizeof *heap);
    int rc = -1;
    if (!cp || !off || !cl || !starts || !out || !sym || !nxt || !prv || !heap) {
        lowp_why_set(why, why_len, "out of memory tokenizing %zu bytes", len);
        goto done;
    }
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_get(s + i, len - i, &cp[m]);
        if (k == 0) {
            lowp_why_set(why, why_len, "the text is not valid UTF-8 at byte %zu", i);
            goto done;
        }
        for (size_t j = i; j < i + k; j++)
            if (t->byte_id[s[j]] < 0) {
                lowp_why_set(why, why_len, "the text holds byte 0x%02x (at byte %zu), which the vocabulary has "
                             "no token for", s[j], j);
                goto done;
            }
        off[m] = i;
        cl[m] = (unsigned char)cls_of(cp[m]);
        m++;
        i += k;
    }
    off[m] = len;
    cl[m] = C_OTHER; /* a sentinel: gpt2_match may look at cl[k] with k == e only when e == m */
    /* pieces: the \p{N} split (smollm), then the GPT-2 pattern within each */
    for (size_t a = 0; a < m;) {
        size_t b = a + 1;
        if (t->digits_split) {
            if (cl[a] != C_NUMBER)
                while (b < m && cl[b] != C_NUMBER)
                    b++;
        } else {
            b = m;
        }
        for (size_t i = a; i < b; i += gpt2_match(cp, cl, i, b))
            starts[n_pieces++] = i;
        a = b;
    }
    size_t no = 0;
    for (size_t p = 0; p < n_pieces; p++) {
        size_t b0 = off[starts[p]], b1 = p + 1 < n_pieces ? off[starts[p + 1]] : len, nb = b1 - b0;
        for (size_t i = 0; i < nb; i++) {
            sym[i] = t->byte_id[s[b0 + i]];
            prv[i] = (int32_t)i - 1;
            nxt[i] = i + 1 < nb ? (int32_t)(i + 1) : -1;
        }
        size_t hn = 0;
#define HLESS(x, y) ((x).rank < (y).rank || ((x).rank == (y).rank && (x).left < (y).left))
#define HPUSH(L, R)                                                                                         \
    do {                                                                                                    \
        const pair_entry *pe_ = pair_find(t, sym[L], sym[R]);                                               \
        if (pe_ != NULL) {                                                                                  \
            struct cand c_ = {pe_->rank, (int32_t)(L), (int32_t)(R), sym[L], sym[R]};                       \
            size_t h_ = hn++;                                                                               \
            while (h_ > 0 && HLESS(c_, heap[(h_ - 1) / 2])) {                                               \
                heap[h_] = heap[(h_ - 1) / 2];                                                              \
                h_ = (h_ - 1) / 2;                                                                          \
            }                                                                                               \
            heap[h_] = c_;                                                                                  \
        }                                                                                                   \
    } while (0)
        for (size_t i = 0; i + 1 < nb; i++)
            HPUSH(i, i + 1);
        while (hn > 0) {
            struct cand top = heap[0], last = heap[--hn];
            size_t h = 0; /* sift last down from the root */
            for (;;) {
                size_t c = 2 * h + 1;
                if (c >= hn)
                    break;
                if (c + 1 < hn && HLESS(heap[c + 1], heap[c]))
                    c++;
                if (!HLESS(heap[c], last))
                    break;
                heap[h] = heap[c];
                h = c;
            }
            if (hn > 0)
                heap[h] = last;
            /* stale: a side was merged away or changed since the candidate was pushed */
            if (sym[top.left] != top.lid || sym[top.right] != top.rid || nxt[top.left] != top.right)
                continue;
            const pair_entry *pe = pair_find(t, top.lid, top.rid);
            sym[top.left] = pe->merged;
            sym[top.right] = -1;
            nxt[top.left] = nxt[top.right];
            if (nxt[top.right] >= 0)
                prv[nxt[top.right]] = top.left;
            /* pushes: nb - 1 first, at most 2 per merge, merges < nb: the heap never exceeds 3 nb */
            if (prv[top.left] >= 0)
                HPUSH(prv[top.left], top.left);
            if (nxt[top.left] >= 0)
                HPUSH(top.left, nxt[top.left]);
        }
#undef HPUSH
#undef HLESS
        for (int32_t i = 0; i >= 0; i = nxt[i])
            out[no++] = sym[i];
    }
    *ids = out;
    *n = no;
    out = NULL;
    rc = 0;
done:
    free(cp);
    free(off);
    free(cl);
    free(starts);
    free(out);
    free(sym);
    free(nxt);
    free(prv);
    free(heap);
    return rc;
}

long lowp_token_text(const lowp_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (id < 0 || (size_t)id >= t->n_tokens)
        return -1;
    lowp_gguf_str s = t->tokens[id];
    const unsigned char *p = (const unsigned char *)s.data;
    size_t n = 0;
    for (size_t i = 0; i < s.len;) {
        uint32_t c;
        size_t k = utf8_get(p + i, (size_t)s.len - i, &c);
        char u[4];
        size_t un;
        if (k == 0) { /* not UTF-8: the byte as is */
            u[0] = (char)p[i];
            un = 1;
            k = 1;
        } else {
            int b = -1;
            for (int j = 0; j < 256 && b < 0; j++)
                if (t->byte_char[j] == c)
                    b = j;
            if (b >= 0) {
                u[0] = (char)b;
                un = 1;
            } else {
                un = utf8_put(c, u);
            }
        }
        for (size_t j = 0; j < un; j++, n++)
            if (n < cap)
                buf[n] = u[j];
        i += k;
    }
    return (long)n;
}
