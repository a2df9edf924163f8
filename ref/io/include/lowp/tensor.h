/* lowp/tensor.h: in-memory tensors and the two tensor file formats, .npy and .safetensors.
 *
 * A tensor is a name, a dtype, a shape of at most LOWP_TENSOR_MAX_DIMS dimensions and its
 * elements as little-endian bytes in C (row-major) order. A tensor file is an ordered list
 * of tensors with distinct names plus string key/value metadata.
 *
 * Dtypes carry the safetensors names (F32, BF16, F8_E4M3, ...). The enum order is the
 * safetensors crate's Dtype order, which its writer uses (largest first) to lay out data;
 * lowp's writer does the same, so both produce identical bytes for the same tensors.
 *
 * .npy (NumPy format 1.0, 2.0, 3.0; ref/io/src/tensor_npy.c)
 *   - Read: little-endian ('<') or byte-order-free ('|') descr, C order, at most 8 dims;
 *     the data must be exactly count * itemsize bytes (no trailing bytes).
 *     descr -> dtype: '|b1' BOOL, '|u1' U8, '|i1' I8, '<i2' I16, '<u2' U16, '<f2' F16,
 *     '<i4' I32, '<u4' U32, '<f4' F32, '<f8' F64, '<i8' I64, '<u8' U64 (a one-byte type
 *     may carry any byte-order character).
 *     Refused with a reason: fortran_order True, big-endian ('>') or native ('=') multi-byte
 *     descr, object/structured/string types, and the opaque '<V1'/'<V2' descr that
 *     ml_dtypes writes for bfloat16 and the float8 types: a void descr does not say which
 *     format the bytes are in, so lowp will not guess (save `x.view(np.uint16)` and
 *     convert with a known dtype, or use .safetensors, which names BF16/F8_* exactly).
 *   - Write: the header np.save writes, byte for byte (sorted keys, the growth padding,
 *     64-byte alignment, version 1.0). Dtypes numpy lacks are written as their raw bits:
 *     BF16 as '<u2', F8_E4M3/F8_E5M2/F8_E8M0 as '|u1'; the dtype name is then lost (an
 *     .npy file has no metadata), which is why quantized tensors live in .safetensors.
 *   - The array of an .npy file is unnamed: its tensor's name is "".
 *
 * .safetensors (ref/io/src/tensor_safetensors.c)
 *   - 8-byte little-endian header length N, N bytes of JSON, then the data buffer. The JSON
 *     object maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
 *     (offsets relative to the data buffer) and may hold "__metadata__", a map of strings.
 *   - Read (strict; every violation is an error with a one-sentence reason): N within the
 *     file and at most 100,000,000 (the safetensors crate's limit); the header is UTF-8
 *     without a NUL byte and strict JSON (RFC 8259, parsed by jansson) nested at most
 *     LOWP_JSON_MAX_DEPTH deep; no duplicate keys at any level; each tensor has exactly the
 *     three keys; dtype known; shape and offsets non-negative integers of at most 2^63-1
 *     (held exactly; larger ones are refused, where the crate reads up to 2^64-1: no file
 *     reaches an offset of 2^63, so only a dimension of an empty tensor can differ);
 *     element count * dtype size equals end - begin, without
 *     overflow; sorted by offset the tensors tile the data buffer exactly from 0 to its end
 *     (no gap, no overlap, no trailing byte); metadata values are strings; no string holds
 *     U+0000. Stricter than the safetensors crate in two places: it accepts duplicate
 *     names and unknown keys in a tensor entry, lowp refuses both.
 *   - Write: like the safetensors crate: tensors ordered by dtype (largest first, the enum
 *     order) then by name; "__metadata__" first (omitted when there is none) in insertion
 *     order; compact JSON escaped as serde_json does; the header padded with spaces to a
 *     multiple of 8 bytes so every tensor's data is aligned to its element size.
 *
 * Writers to a path are atomic: the bytes go to "<path>.tmp.<pid>.<n>", which is renamed
 * over path only when complete, and removed on any failure.
 *
 * Errors: functions that can fail return 0 or -1; on -1 they write one sentence naming the
 * problem into why (why_len bytes, may be NULL) and leave their outputs freed/empty.
 * Tensor names quoted in messages are shortened and their control characters replaced.
 *
 * The host must be little-endian (checked at compile time): tensor data is kept in file
 * byte order and used in place as C arrays.
 */
