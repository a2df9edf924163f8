/* lowp/gguf.h: a strict reader of GGUF model files (versions 2 and 3, little-endian) and
 * the dequantization of the tensor types lowp's model uses.
 *
 * A GGUF file (the llama.cpp / ggml format) is, in order, with every integer little-endian:
 *   "GGUF", uint32 version, uint64 tensor count, uint64 key/value count;
 *   key/value pairs: string key, uint32 value type, value;
 *   tensor infos: string name, uint32 n_dims, uint64 ne[n_dims], uint32 ggml type,
 *                 uint64 offset (relative to the data section);
 *   padding to the alignment (the uint32 key "general.alignment", default 32);
 *   the data section, each tensor at its offset.
 * A string is a uint64 byte length and that many bytes (no NUL). A value is a scalar of
 * the type, a string, or an array: uint32 element type, uint64 count, the elements.
 * ne[0] is the fastest-varying dimension: a [rows, cols] matrix in C order has ne = {cols,
 * rows}, and quantization blocks run along ne[0].
 *
 * Checked, each violation refused with one sentence (lowp_why_set) and no partial result:
 *   - magic; version 2 or 3 (version 1's 32-bit counts, a byte-swapped version, i.e. a
 *     big-endian file, and unknown versions are refused);
 *   - every read within the buffer; counts bounded by the bytes left (a count that the
 *     rest of the file cannot hold is refused before anything is allocated);
 *   - value types 0..12; arrays of arrays refused (llama.cpp does not read them either);
 *     a BOOL byte is 0 or 1; keys distinct; "general.alignment", when present, a UINT32
 *     power of two;
 *   - tensor names distinct, at most LOWP_GGUF_MAX_NAME - 1 bytes (ggml's limit), n_dims
 *     0..LOWP_GGUF_MAX_DIMS, every ne >= 1 and their product without overflow; type known
 *     (lowp_gguf_type_info), ne[0] a multiple of its block size; offset a multiple of the
 *     alignment; data within the file; no two tensors' data overlap.
 * Not checked: that strings are UTF-8 (nothing here interprets them; messages quote them
 * with control bytes replaced).
 *
 * The reader keeps pointers into the caller's bytes (lowp_gguf_parse) or into its own
 * read-only mapping of the file (lowp_gguf_open, mmap): nothing is copied. */
#ifndef LOWP_GGUF_H
#define LOWP_GGUF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_GGUF_MAX_DIMS 4
#define LOWP_GGUF_MAX_NAME 64
#define LOWP_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types (the file's numbering). */
typedef enum lowp_gguf_vtype {
    LOWP_GGUF_UINT8 = 0,
    LOWP_GGUF_INT8 = 1,
    LOWP_GGUF_UINT16 = 2,
    LOWP_GGUF_INT16 = 3,
    LOWP_GGUF_UINT32 = 4,
    LOWP_GGUF_INT32 = 5,
    LOWP_GGUF_FLOAT32 = 6,
    LOWP_GGUF_BOOL = 7,
    LOWP_GGUF_STRING = 8,
    LOWP_GGUF_ARRAY = 9,
    LOWP_GGUF_UINT64 = 10,
    LOWP_GGUF_INT64 = 11,
    LOWP_GGUF_FLOAT64 = 12
} lowp_gguf_vtype;
#define LOWP_GGUF_VTYPE_COUNT 13

/* ggml tensor types (the file's numbering); lowp_gguf_type_info knows the sizes of these. */
typedef enum lowp_ggml_type {
    LOWP_GGML_F32 = 0,
    LOWP_GGML_F16 = 1,
    LOWP_GGML_Q4_0 = 2,
    LOWP_GGML_Q4_1 = 3,
    LOWP_GGML_Q5_0 = 6,
    LOWP_GGML_Q5_1 = 7,
    LOWP_GGML_Q8_0 = 8,
    LOWP_GGML_Q8_1 = 9,
    LOWP_GGML_Q2_K = 10,
    LOWP_GGML_Q3_K = 11,
    LOWP_GGML_Q4_K = 12,
    LOWP_GGML_Q5_K = 13,
    LOWP_GGML_Q6_K = 14,
    LOWP_GGML_Q8_K = 15,
    LOWP_GGML_I8 = 24,
    LOWP_GGML_I16 = 25,
    LOWP_GGML_I32 = 26,
    LOWP_GGML_I64 = 27,
    LOWP_GGML_F64 = 28,
    LOWP_GGML_BF16 = 30
} lowp_ggml_type;

