/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_ppl(int argc, char **argv)
{
    fprintf(stderr, "qvet ppl: not built yet\n");
    return 2;
}
