/* tools/cmd_convert.c: `lowp convert`, the first stable contract (README "lowp convert").
 *
 * Binary mode reads raw little-endian binary32 values and writes one byte per value for
 * e2m1 (code in the low nibble), e4m3, e5m2 and e8m0, two little-endian bytes for bf16
 * and f16. Text mode (--text) reads one number per line, decimal or C99 hex float,
 * rounds it to binary32 as the binary path would receive it, and prints
 * "<input> -> <code> (<decoded value>)". */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/format.h"

LOWP_COMMAND_DEFINE(convert, "encode binary32 values into a format (the stable contract)");

static void convert_usage(FILE *f)
{
    fputs("usage: lowp convert --to FORMAT [--compat PROFILE] [--round MODE] [--saturate|--no-saturate]\n"
          "                    [--in FILE] [--out FILE] [--text]\n"
          "  FORMAT  e2m1 e4m3 e5m2 e8m0 bf16 f16\n"
          "  PROFILE cuda (default) torch ml_dtypes ocp\n"
          "  MODE    rn (default) rz ru rd rna\n"
          "  input: raw little-endian binary32 (stdin by default); --text: one number per line\n",
          f);
}

static int hex_digits(lowp_format f)
{
    return (int)(lowp_format_bits(f) / 4);
}

/* One line of --text input (NUL-free, without its '\n'): trimmed, parsed, encoded. */
static void convert_line(const lowp_codec *c, char *text, size_t line, FILE *out)
{
    size_t n = strlen(text);
    if (n > 0 && text[n - 1] == '\r')
        text[--n] = '\0';
    char *s = text;
    while (isspace((unsigned char)*s))
        s++;
    char *t = s + strlen(s);
    while (t > s && isspace((unsigned char)t[-1]))
        *--t = '\0';
    if (*s == '\0')
        lowp_cli_fail("line %zu: empty line where a number was expected", line);
    char *rest;
    errno = 0;
    float x = strtof(s, &rest);
    if (rest == s || *rest != '\0')
        lowp_cli_fail("line %zu: '%.60s' is not a number", line, s);
    uint16_t code = lowp_encode_f32(c, x);
    fprintf(out, "%s -> 0x%0*x (%.9g)\n", s, hex_digits(c->format), code,
            (double)lowp_decode_f32(c->format, code));
}

/* --text, streamed: one line at a time, at most LINE_MAX_CHARS characters each (a
 * number is far shorter; a longer line is refused, not buffered). A last line without
 * '\n' counts; an empty input gives no output. */
#define LINE_MAX_CHARS 511
static void convert_text(const lowp_codec *c, FILE *in, const char *in_name, FILE *out)
{
    char text[LINE_MAX_CHARS + 1];
    for (size_t line = 1;; line++) {
        size_t n = 0;
        int ch, any = 0, too_long = 0, nul = 0;
        while ((ch = getc(in)) != EOF && ch != '\n') {
            any = 1;
            nul |= ch == '\0';
            if (n < LINE_MAX_CHARS)
                text[n++] = (char)ch;
            else
                too_long = 1;
        }
        if (ferror(in))
            lowp_cli_fail("cannot read '%s': %s", in_name, strerror(errno));
        if (ch == EOF && !any)
            return;
        if (too_long)
            lowp_cli_fail("line %zu: too long to be a number", line);
        /* a NUL would end the C string early and hide the rest of the line */
        if (nul)
            lowp_cli_fail("line %zu: contains a NUL byte, not a number", line);
        text[n] = '\0';
        convert_line(c, text, line, out);
        if (ch == EOF)
            return;
    }
}

/* Binary mode, streamed in chunks of CHUNK values: memory stays constant whatever the
 * input size. A length that is not a multiple of 4 is found at the end; the output is
 * then removed if it is a file (lowp_out_open's temporary), while on stdout or a FIFO the
 * codes before the error have already gone out. */
