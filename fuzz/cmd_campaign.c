/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_check(int argc, char **argv)
{
    fprintf(stderr, "qvet check: not built yet\n");
    return 2;
}
int qv_cmd_fuzz(int argc, char **argv)
{
    fprintf(stderr, "qvet fuzz: not built yet\n");
    return 2;
}
int qv_cmd_replay(int argc, char **argv)
{
    fprintf(stderr, "qvet replay: not built yet\n");
    return 2;
}
