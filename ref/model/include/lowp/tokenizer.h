/* lowp/tokenizer.h: the byte-level BPE tokenizer of a GGUF model ("gpt2" models).
 *
 * From the file: tokenizer.ggml.model "gpt2"; tokenizer.ggml.tokens (the vocabulary, id =
 * index); tokenizer.ggml.merges ("A B" strings, rank = index); tokenizer.ggml.pre, the
 * pre-tokenizer, "smollm" or "gpt2":
 *   - smollm (llama.cpp's rule for it, shared with StarCoder): first every code point of
 *     category N* is a piece of its own (the text between stays whole), then each piece is
 *     split by the GPT-2 pattern;
 *   - gpt2: the GPT-2 pattern alone.
 * The GPT-2 pattern, leftmost alternative first:
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with \p{L} = categories L*, \p{N} = N* (ref/model/src/unicode_table.c, generated from
 * Python's unicodedata by ref/model/gen_unicode.py), \s = the Unicode White_Space property;
 * "?" and the contractions are the ASCII space U+0020 and apostrophe U+0027, lower case
 * only. A piece's end is the end of the text for the lookahead (pieces are split
 * independently, as llama.cpp and HF tokenizers do).
 * Each piece's bytes are mapped to GPT-2's byte characters (bytes_to_unicode: the printable
 * Latin-1 bytes to themselves, the other 68 to U+0100.. in byte order), one symbol per byte,
 * and merged by BPE: repeatedly the adjacent pair whose merge has the lowest rank, the
 * leftmost on a tie, until no adjacent pair has a merge.
 * Special (control) tokens are not matched in the text: it is tokenized as plain text (as
 * llama.cpp's tokenizer does without parse_special); no BOS is added (the file's
 * tokenizer.ggml.add_bos_token is false for SmolLM2; lowp_tokenizer_bos gives the id).
 *
 * Refused with a reason: another tokenizer model or pre-tokenizer; a merge that is not two
 * tokens whose concatenation is a token; text that is not valid UTF-8, or that holds a
 * byte whose GPT-2 character is not in the vocabulary (SmolLM2's lacks 21 bytes, among
 * them the controls 0x04 0x06 0x13 0x14 0x16 0x1d); the byte offset is named. */
#ifndef LOWP_TOKENIZER_H
#define LOWP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_tokenizer lowp_tokenizer;

/* Build the tokenizer from g's metadata (the strings stay in g's bytes: g must outlive it). */
int lowp_tokenizer_load(const lowp_gguf *g, lowp_tokenizer **out, char *why, size_t why_len);
void lowp_tokenizer_free(lowp_tokenizer *t); /* NULL-safe */

size_t lowp_tokenizer_vocab_size(const lowp_tokenizer *t);
int32_t lowp_tokenizer_bos(const lowp_tokenizer *t); /* -1 when the file names none */
int32_t lowp_tokenizer_eos(const lowp_tokenizer *t);

/* Tokenize len bytes of UTF-8 text: *ids (malloc'ed, *n entries; not NULL on success even
 * when *n is 0). */
int lowp_tokenize(const lowp_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, char *why,
                  size_t why_len);
/* The text bytes of token id (byte characters mapped back; a character outside the byte
 * map, as in control tokens' names, is copied as its UTF-8). Writes at most cap bytes and
 * returns the full length, or -1 for an id outside the vocabulary. */
long lowp_token_text(const lowp_tokenizer *t, int32_t id, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
