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

/* A command file cmd_attn_sweep.c is the command "attn-sweep": users type dashes. */
static void user_name(const char *name, char *buf, size_t len)
{
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < len; i++)
        buf[i] = name[i] == '_' ? '-' : name[i];
    buf[i] = '\0';
}

static void usage(FILE *f)
{
    fprintf(f, "usage: lowp COMMAND [ARGS]   (lowp COMMAND --help for its arguments)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[64];
        user_name(commands[i].name, name, sizeof name);
        fprintf(f, "  %-12s %s\n", name, commands[i].summary);
    }
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
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[64];
        user_name(commands[i].name, name, sizeof name);
        if (strcmp(argv[1], name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    lowp_cli_fail("unknown command '%s' (try 'lowp --help')", argv[1]);
}
