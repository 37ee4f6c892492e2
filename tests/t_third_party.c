/* t_third_party.c: kernels qvet did not write, judged through their specs.
 * Every folder of tests/data/third_party holds the operands a PyTorch GEMM
 * kernel consumed on an H200, the output it wrote, the kernel's declared
 * arithmetic (`spec`, derived from its source or measured: the folder's
 * README says which) and the expected verdict (`expect`): PASS for a kernel's
 * own output, FAIL for a copy with one thing made wrong (tamper_*), and for
 * the fp8 accumulation witnesses whatever the declared accumulator allows.
 * `qvet verify --spec` must give exactly that verdict (exit 0 for PASS, 1 for
 * FAIL). The moe_hf_* folders are routed layers PyTorch computed as Hugging
 * Face's MoE blocks do (make_moe_dumps.py), verified with a routed spec; the
 * *_dsv3_* ones DeepSeek-V3's group-limited, biased router with the
 * kernel's ids and weights (make_moe_router_dumps.py); the *_llama4_* ones
 * Llama 4's weight on the expert's input, with a shared expert where the
 * folder's `shared` file gives the count (make_moe_llama4_dumps.py). The
 * expectations come from the scripts, which know the kernel and the
 * tampering, not from qvet. Runs BUILD/qvet from the repository root. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/cli.h"
#include "support/suite.h"

#define DIR_TP "tests/data/third_party"
#define MAX_CASES 512

typedef struct tp_case {
    char name[128];
} tp_case;

static tp_case cases[MAX_CASES];
static int n_cases;

static int by_name(const void *a, const void *b) { return strcmp(((const tp_case *)a)->name, ((const tp_case *)b)->name); }

/* The case folders (those holding a `spec`), sorted by name. */
static void find_cases(void)
{
    DIR *d = opendir(DIR_TP);
    ck_assert_msg(d != NULL, "cannot open %s (run from the repository root)", DIR_TP);
    struct dirent *e;
    n_cases = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s/spec", DIR_TP, e->d_name);
        if (stat(p, &st) != 0) continue;
        ck_assert_int_lt(n_cases, MAX_CASES);
        ck_assert_int_lt(strlen(e->d_name), sizeof cases[0].name);
        strcpy(cases[n_cases++].name, e->d_name);
    }
    closedir(d);
    qsort(cases, n_cases, sizeof cases[0], by_name);
}

/* The first line of DIR_TP/name/file, without its newline, into buf. */
static void read_line(const char *name, const char *file, char *buf, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%.200s/%.40s", DIR_TP, name, file);
    FILE *f = fopen(p, "r");
    ck_assert_msg(f != NULL, "%s is missing", p);
    ck_assert_msg(fgets(buf, (int)len, f) != NULL, "%s is empty", p);
    fclose(f);
    buf[strcspn(buf, "\r\n")] = 0;
}

static int has_file(const char *name, const char *file)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%.200s/%.40s", DIR_TP, name, file);
    return stat(p, &st) == 0;
}

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* The folders are there, with the families make_dumps.py writes and the
 * environment they came from. */
START_TEST(folders_present)
{
    find_cases();
    const char *families[] = {"cublas_", "scaled_tw_", "scaled_rw_", "int_mm_", "tinygemm_", "fp8w_", "moe_hf_", "tamper_"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        int n = 0;
        for (int c = 0; c < n_cases; c++) n += starts(cases[c].name, families[i]);
        ck_assert_msg(n > 0, "no %s* case folder under %s", families[i], DIR_TP);
    }
    struct stat st;
    ck_assert_msg(stat(DIR_TP "/environment.txt", &st) == 0, "%s/environment.txt is missing", DIR_TP);
}
END_TEST

/* Each case: its expected verdict, in the JSON and in the exit code. */
START_TEST(every_case_verdict)
{
    find_cases();
    ck_assert_int_gt(n_cases, 0);
    int n_pass = 0, n_fail = 0;
    for (int c = 0; c < n_cases; c++) {
        const char *nm = cases[c].name;
        char spec[512], expect[16];
        read_line(nm, "spec", spec, sizeof spec);
        read_line(nm, "expect", expect, sizeof expect);
        ck_assert_msg(!strcmp(expect, "PASS") || !strcmp(expect, "FAIL"), "%s: expect is '%s'", nm, expect);
        if (starts(nm, "tamper_")) ck_assert_msg(!strcmp(expect, "FAIL"), "%s: a tampered copy must FAIL", nm);
        static char paths[20][512];
        const char *args[40];
        int na = 0;
        args[na++] = "verify";
        args[na++] = "--spec";
        args[na++] = spec;
        static const char *const opt[][2] = {{"--a", "a.npy"},           {"--q", "q.npy"},
                                             {"--out", "out.npy"},       {"--scales", "scales.npy"},
                                             {"--a-scale", "a_scale.npy"}, {"--zeros", "zeros.npy"},
                                             {"--bias", "bias.npy"},     {"--logits", "logits.npy"},
                                             {"--scales2", "scales2.npy"}, {"--score-bias", "score_bias.npy"},
                                             {"--ids", "ids.npy"},           {"--weights", "weights.npy"},
                                             {"--shared-gate", "shared_gate.npy"}};
        for (size_t o = 0; o < sizeof opt / sizeof opt[0]; o++) {
            if (o >= 3 && !has_file(nm, opt[o][1])) continue;
            snprintf(paths[o], sizeof paths[o], "%s/%.200s/%s", DIR_TP, nm, opt[o][1]);
            args[na++] = opt[o][0];
            args[na++] = paths[o];
        }
        char shared[16];
        if (has_file(nm, "shared")) { /* the shared experts' count (routed layers) */
            read_line(nm, "shared", shared, sizeof shared);
            args[na++] = "--shared";
            args[na++] = shared;
        }
        args[na++] = "--json";
        args[na] = NULL;
        run_result r = qvet_run(args);
        char want[64];
        snprintf(want, sizeof want, "\"verdict\":\"%s\"", expect);
        ck_assert_msg(r.rc == (strcmp(expect, "PASS") ? 1 : 0) && strstr(r.out, want),
                      "%s (spec %s): expected %s, qvet verify exited %d:\n%s%s", nm, spec, expect, r.rc, r.out, r.err);
        run_free(&r);
        if (strcmp(expect, "PASS")) n_fail++;
        else n_pass++;
    }
    ck_assert_int_gt(n_pass, 0);
    ck_assert_int_gt(n_fail, 0);
    printf("third_party: %d cases, %d PASS and %d FAIL as expected\n", n_cases, n_pass, n_fail);
}
END_TEST

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("third_party", "verify", 600, &tc);
    tcase_add_test(tc, folders_present);
    tcase_add_test(tc, every_case_verdict);
    return suite_run(s);
}
