/* tools/cli_input.c: what `lowp stats` and `lowp calibrate` share: the tensor-input
 * options (a tensor file, .npy / .safetensors, or a built-in generator, lowp/gen.h, read
 * as [T, H, D] binary32) and the table outputs (--csv, --json). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/cases.h"
#include "lowp/gen.h"
#include "lowp/stats.h"
#include "lowp/tensor.h"


/* ---------------------------------------------------------------------------------- */
/* input options (shared)                                                              */

static struct {
    const char *in, *tensor, *gen;
    size_t shape[3];
    int shape_set, seed_set, scale_set;
    uint64_t seed;
    double scale;
} input = {NULL, NULL, NULL, {4096, 8, 128}, 0, 0, 0, LOWP_DEFAULT_SEED, 1.0};

const char *lowp_cli_input_usage(void)
{
    return "  input (default: --gen k-like --shape 4096,8,128):\n"
           "    --in FILE          a .npy or .safetensors tensor (F32, F16, BF16; F64 rounded to\n"
           "                       binary32); shape [..., H, D] is read as [T, H, D] with the leading\n"
           "                       axes folded into T ([T, D] is H = 1; a vector is [1, 1, n])\n"
           "    --tensor NAME      which tensor of a .safetensors file (needed if it holds several)\n"
           "    --gen KIND         gaussian student-t k-like v-like (lowp/gen.h states each model)\n"
           "    --shape T,H,D      generator shape (tokens, heads, head_dim)\n"
           "    --seed S           generator seed (decimal or 0x hex; default 0x6c6f7770)\n"
           "    --scale F          generator magnitude (the model's scale parameter; default 1)\n";
}

void lowp_cli_input_print_usage(FILE *f, const char *usage_line, const char *options)
{
    fputs(usage_line, f);
    fputs(lowp_cli_input_usage(), f);
    fputs(options, f);
}

/* Returns 1 and advances *i if argv[*i] is an input option, else 0. */
int lowp_cli_input_option(int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "--in") == 0) {
        input.in = lowp_cli_option_value(argc, argv, i);
    } else if (strcmp(a, "--tensor") == 0) {
        input.tensor = lowp_cli_option_value(argc, argv, i);
    } else if (strcmp(a, "--gen") == 0) {
        input.gen = lowp_cli_option_value(argc, argv, i);
    } else if (strcmp(a, "--shape") == 0) {
        const char *v = lowp_cli_option_value(argc, argv, i);
        uint64_t d[3];
        lowp_cli_parse_list("--shape", v, 3, 3, 1, (uint64_t)1 << 31, d);
        /* at most 2^31 values (8 GiB of binary32): the generator holds the whole tensor */
        if (d[0] > ((uint64_t)1 << 31) / d[1] / d[2])
            lowp_cli_fail("--shape: %s has more than 2^31 elements", v);
        for (int k = 0; k < 3; k++)
            input.shape[k] = (size_t)d[k];
        input.shape_set = 1;
    } else if (strcmp(a, "--seed") == 0) {
        input.seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, i));
        input.seed_set = 1;
    } else if (strcmp(a, "--scale") == 0) {
        input.scale = lowp_cli_parse_positive("--scale", lowp_cli_option_value(argc, argv, i));
        input.scale_set = 1;
    } else {
        return 0;
    }
    return 1;
}

/* Fold a tensor shape into [T, H, D]: [..., H, D] with the leading axes multiplied into
 * T; [T, D] is one head; a vector is [1, 1, n]; a scalar [1, 1, 1]. */
static void fold_shape(const size_t *dims, size_t rank, size_t shape[3])
{
    shape[0] = shape[1] = shape[2] = 1;
    if (rank == 0)
        return;
    shape[2] = dims[rank - 1];
    if (rank >= 2)
        shape[1] = dims[rank - 2];
    for (size_t k = 0; k + 2 < rank; k++)
        shape[0] *= dims[k];
    if (rank == 2) { /* [T, D]: one head */
        shape[0] = dims[0];
        shape[1] = 1;
    }
}

static float *load_file(size_t shape[3], char *desc, size_t desc_len);

const char *lowp_cli_input_path(void)
{
    return input.in;
}

