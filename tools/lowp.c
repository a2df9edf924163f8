/* tools/lowp.c: the lowp command line. Each subcommand lives in tools/cmd_NAME.c and is
 * listed in the generated lowp_commands.h. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#define LOWP_COMMAND(name)                                                                         \
    int lowp_cmd_##name(int argc, char **argv);                                                    \
    extern const char lowp_cmd_##name##_summary[];
#include "lowp_commands.h"
#undef LOWP_COMMAND

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} commands[] = {
#define LOWP_COMMAND(name) {#name, lowp_cmd_##name, lowp_cmd_##name##_summary},
#include "lowp_commands.h"
#undef LOWP_COMMAND
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lowp COMMAND [ARGS]   (lowp COMMAND --help for its arguments)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LOWP_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return LOWP_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    lowp_cli_fail("unknown command '%s' (try 'lowp --help')", argv[1]);
}
