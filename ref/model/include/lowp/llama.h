/* lowp/llama.h: the forward pass of a Llama-architecture GGUF model in binary32, with its
 * K/V cache behind an interface (lowp_kv_store) so that lowp's cache formats can stand in.
 *
 * The model (ggml's llama graph, as llama.cpp runs it; ref/model/src/llama.c):
 *   x = token_embd[token]                                  (the embedding, dequantized)
 *   per block l:
 *     h  = rmsnorm(x) * attn_norm                          rmsnorm(x) = x / sqrt(mean(x^2) + eps)
 *     q, k, v = h Wq^T, h Wk^T, h Wv^T                     9 query heads, 3 KV heads of 64
 *     q, k = rope(q), rope(k)                              NORM RoPE: adjacent pairs (2i, 2i+1)
 *     the store receives k (before and after RoPE) and v, and returns every position's K, V
 *     a  = softmax(q k^T / sqrt(64), causal) v             GQA: query head h reads KV head h / 3
 *     x += a Wo^T
 *     h  = rmsnorm(x) * ffn_norm
 *     x += (silu(h Wgate^T) * (h Wup^T)) Wdown^T           silu(z) = z / (1 + exp(-z))
 *   hidden = rmsnorm(x) * output_norm;  logits = hidden E^T  (E = output.weight, or
 *   token_embd when the file has none: a tied head)
 * Shapes, head counts, eps (llama.attention.layer_norm_rms_epsilon) and the RoPE base
 * (llama.rope.freq_base) come from the file. RoPE angle of pair i at position p, as ggml
 * computes it: theta = p * s^i by repeated binary32 multiplication from theta = p, with
 * s = powf(base, -2 / head_dim); the pair (x0, x1) becomes (x0 cos - x1 sin, x0 sin + x1 cos)
 * with cosf/sinf of that theta. rmsnorm sums the squares in binary64 (as ggml does).
 * Matrix products are FMA chains in k order and softmax's exp is one fixed sequence of
 * binary32 operations (ref/model/internal/gemm.h): the result does not depend on the thread
 * count or on the CPU's vector ISA.
 * Refused: another architecture, partial RoPE, head counts that do not divide, tensors
 * missing or of the wrong shape or of a type lowp does not dequantize. */
#ifndef LOWP_LLAMA_H
#define LOWP_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_llama_config {
    size_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab, n_ctx;
    double rms_eps, rope_base;
    int tied_head; /* 1: the LM head is token_embd */
} lowp_llama_config;

typedef struct lowp_llama lowp_llama;

/* Dequantize and pack every weight (about 4 bytes per parameter); g may be closed after. */
int lowp_llama_load(const lowp_gguf *g, lowp_llama **out, char *why, size_t why_len);
void lowp_llama_free(lowp_llama *m); /* NULL-safe */
const lowp_llama_config *lowp_llama_config_of(const lowp_llama *m);
/* The vector ISA of the matrix products ("avx512", "avx2", "scalar"). */
const char *lowp_llama_isa(const lowp_llama *m);

/* The K/V cache: every layer's K and V pass through it. For layer l, positions pos0 ..
 * pos0 + n - 1 (the cache holds 0 .. pos0 - 1 of that layer from earlier calls):
 *   write: k_pre (before RoPE), k (after) and v, each [n][n_head_kv * head_dim] row-major;
 *          the store keeps what attention shall see (exactly, or through a format);
 *   read:  pointers to positions 0 .. pos0 + n - 1 of K (after RoPE) and V as attention
 *          reads them, rows *ld floats apart, valid until the next write.
 *   attend (optional, NULL: none): when set, the forward pass calls it after write instead
 *          of read and its own attention: q holds the n queries after RoPE (rows ldq floats
 *          apart, n_head * head_dim each), out receives the attention output, n rows of
 *          n_embd floats (query head h at h * head_dim). A store computes attention there
 *          as some kernel would (lowp's GPU decode emulator, say), or records q, or
 *          compares with lowp_llama_attention over other K/V.
 * Returning -1 (with a reason) stops the forward pass with that reason. */
typedef struct lowp_kv_store {
    void *ctx;
    int (*write)(void *ctx, size_t layer, size_t pos0, size_t n, const float *k_pre, const float *k,
                 const float *v, char *why, size_t why_len);
    int (*read)(void *ctx, size_t layer, size_t n, const float **k, const float **v, size_t *ld, char *why,
                size_t why_len);
    int (*attend)(void *ctx, const lowp_llama *m, size_t layer, size_t pos0, size_t n, const float *q,
                  size_t ldq, float *out, char *why, size_t why_len);
} lowp_kv_store;

/* The forward pass's own attention (causal GQA, binary32; llama.c states its arithmetic)
 * of n queries at positions pos0 .. pos0 + n - 1 (rows ldq apart) over K, V positions
 * 0 .. pos0 + n - 1 (rows ld apart, n_head_kv * head_dim used) into out (n x n_embd).
 * Bit-identical to what lowp_llama_forward computes with the same K and V. */
int lowp_llama_attention(const lowp_llama *m, const float *q, size_t ldq, size_t n, size_t pos0, const float *K,
                         const float *V, size_t ld, float *out, char *why, size_t why_len);

/* The exact cache: binary32 arrays for n_layer x capacity positions. */
int lowp_kv_f32_create(const lowp_llama_config *c, size_t capacity, lowp_kv_store *out, char *why,
                       size_t why_len);
void lowp_kv_f32_free(lowp_kv_store *s);

/* Run tokens[0 .. n) at positions pos0 .. pos0 + n - 1; hidden (n x n_embd, may be NULL)
 * receives the final normed states. pos0 + n must not exceed n_ctx. */
int lowp_llama_forward(const lowp_llama *m, lowp_kv_store *kv, const int32_t *tokens, size_t n, size_t pos0,
                       float *hidden, char *why, size_t why_len);
/* logits (n x n_vocab) of n hidden rows. */
void lowp_llama_logits(const lowp_llama *m, const float *hidden, size_t n, float *logits);

#ifdef __cplusplus
}
#endif

#endif