/* A string in the file: len bytes at data, not NUL-terminated. */
typedef struct lowp_gguf_str {
    uint64_t len;
    const char *data;
} lowp_gguf_str;

typedef struct lowp_gguf_kv {
    lowp_gguf_str key;
    uint32_t type;       /* lowp_gguf_vtype */
    uint32_t elem_type;  /* arrays: the elements' type; otherwise equal to type */
    uint64_t count;      /* arrays: the element count; otherwise 1 */
    const unsigned char *value; /* the value's bytes (an array's: its first element) */
    uint64_t value_len;  /* bytes from value to the end of the value */
} lowp_gguf_kv;

typedef struct lowp_gguf_tensor {
    lowp_gguf_str name;
    uint32_t n_dims;
    uint64_t ne[LOWP_GGUF_MAX_DIMS]; /* dimensions past n_dims are 1 */
    uint32_t type;       /* lowp_ggml_type */
    uint64_t n_elements; /* product of ne */
    uint64_t offset;     /* within the data section */
    uint64_t nbytes;
    const unsigned char *data;
} lowp_gguf_tensor;

typedef struct lowp_gguf {
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset; /* of the data section, from the start of the file */
    lowp_gguf_kv *kv;
    uint64_t n_kv;
    lowp_gguf_tensor *tensors;
    uint64_t n_tensors;
    const unsigned char *base; /* the file's bytes */
    uint64_t size;
    void *map;                 /* lowp_gguf_open's mapping (NULL after lowp_gguf_parse) */
    size_t map_len;
} lowp_gguf;

/* Block size (elements) and bytes per block of a ggml type: 0 for a type this reader does
 * not know (then *name is "unknown"). name may be NULL. */
int lowp_gguf_type_info(uint32_t type, uint64_t *block, uint64_t *block_bytes, const char **name);

/* Parse len bytes at buf (which must outlive *g). On failure *g is empty (safe to free). */
int lowp_gguf_parse(const unsigned char *buf, size_t len, lowp_gguf *g, char *why, size_t why_len);
/* Map the file at path read-only and parse it. The message names the path. */
int lowp_gguf_open(const char *path, lowp_gguf *g, char *why, size_t why_len);
/* Free the tables and unmap; NULL-safe and idempotent. */
void lowp_gguf_close(lowp_gguf *g);

/* Lookups: NULL when absent. */
const lowp_gguf_kv *lowp_gguf_find(const lowp_gguf *g, const char *key);
const lowp_gguf_tensor *lowp_gguf_find_tensor(const lowp_gguf *g, const char *name);

/* Typed getters; each refuses (naming the key) a missing key or a value of another kind.
 * get_uint: any integer type whose value is >= 0; get_float: FLOAT32 or FLOAT64 (as double);
 * get_string: a STRING (a view into the file); get_bool: a BOOL. */
int lowp_gguf_get_uint(const lowp_gguf *g, const char *key, uint64_t *out, char *why, size_t why_len);
int lowp_gguf_get_float(const lowp_gguf *g, const char *key, double *out, char *why, size_t why_len);
int lowp_gguf_get_string(const lowp_gguf *g, const char *key, lowp_gguf_str *out, char *why,
                         size_t why_len);
int lowp_gguf_get_bool(const lowp_gguf *g, const char *key, int *out, char *why, size_t why_len);
/* The i-th element of an array of integers (any integer type; values outside int64 are
 * refused) or of strings. The parser has already checked every element's bounds;
 * string elements are found by walking (O(i)): use lowp_gguf_array_strings for many. */
int lowp_gguf_array_int(const lowp_gguf_kv *kv, uint64_t i, int64_t *out, char *why, size_t why_len);
/* All the elements of a STRING array, into out (kv->count entries, caller-allocated). */
int lowp_gguf_array_strings(const lowp_gguf_kv *kv, lowp_gguf_str *out, char *why, size_t why_len);
/* Whether a string equals a C string. */
int lowp_gguf_str_eq(lowp_gguf_str s, const char *c);

/* Dequantize n elements (a multiple of the type's block size) of type from src to dst, the
 * way ggml's dequantize_row_* defines each (ref/model/src/gguf_quant.c states the
 * formulas). Types: F32, F16, BF16, Q4_0, Q4_1, Q8_0; others are refused. */
int lowp_gguf_dequantize(uint32_t type, const void *src, uint64_t n, float *dst, char *why,
                         size_t why_len);
/* A whole tensor into a malloc'ed float array of t->n_elements (C order, ne[0] fastest). */
float *lowp_gguf_tensor_f32(const lowp_gguf_tensor *t, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
