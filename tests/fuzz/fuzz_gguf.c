/* tests/fuzz/fuzz_gguf.c: libFuzzer target for the GGUF reader (lowp_gguf_parse) and the
 * dequantizers.
 *
 * Properties checked on every input, beyond "no crash, no sanitizer report":
 *   - a refusal comes with a non-empty one-line reason and leaves the result empty;
 *   - an accepted file's tables point inside the input: every key, value, tensor name and
 *     tensor's data lies within [data, data + size), tensor data at the alignment;
 *   - every string array can be listed and every integer array read; every tensor of a
 *     type lowp dequantizes is dequantized (reading exactly its bytes: ASan bounds it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const uint8_t *data, size_t size, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    if (q < data || q > data + size || n > (uint64_t)(data + size - q))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lowp_gguf g;
    char why[512] = "";
    if (lowp_gguf_parse(data, size, &g, why, sizeof why) != 0) {
        if (why[0] == '\0' || strchr(why, '\n') != NULL || g.kv != NULL || g.tensors != NULL)
            abort();
        return 0;
    }
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const lowp_gguf_kv *kv = &g.kv[i];
        inside(data, size, kv->key.data, kv->key.len);
        inside(data, size, kv->value, kv->value_len);
        if (kv->type == LOWP_GGUF_ARRAY && kv->elem_type == LOWP_GGUF_STRING) {
            lowp_gguf_str *s = malloc((size_t)kv->count * sizeof *s + 1);
            if (lowp_gguf_array_strings(kv, s, why, sizeof why) != 0)
                abort();
            for (uint64_t j = 0; j < kv->count; j++)
                inside(data, size, s[j].data, s[j].len);
            free(s);
        } else if (kv->type == LOWP_GGUF_ARRAY) {
            int64_t v;
            for (uint64_t j = 0; j < kv->count; j++)
                (void)lowp_gguf_array_int(kv, j, &v, why, sizeof why);
        }
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const lowp_gguf_tensor *t = &g.tensors[i];
        inside(data, size, t->name.data, t->name.len);
        inside(data, size, t->data, t->nbytes);
        if ((uint64_t)(t->data - data) % g.alignment != g.data_offset % g.alignment)
            abort();
        if (t->n_elements <= (1u << 20)) {
            float *y = lowp_gguf_tensor_f32(t, why, sizeof why);
            free(y);
        }
    }
    lowp_gguf_close(&g);
    return 0;
}