#ifndef LOWP_TENSOR_H
#define LOWP_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lowp/bits.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOWP_TENSOR_MAX_DIMS 8
#define LOWP_JSON_MAX_DEPTH 32
#define LOWP_SAFETENSORS_MAX_HEADER 100000000u
#define LOWP_NPY_MAX_HEADER (1u << 20)

/* The safetensors crate's Dtype order (minus the sub-byte and complex types). */
typedef enum lowp_dtype {
    LOWP_DT_BOOL = 0,
    LOWP_DT_U8,
    LOWP_DT_I8,
    LOWP_DT_F8_E5M2,
    LOWP_DT_F8_E4M3,
    LOWP_DT_F8_E8M0,
    LOWP_DT_I16,
    LOWP_DT_U16,
    LOWP_DT_F16,
    LOWP_DT_BF16,
    LOWP_DT_I32,
    LOWP_DT_U32,
    LOWP_DT_F32,
    LOWP_DT_F64,
    LOWP_DT_I64,
    LOWP_DT_U64
} lowp_dtype;
#define LOWP_DTYPE_COUNT 16

/* Names as safetensors spells them ("F32", "F8_E4M3", ...); parse returns 0 or -1. */
const char *lowp_dtype_name(lowp_dtype dt);
int lowp_dtype_parse(const char *name, lowp_dtype *out);
size_t lowp_dtype_size(lowp_dtype dt); /* bytes per element: 1, 2, 4 or 8 */

typedef struct lowp_tensor {
    char *name;                        /* NUL-terminated, owned */
    lowp_dtype dtype;
    int ndim;                          /* 0 (a scalar) .. LOWP_TENSOR_MAX_DIMS */
    size_t shape[LOWP_TENSOR_MAX_DIMS];
    size_t count;                      /* product of shape (1 for a scalar) */
    size_t nbytes;                     /* count * lowp_dtype_size(dtype) */
    unsigned char *data;               /* nbytes bytes, little-endian, C order; owned */
} lowp_tensor;

typedef struct lowp_meta_entry {
    char *key;
    char *value;
} lowp_meta_entry;

typedef struct lowp_tensor_file {
    lowp_tensor *tensors;  /* distinct names, in insertion (or file) order */
    size_t n_tensors, cap_tensors;
    lowp_meta_entry *meta; /* distinct keys, in insertion (or file) order */
    size_t n_meta, cap_meta;
} lowp_tensor_file;

/* Element count and byte size of a shape: -1 if the running product d0*d1*...*itemsize
 * overflows size_t at any step (checked with __builtin_mul_overflow; as the safetensors
 * crate's checked fold does) or ndim is outside 0..LOWP_TENSOR_MAX_DIMS. */
int lowp_shape_size(int ndim, const size_t *shape, size_t elem_size, size_t *count,
                    size_t *nbytes);

/* A shape as text, for headers and messages: LOWP_SHAPE_JSON "[2, 3]" (safetensors headers,
 * lowp's metadata, messages), LOWP_SHAPE_TUPLE the Python tuple of a .npy header "(2, 3)",
 * with the 1-tuple's comma "(2,)", and "()" for a scalar. Truncated to len - 1 bytes and
 * NUL-terminated (len > 0). */
typedef enum { LOWP_SHAPE_JSON, LOWP_SHAPE_TUPLE } lowp_shape_style;
void lowp_shape_text(char *buf, size_t len, int ndim, const size_t *shape,
                     lowp_shape_style style);

/* A tensor with zeroed data. On failure *t is left empty (safe to free). */
int lowp_tensor_alloc(lowp_tensor *t, const char *name, lowp_dtype dt, int ndim,
                      const size_t *shape, char *why, size_t why_len);
void lowp_tensor_free(lowp_tensor *t); /* frees and empties; NULL-safe, idempotent */

void lowp_tensor_file_init(lowp_tensor_file *f);
void lowp_tensor_file_free(lowp_tensor_file *f); /* frees everything, leaves f empty */
/* Append a tensor with zeroed data; fails on a duplicate name. The pointer is valid until
 * the next add. */
