/* tests/fuzz/fuzz_npy.c: libFuzzer target for the .npy reader (lowp_npy_parse).
 *
 * Properties checked on every input, beyond "no crash, no sanitizer report":
 *   - a refusal comes with a non-empty one-line reason and leaves the tensor empty;
 *   - an accepted file re-serializes and parses back to the same dtype, shape and bytes
 *     (every dtype the reader produces has a descr the writer gives back unchanged). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lowp_tensor t, u;
    char why[512] = "";
    if (lowp_npy_parse(data, size, &t, why, sizeof why) != 0) {
        if (why[0] == '\0' || strchr(why, '\n') != NULL || t.data != NULL)
            abort();
        return 0;
    }
    if (t.nbytes != t.count * lowp_dtype_size(t.dtype) || t.ndim > LOWP_TENSOR_MAX_DIMS)
        abort();
    unsigned char *buf;
    size_t len;
    if (lowp_npy_serialize(&t, &buf, &len, why, sizeof why) != 0)
        abort();
    if (lowp_npy_parse(buf, len, &u, why, sizeof why) != 0)
        abort();
    if (u.dtype != t.dtype || u.ndim != t.ndim || u.nbytes != t.nbytes ||
        memcmp(u.shape, t.shape, sizeof t.shape) != 0 || (t.nbytes && memcmp(u.data, t.data, t.nbytes) != 0))
        abort();
    free(buf);
    lowp_tensor_free(&u);
    lowp_tensor_free(&t);
    return 0;
}