/* Load the input: a file or the generator. shape gets [T, H, D]; desc a one-line summary. */
float *lowp_cli_input_load(size_t shape[3], char *desc, size_t desc_len)
{
    if (input.in != NULL && input.gen != NULL)
        lowp_cli_fail("--in and --gen are alternatives: give one");
    if (input.tensor != NULL && input.in == NULL)
        lowp_cli_fail("--tensor NAME selects a tensor of a --in .safetensors file");
    if (input.in != NULL) {
        if (input.shape_set || input.seed_set || input.scale_set)
            lowp_cli_fail("--shape, --seed and --scale apply to --gen, not to --in");
        return load_file(shape, desc, desc_len);
    }
    const char *kind_name = input.gen != NULL ? input.gen : "k-like";
    lowp_gen_kind kind;
    if (lowp_gen_kind_parse(kind_name, &kind))
        lowp_cli_fail("unknown generator '%s' (gaussian student-t k-like v-like)", kind_name);
    lowp_gen_params p = lowp_gen_defaults(kind);
    p.scale = input.scale;
    size_t n = input.shape[0] * input.shape[1] * input.shape[2];
    float *x = malloc(n * sizeof *x);
    if (x == NULL)
        lowp_cli_fail("out of memory for %zu values", n);
    char why[256];
    if (lowp_gen(kind, &p, input.seed, input.shape[0], input.shape[1], input.shape[2], x, why, sizeof why))
        lowp_cli_fail("--gen %s --shape %zu,%zu,%zu: %s", kind_name, input.shape[0], input.shape[1],
                      input.shape[2], why);
    memcpy(shape, input.shape, sizeof input.shape);
    snprintf(desc, desc_len, "--gen %s [%zu, %zu, %zu] seed 0x%llx scale %g", kind_name, shape[0], shape[1],
             shape[2], (unsigned long long)input.seed, input.scale);
    return x;
}

static float *load_file(size_t shape[3], char *desc, size_t desc_len)
{
    lowp_tensor_file_kind kind = lowp_tensor_file_kind_of(input.in);
    if (kind == LOWP_FILE_UNKNOWN)
        lowp_cli_fail("--in: '%s' is neither .npy nor .safetensors", input.in);
    if (kind == LOWP_FILE_NPY && input.tensor != NULL)
        lowp_cli_fail("--tensor names a tensor of a .safetensors file; '%s' is .npy", input.in);
    lowp_tensor t;
    lowp_dtype src;
    size_t rounded = 0;
    char why[256];
    if (lowp_tensor_load_float(input.in, input.tensor, &t, &src, &rounded, why, sizeof why))
        lowp_cli_fail("--in %s: %s", input.in, why);
    if (t.count == 0)
        lowp_cli_fail("--in %s: the tensor has no elements", input.in);
    fold_shape(t.shape, (size_t)t.ndim, shape);
    /* the tensor's binary32 buffer (calloc'ed by lowp_tensor_alloc), handed over */
    float *x = (float *)(void *)t.data;
    t.data = NULL;
    char dims[160] = "";
    size_t used = 0;
    for (int k = 0; k < t.ndim && used + 24 < sizeof dims; k++)
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%s%zu", k ? ", " : "", t.shape[k]);
    snprintf(desc, desc_len, "%s%s%s (%s [%s]%s) as [%zu, %zu, %zu]", input.in, t.name[0] ? " " : "", t.name,
             lowp_dtype_name(src), dims, rounded ? ", some F64 values rounded" : "", shape[0], shape[1],
             shape[2]);
    lowp_tensor_free(&t);
    return x;
}


/* ---------------------------------------------------------------------------------- */
/* table outputs (shared)                                                              */

int lowp_cli_table_option(int argc, char **argv, int *i, lowp_cli_table_out *o)
{
    if (strcmp(argv[*i], "--csv") == 0)
        o->csv = lowp_cli_option_value(argc, argv, i);
    else if (strcmp(argv[*i], "--json") == 0)
        o->json = lowp_cli_option_value(argc, argv, i);
    else
        return 0;
    return 1;
}

void lowp_cli_table_check(const lowp_cli_table_out *o)
{
    if (o->csv != NULL && o->json != NULL && strcmp(o->csv, "-") == 0 && strcmp(o->json, "-") == 0)
        lowp_cli_fail("--csv - and --json - would both write to standard output");
    lowp_out_check("--csv", o->csv);
    lowp_out_check("--json", o->json);
    lowp_cli_check_not_input("--csv", o->csv, "--in", input.in);
    lowp_cli_check_not_input("--json", o->json, "--in", input.in);
    lowp_cli_check_distinct_outputs("--csv", o->csv, "--json", o->json);
}

int lowp_cli_table_on_stdout(const lowp_cli_table_out *o)
{
    return !(o->csv != NULL && strcmp(o->csv, "-") == 0) && !(o->json != NULL && strcmp(o->json, "-") == 0);
}

void lowp_cli_table_write(const lowp_cli_table_out *o, const lowp_stats_row *rows, size_t n)
{
    if (o->csv != NULL) {
        FILE *f = lowp_out_open(o->csv, 0);
        if (lowp_stats_write_csv(f, rows, n))
            lowp_cli_fail("cannot write '%s'", o->csv);
        lowp_out_commit(f);
    }
    if (o->json != NULL) {
        FILE *f = lowp_out_open(o->json, 0);
        if (lowp_stats_write_json(f, rows, n))
            lowp_cli_fail("cannot write '%s'", o->json);
        lowp_out_commit(f);
    }
}