#define CHUNK 16384
static void convert_binary(const lowp_codec *c, FILE *in, const char *in_name, FILE *out)
{
    static unsigned char buf[4 * CHUNK], bytes[2 * CHUNK];
    static float x[CHUNK];
    static uint16_t codes[CHUNK];
    int wide = lowp_format_bits(c->format) == 16;
    size_t have = 0, total = 0; /* bytes in buf not yet converted (< 4 between chunks) */
    for (;;) {
        size_t got = fread(buf + have, 1, sizeof buf - have, in);
        if (got == 0)
            break;
        total += got;
        have += got;
        size_t n = have / 4;
        for (size_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 | (uint32_t)buf[4 * i + 2] << 16 |
                         (uint32_t)buf[4 * i + 3] << 24;
            memcpy(&x[i], &b, sizeof b);
        }
        lowp_encode_f32_u16(c, x, codes, n);
        for (size_t i = 0; i < n; i++) {
            if (wide) {
                bytes[2 * i] = (unsigned char)(codes[i] & 0xff);
                bytes[2 * i + 1] = (unsigned char)(codes[i] >> 8);
            } else {
                bytes[i] = (unsigned char)codes[i];
            }
        }
        if (fwrite(bytes, wide ? 2 : 1, n, out) != n)
            lowp_cli_fail("cannot write the output: %s", strerror(errno));
        memmove(buf, buf + 4 * n, have - 4 * n);
        have -= 4 * n;
    }
    if (ferror(in))
        lowp_cli_fail("cannot read '%s': %s", in_name, strerror(errno));
    if (have != 0)
        lowp_cli_fail("input is %zu bytes, not a multiple of 4 (raw little-endian binary32 expected)", total);
}

int lowp_cmd_convert(int argc, char **argv)
{
    const char *to = NULL, *compat = "cuda", *round = "rn", *in_path = NULL, *out_path = NULL;
    int saturate = LOWP_SAT_DEFAULT, text = 0;
    const char *sat_flag = NULL, *text_flag = NULL; /* which flag of each group was given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--to") == 0)
            to = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--compat") == 0)
            compat = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--round") == 0)
            round = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--in") == 0)
            in_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--out") == 0)
            out_path = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--saturate") == 0) {
            lowp_cli_flag_once(a, &sat_flag);
            saturate = LOWP_SAT_ON;
        } else if (strcmp(a, "--no-saturate") == 0) {
            lowp_cli_flag_once(a, &sat_flag);
            saturate = LOWP_SAT_OFF;
        } else if (strcmp(a, "--text") == 0) {
            lowp_cli_flag_once(a, &text_flag);
            text = 1;
        }
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            convert_usage(stdout);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("convert: unknown argument '%s' (see lowp convert --help)", a);
    }
    if (to == NULL)
        lowp_cli_fail("convert: --to FORMAT is required (e2m1 e4m3 e5m2 e8m0 bf16 f16)");
    lowp_format f;
    lowp_profile p;
    lowp_round r;
    if (lowp_format_parse(to, &f))
        lowp_cli_fail("unknown format '%s' (e2m1 e4m3 e5m2 e8m0 bf16 f16)", to);
    if (lowp_profile_parse(compat, &p))
        lowp_cli_fail("unknown profile '%s' (cuda torch ml_dtypes ocp)", compat);
    if (lowp_round_parse(round, &r))
        lowp_cli_fail("unknown rounding mode '%s' (rn rz ru rd rna)", round);
    lowp_codec c;
    char why[256];
    if (lowp_codec_init(&c, f, p, r, saturate, why, sizeof why))
        lowp_cli_fail("%s %s --round %s%s: %s", to, compat, round,
                      saturate == LOWP_SAT_ON ? " --saturate" : saturate == LOWP_SAT_OFF ? " --no-saturate" : "",
                      why);

    lowp_out_check("--out", out_path);
    lowp_cli_check_not_input("--out", out_path, "--in", in_path);
    int use_stdin = in_path == NULL || strcmp(in_path, "-") == 0;
    const char *in_name = use_stdin ? "standard input" : in_path;
    FILE *in = use_stdin ? stdin : fopen(in_path, "rb");
    if (in == NULL)
        lowp_cli_fail("cannot read '%s': %s", in_path, strerror(errno));
    FILE *out = lowp_out_open(out_path, !text);
    if (text)
        convert_text(&c, in, in_name, out);
    else
        convert_binary(&c, in, in_name, out);
    lowp_out_commit(out);
    if (!use_stdin)
        fclose(in);
    return LOWP_EXIT_OK;
}
