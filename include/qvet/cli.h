/* cli.h: the qvet subcommands. Included by src/qvet.c (the dispatcher) and by
 * the file that implements each subcommand. Rule: a subcommand returns its exit
 * code (0 ok, 1 a FAIL verdict, 2 usage or input error, 3 environment error) and
 * prints its own usage on --help (to stdout, exit 0) or on a bad option (to
 * stderr, exit 2). It never calls exit() from library code. */
#ifndef QVET_CLI_H
#define QVET_CLI_H

#ifdef __cplusplus
extern "C" {
#endif

int qv_cmd_list(int argc, char **argv);    /* src/cmd_list.c */
int qv_cmd_check(int argc, char **argv);   /* fuzz/cmd_campaign.c */
int qv_cmd_fuzz(int argc, char **argv);    /* fuzz/cmd_campaign.c */
int qv_cmd_replay(int argc, char **argv);  /* fuzz/cmd_campaign.c */
int qv_cmd_pack(int argc, char **argv);    /* src/cmd_pack.c */
int qv_cmd_unpack(int argc, char **argv);  /* src/cmd_pack.c */
int qv_cmd_verify(int argc, char **argv);  /* src/cmd_verify.c */
int qv_cmd_report(int argc, char **argv);  /* reports/cmd_report.c */
int qv_cmd_ppl(int argc, char **argv);     /* eval/cmd_ppl.c */
int qv_cmd_bench(int argc, char **argv);   /* bench/cmd_bench.c */

/* Shared option helpers: parse an integer/double option value or print a
 * clear message naming the option; return 0 on success, -1 on error. */
int qv_opt_long(const char *opt, const char *val, long long lo, long long hi, long long *out);
int qv_opt_double(const char *opt, const char *val, double *out);

#ifdef __cplusplus
}
#endif
#endif
