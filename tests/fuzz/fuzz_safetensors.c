/* tests/fuzz/fuzz_safetensors.c: libFuzzer target for the .safetensors reader and its JSON
 * parser (lowp_safetensors_parse).
 *
 * Properties checked on every input, beyond "no crash, no sanitizer report":
 *   - a refusal comes with a non-empty one-line reason and leaves the file empty;
 *   - an accepted file re-serializes (JSON escaping, data order, padding) and parses back
 *     to the same tensors (name, dtype, shape, bytes) and the same metadata. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lowp_tensor_file f, g;
    char why[512] = "";
    if (lowp_safetensors_parse(data, size, &f, why, sizeof why) != 0) {
        if (why[0] == '\0' || strchr(why, '\n') != NULL || f.n_tensors != 0 || f.n_meta != 0)
            abort();
        return 0;
    }
    unsigned char *buf;
    size_t len;
    if (lowp_safetensors_serialize(&f, &buf, &len, why, sizeof why) != 0)
        abort();
    if (lowp_safetensors_parse(buf, len, &g, why, sizeof why) != 0)
        abort();
    if (g.n_tensors != f.n_tensors || g.n_meta != f.n_meta)
        abort();
    for (size_t i = 0; i < f.n_tensors; i++) {
        const lowp_tensor *t = &f.tensors[i];
        const lowp_tensor *u = lowp_tensor_file_find(&g, t->name);
        if (u == NULL || u->dtype != t->dtype || u->ndim != t->ndim || u->nbytes != t->nbytes ||
            memcmp(u->shape, t->shape, sizeof t->shape) != 0 ||
            (t->nbytes && memcmp(u->data, t->data, t->nbytes) != 0))
            abort();
    }
    for (size_t i = 0; i < f.n_meta; i++) {
        const char *v = lowp_tensor_file_meta(&g, f.meta[i].key);
        if (v == NULL || strcmp(v, f.meta[i].value) != 0)
            abort();
    }
    /* writing is deterministic: the second serialization is byte-identical */
    unsigned char *buf2;
    size_t len2;
    if (lowp_safetensors_serialize(&g, &buf2, &len2, why, sizeof why) != 0 || len2 != len ||
        memcmp(buf, buf2, len) != 0)
        abort();
    free(buf);
    free(buf2);
    lowp_tensor_file_free(&f);
    lowp_tensor_file_free(&g);
    return 0;
}
