/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_report(int argc, char **argv)
{
    fprintf(stderr, "qvet report: not built yet\n");
    return 2;
}