lowp_tensor *lowp_tensor_file_add(lowp_tensor_file *f, const char *name, lowp_dtype dt,
                                  int ndim, const size_t *shape, char *why, size_t why_len);
const lowp_tensor *lowp_tensor_file_find(const lowp_tensor_file *f, const char *name);
/* Set (or replace) a metadata entry. */
int lowp_tensor_file_set_meta(lowp_tensor_file *f, const char *key, const char *value,
                              char *why, size_t why_len);
const char *lowp_tensor_file_meta(const lowp_tensor_file *f, const char *key); /* or NULL */

/* .npy codec (tensor_npy.c). parse: the bytes of a whole file -> *out (name ""). */
int lowp_npy_parse(const unsigned char *buf, size_t len, lowp_tensor *out, char *why,
                   size_t why_len);
/* The header np.save would write for t (magic through the final '\n'), malloc'ed. */
int lowp_npy_header(const lowp_tensor *t, unsigned char **hdr, size_t *hdr_len, char *why,
                    size_t why_len);
/* Header then data to a stream; or the whole file in memory (malloc'ed). */
int lowp_npy_emit(FILE *out, const lowp_tensor *t, char *why, size_t why_len);
int lowp_npy_serialize(const lowp_tensor *t, unsigned char **buf, size_t *len, char *why,
                       size_t why_len);

/* .safetensors codec (tensor_safetensors.c). parse fills an initialized, empty *out. */
int lowp_safetensors_parse(const unsigned char *buf, size_t len, lowp_tensor_file *out,
                           char *why, size_t why_len);
/* The 8-byte length and the padded JSON header, malloc'ed; order (may be NULL) receives
 * the tensors' indices in data order (f->n_tensors entries, caller-allocated). */
int lowp_safetensors_header(const lowp_tensor_file *f, unsigned char **hdr, size_t *hdr_len,
                            size_t *order, char *why, size_t why_len);
int lowp_safetensors_emit(FILE *out, const lowp_tensor_file *f, char *why, size_t why_len);
int lowp_safetensors_serialize(const lowp_tensor_file *f, unsigned char **buf, size_t *len,
                               char *why, size_t why_len);

/* Files by extension (".npy" or ".safetensors", either case). Reading an .npy gives a file
 * of one tensor named "" and no metadata; writing an .npy needs exactly one tensor and no
 * metadata (there is nowhere to keep it). */
typedef enum lowp_tensor_file_kind {
    LOWP_FILE_UNKNOWN = 0,
    LOWP_FILE_NPY = 1,
    LOWP_FILE_SAFETENSORS = 2
} lowp_tensor_file_kind;
lowp_tensor_file_kind lowp_tensor_file_kind_of(const char *path);
int lowp_tensor_file_read(const char *path, lowp_tensor_file *out, char *why, size_t why_len);
int lowp_tensor_file_write(const char *path, const lowp_tensor_file *f, char *why,
                           size_t why_len);
/* Atomic write of anything: emit(out, ctx, why, why_len) writes the bytes. */
int lowp_write_atomic(const char *path, int (*emit)(FILE *, const void *, char *, size_t),
                      const void *ctx, char *why, size_t why_len);

/* "A float tensor": F32 as is, F16 and BF16 exactly, F64 rounded to nearest binary32
 * (*rounded, if not NULL, counts the values that changed; NaN never counts, Inf from
 * overflow does). Other dtypes are refused. out gets dtype F32, the same shape, and the
 * source's name. */
int lowp_tensor_to_f32(const lowp_tensor *in, lowp_tensor *out, size_t *rounded, char *why,
                       size_t why_len);
/* Load a float tensor from a file by extension: for .safetensors the tensor called name,
 * or the only tensor when name is NULL; for .npy name must be NULL. *src_dtype (may be
 * NULL) receives the dtype it had in the file. */
int lowp_tensor_load_float(const char *path, const char *name, lowp_tensor *out,
                           lowp_dtype *src_dtype, size_t *rounded, char *why, size_t why_len);

/* Exact conversion used above: binary16 bits -> binary32, NaN payload kept in the top
 * fraction bits (as a hardware widening does); bfloat16 is lowp_f32_from_bf16 (lowp/bits.h). */
float lowp_f16_bits_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_TENSOR_H */
