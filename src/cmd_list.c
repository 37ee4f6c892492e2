/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_list(int argc, char **argv)
{
    fprintf(stderr, "qvet list: not built yet\n");
    return 2;
}
