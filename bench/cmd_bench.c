/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_bench(int argc, char **argv)
{
    fprintf(stderr, "qvet bench: not built yet\n");
    return 2;
}
