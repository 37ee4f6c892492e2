/* qvet.c: the `qvet` binary, a table of subcommands. */
#include <stdio.h>
#include <string.h>

#include "internal/cli.h"

typedef struct qv_subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} qv_subcommand;

static const qv_subcommand subcommands[] = {
    {"list", qv_cmd_list, "print the variant registry (--json for machine use)"},
    {"check", qv_cmd_check, "run the fixed verification suite (GPU kernels or CPU models)"},
    {"fuzz", qv_cmd_fuzz, "run a randomized campaign with shrinking and replay"},
    {"replay", qv_cmd_replay, "re-run one case of a campaign bit for bit"},
    {"pack", qv_cmd_pack, "pack logical weights into a kernel layout"},
    {"unpack", qv_cmd_unpack, "unpack a kernel layout into logical weights"},
    {"verify", qv_cmd_verify, "verify any kernel's output against a variant's model"},
    {"report", qv_cmd_report, "render Markdown and SVG plots from JSONL results"},
    {"ppl", qv_cmd_ppl, "perplexity and KL divergence on a real model"},
    {"bench", qv_cmd_bench, "kernel speed against cuBLAS (GPU)"},
};
#define N_SUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: qvet SUBCOMMAND [OPTIONS]   (qvet SUBCOMMAND --help for details)\n\n"
               "qvet proves whether GPU quantized GEMM kernels compute what they declare.\n\n"
               "subcommands:\n");
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        if (!strcmp(argv[1], subcommands[i].name))
            return subcommands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "qvet: unknown subcommand '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
