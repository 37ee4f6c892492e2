/* PLACEHOLDER: replaced by the work on this subcommand. */
#include <stdio.h>
#include "qvet/cli.h"
int qv_cmd_pack(int argc, char **argv)
{
    fprintf(stderr, "qvet pack: not built yet\n");
    return 2;
}
int qv_cmd_unpack(int argc, char **argv)
{
    fprintf(stderr, "qvet unpack: not built yet\n");
    return 2;
}
