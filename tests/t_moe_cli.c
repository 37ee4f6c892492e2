/* t_moe_cli.c: `qvet verify` with a routed spec, as a user runs it on dumps of
 * a grouped GEMM: the CPU model's output of a generated case (local and
 * non-local experts, a shared expert) passes with and without the kernel's
 * ids and weights; a tampered element, a wrong expert id and a weight off by
 * 1e-3 fail (exit 1) and say why; every malformed input exits 2 with a
 * message naming the option. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qvet/array.h"
#include "qvet/formats.h"
#include "qvet/moe.h"
#include "support/cli.h"
#include "support/files.h"
#include "support/suite.h"

static char dir[4096];
enum { T = 12, E = 8, LOCAL = 6, SHARED = 1, X = LOCAL + SHARED, K = 256, N = 128, TOPK = 2 };
static const char *spec_text = "w=u4b8,ws=f16/g128,route=softmax-topk-renorm,topk=2,rsf=2.5";

static void save(const char *name, qv_dtype dt, int nd, int64_t d0, int64_t d1, int64_t d2, const void *data)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    qv_array a;
    int64_t shape[3] = {d0, d1, d2};
    ck_assert_int_eq(qv_array_create(&a, dt, nd, shape), QV_OK);
    memcpy(a.data, data, a.nbytes);
    ck_assert_int_eq(qv_npy_save(path, &a), QV_OK);
    qv_array_destroy(&a);
}

static char paths[16][4200];
static const char *at(int i, const char *name)
{
    snprintf(paths[i], sizeof paths[i], "%s/%s", dir, name);
    return paths[i];
}

/* Writes the case's arrays; the output as out.npy, tampered copies beside. */
static void write_case(void)
{
    qv_moe_spec s;
    ck_assert_int_eq(qv_moe_spec_parse(spec_text, &s), QV_OK);
    qv_moe_problem p;
    ck_assert_int_eq(qv_moe_problem_create(&p, &s, T, N, K, E, LOCAL, SHARED), QV_OK);
    ck_assert_int_eq(ref_moe_fill(&p, QV_LOGITS_RANDOM, QV_PROBE_RANDOM, QV_REGIME_LOGUNIFORM, 4242), QV_OK);
    uint16_t out[T * N];
    int32_t ids[T * TOPK];
    float w[T * TOPK];
    ck_assert_int_eq(ref_moe_model_run(&p, 16, out, ids, w), QV_OK);
    static uint8_t q[X * K * N];
    static uint16_t sc[X * (K / 128) * N];
    for (int x = 0; x < X; x++) {
        memcpy(q + (size_t)x * K * N, p.w[x].q, (size_t)K * N);
        memcpy(sc + (size_t)x * (K / 128) * N, p.w[x].scales, sizeof(uint16_t) * (K / 128) * N);
    }
    save("a.npy", QV_DT_F2, 2, T, K, 0, p.a);
    save("logits.npy", QV_DT_F4, 2, T, E, 0, p.logits);
    save("map.npy", QV_DT_I4, 1, E, 0, 0, p.expert_map);
    save("q.npy", QV_DT_U1, 3, X, K, N, q);
    save("scales.npy", QV_DT_F2, 3, X, K / 128, N, sc);
    save("out.npy", QV_DT_F2, 2, T, N, 0, out);
    save("ids.npy", QV_DT_I4, 2, T, TOPK, 0, ids);
    save("w.npy", QV_DT_F4, 2, T, TOPK, 0, w);
    /* tampered: one element four codes off */
    out[5 * N + 17] ^= 4;
    save("out_bad.npy", QV_DT_F2, 2, T, N, 0, out);
    /* a token's second expert replaced by the best one not taken */
    int32_t bad_ids[T * TOPK];
    memcpy(bad_ids, ids, sizeof ids);
    for (int e = 0; e < E; e++)
        if (e != ids[6] && e != ids[7]) {
            bad_ids[7] = e;
            break;
        }
    save("ids_bad.npy", QV_DT_I4, 2, T, TOPK, 0, bad_ids);
    for (int i = 0; i < T * TOPK; i++) w[i] *= 1.001f;
    save("w_bad.npy", QV_DT_F4, 2, T, TOPK, 0, w);
    save("logits_short.npy", QV_DT_F4, 2, T - 1, E, 0, p.logits);
    save("q_short.npy", QV_DT_U1, 3, X - 1, K, N, q);
    int32_t map_bad[E];
    memcpy(map_bad, p.expert_map, sizeof map_bad);
    map_bad[0] = E;
    save("map_bad.npy", QV_DT_I4, 1, E, 0, 0, map_bad);
    qv_moe_problem_destroy(&p);
}

START_TEST(model_output_passes)
{
    const char *base[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                          "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                          at(4, "scales.npy"), "--out", at(5, "out.npy"), NULL};
    const char *ok[] = {"PASS", "routing:", "no ids", NULL};
    qvet_expect(base, 0, ok);
    const char *with_ids[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                              "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                              at(4, "scales.npy"), "--out", at(5, "out.npy"), "--ids", at(6, "ids.npy"), "--weights",
                              at(7, "w.npy"), "--json", NULL};
    const char *json[] = {"\"verdict\":\"PASS\"", "\"route_bad\":0", "\"weight_bad\":0", "\"shared\":1", NULL};
    qvet_expect(with_ids, 0, json);
}
END_TEST

START_TEST(bad_outputs_fail)
{
    const char *tampered[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                              "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                              at(4, "scales.npy"), "--out", at(5, "out_bad.npy"), NULL};
    const char *fail[] = {"FAIL", "(5, 17)", NULL};
    run_result r = qvet_run(tampered);
    ck_assert_int_eq(r.rc, 1);
    for (int i = 0; fail[i]; i++) ck_assert_msg(strstr(r.out, fail[i]) != NULL, "stdout lacks %s: %s", fail[i], r.out);
    run_free(&r);
    const char *ids_bad[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                             "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                             at(4, "scales.npy"), "--out", at(5, "out.npy"), "--ids", at(6, "ids_bad.npy"), NULL};
    r = qvet_run(ids_bad);
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.out, "routing: token 3") != NULL, "%s", r.out);
    run_free(&r);
    const char *w_bad[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                           "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                           at(4, "scales.npy"), "--out", at(5, "out.npy"), "--ids", at(6, "ids.npy"), "--weights",
                           at(7, "w_bad.npy"), NULL};
    r = qvet_run(w_bad);
    ck_assert_int_eq(r.rc, 1);
    ck_assert_msg(strstr(r.out, "weight") != NULL, "%s", r.out);
    run_free(&r);
}
END_TEST

/* --jobs changes who computes, not what: the same JSON, byte for byte, for
 * 1, 2 and 3 threads on a tampered output; a bad count is refused. */
START_TEST(jobs_same_bits)
{
    char *first = NULL;
    const char *counts[] = {"1", "2", "3"};
    for (int j = 0; j < 3; j++) {
        const char *args[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                              "--expert-map", at(2, "map.npy"), "--shared", "1", "--q", at(3, "q.npy"), "--scales",
                              at(4, "scales.npy"), "--out", at(5, "out_bad.npy"), "--ids", at(6, "ids.npy"),
                              "--jobs", counts[j], "--json", NULL};
        run_result r = qvet_run(args);
        ck_assert_int_eq(r.rc, 1);
        ck_assert_msg(strstr(r.out, "\"verdict\":\"FAIL\"") != NULL, "%s", r.out);
        if (!first) {
            first = strdup(r.out);
            ck_assert_ptr_nonnull(first);
        } else {
            ck_assert_msg(!strcmp(first, r.out), "--jobs %s differs from --jobs 1:\n%s\n%s", counts[j], r.out, first);
        }
        run_free(&r);
    }
    free(first);
    const char *bad[] = {"0", "-1", "1025", "two", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"verify", "--spec", spec_text, "--a", at(0, "a.npy"), "--logits", at(1, "logits.npy"),
                              "--q", at(3, "q.npy"), "--scales", at(4, "scales.npy"), "--out", at(5, "out.npy"),
                              "--jobs", bad[i], NULL};
        const char *need[] = {"--jobs", NULL};
        qvet_expect(args, 2, need);
    }
}
END_TEST

/* Each malformed input: (option to replace, file, text the message holds). */
static const struct {
    const char *opt, *file, *needle;
} bad_inputs[] = {
    {"--logits", "logits_short.npy", "--logits"},
    {"--q", "q_short.npy", "7 experts"},
    {"--expert-map", "map_bad.npy", "--expert-map"},
    {"--scales", "no_such.npy", "--scales"},
    {"--q", "logits.npy", "--q"},
    {"--shared", "65", "--shared"},
    {"--weights", "w.npy", "--weights needs --ids"},
    {"--ids", "w.npy", "--ids"},
};

START_TEST(malformed_inputs_refused)
{
    const char *opts[] = {"--a", "--logits", "--expert-map", "--shared", "--q", "--scales", "--out"};
    const char *files[] = {"a.npy", "logits.npy", "map.npy", "1", "q.npy", "scales.npy", "out.npy"};
    const char *args[24];
    int n = 0, replaced = 0;
    args[n++] = "verify";
    args[n++] = "--spec";
    args[n++] = spec_text;
    for (int i = 0; i < 7; i++) {
        args[n++] = opts[i];
        const char *f = files[i];
        if (!strcmp(opts[i], bad_inputs[_i].opt)) {
            f = bad_inputs[_i].file;
            replaced = 1;
        }
        args[n++] = !strcmp(opts[i], "--shared") ? f : at(i, f);
    }
    if (!replaced) {
        args[n++] = bad_inputs[_i].opt;
        args[n++] = at(8, bad_inputs[_i].file);
    }
    args[n] = NULL;
    const char *needles[] = {bad_inputs[_i].needle, NULL};
    qvet_expect(args, 2, needles);
}
END_TEST

START_TEST(usage_errors)
{
    const char *no_logits[] = {"verify", "--spec", spec_text, "--a", "x.npy", "--out", "y.npy", NULL};
    const char *need[] = {"--logits", NULL};
    qvet_expect(no_logits, 2, need);
    const char *bad_spec[] = {"verify", "--spec", "w=u4b8,ws=f16/g128,route=bogus,topk=2", "--a", "x", "--logits", "l",
                              "--out", "y", NULL};
    const char *route[] = {"route=bogus", NULL};
    qvet_expect(bad_spec, 2, route);
    /* qvet list --spec takes a routed spec too: its canonical form (a row's
     * name expanded to the expert's spec, rsf kept), or why it is refused */
    const char *list_ok[] = {"list", "--spec", "marlin-w4a16-g128-f16,topk=8,route=sigmoid-topk-renorm,rsf=2.5", NULL};
    const char *canon[] = {"w=u4b8,ws=f16/g128,route=sigmoid-topk-renorm,topk=8,rsf=2.5\n", NULL};
    qvet_expect(list_ok, 0, canon);
    const char *list_bad[] = {"list", "--spec", "w=u4b8,ws=f16/g128,route=softmax-topk,topk=2,rsf=-1", NULL};
    const char *rsf[] = {"routed spec: rsf=-1", NULL};
    qvet_expect(list_bad, 2, rsf);
    const char *help[] = {"verify", "--spec", spec_text, "--help", NULL};
    const char *usage[] = {"--logits L.npy", "--expert-map", NULL};
    qvet_expect(help, 0, usage);
}
END_TEST

/* The selection bias (sbias=f32): required when declared, refused when not,
 * one finite f32 per router expert. On the DeepSeek-V3-style folder of
 * tests/data/third_party (a routed layer PyTorch computed; its own verdict
 * is t_third_party's). */
#define DSV3 "tests/data/third_party/moe_vllm_dsv3_t48/"
START_TEST(score_bias_inputs)
{
    static const char *const dsv3 =
        "w=bf16,a=bf16,out=f32,route=sigmoid-topk-renorm,topk=4,rsf=2.5,groups=4,gtopk=2,sbias=f32,eps=1e-20";
    float nan_bias[32] = {0};
    nan_bias[9] = NAN;
    save("bias_nan.npy", QV_DT_F4, 1, 32, 0, 0, nan_bias);
    save("bias_short.npy", QV_DT_F4, 1, 31, 0, 0, nan_bias);
    const struct {
        const char *spec, *bias, *needle;
    } c[] = {
        {dsv3, NULL, "--score-bias SB.npy (E) float32 is required"},
        {"w=bf16,a=bf16,out=f32,route=sigmoid-topk-renorm,topk=4,groups=4,gtopk=2", DSV3 "score_bias.npy",
         "declares no selection bias"},
        {dsv3, DSV3 "logits.npy", "--score-bias"},
        {dsv3, at(10, "bias_short.npy"), "one per router expert) needs (1, 32)"},
        {dsv3, at(11, "bias_nan.npy"), "selection bias of expert 9"},
        {dsv3, at(12, "no_such.npy"), "--score-bias"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *args[] = {"verify",      c[i].spec,          "--a",          DSV3 "a.npy", "--q",
                              DSV3 "q.npy",  "--logits",         DSV3 "logits.npy", "--out", DSV3 "out.npy",
                              c[i].bias ? "--score-bias" : NULL, c[i].bias,      NULL};
        const char *full[16];
        int n = 0;
        full[n++] = "verify";
        full[n++] = "--spec";
        for (int a = 1; args[a]; a++) full[n++] = args[a];
        full[n] = NULL;
        const char *need[] = {c[i].needle, NULL};
        qvet_expect(full, 2, need);
    }
    /* the folder's own arrays: the route's verdict */
    const char *ok[] = {"verify", "--spec", dsv3, "--a", DSV3 "a.npy", "--q", DSV3 "q.npy", "--logits",
                        DSV3 "logits.npy", "--score-bias", DSV3 "score_bias.npy", "--ids", DSV3 "ids.npy",
                        "--weights", DSV3 "weights.npy", "--out", DSV3 "out.npy", NULL};
    const char *pass[] = {"PASS", "0 not an admissible top-4", NULL};
    qvet_expect(ok, 0, pass);
}
END_TEST

/* The shared experts' gate (sgate=sigmoid): required when declared, refused
 * when not, (S, K) in the activation format, finite. On the Qwen3-Next-style
 * folder of tests/data/third_party (its own verdict is t_third_party's). */
#define QN "tests/data/third_party/moe_hf_qwen3next_t29/"
START_TEST(shared_gate_inputs)
{
    char qn[256];
    FILE *f = fopen(QN "spec", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(qn, sizeof qn, f));
    fclose(f);
    qn[strcspn(qn, "\n")] = 0;
    uint16_t gate[256] = {0};
    save("gate_short.npy", QV_DT_U2, 1, 255, 0, 0, gate);
    save("gate_f32.npy", QV_DT_F4, 1, 256, 0, 0, (float[256]){0});
    gate[7] = 0x7F80; /* bf16 +Inf */
    save("gate_inf.npy", QV_DT_U2, 1, 256, 0, 0, gate);
    const struct {
        const char *spec, *gate, *shared, *needle;
    } c[] = {
        {qn, NULL, "1", "--shared-gate SG.npy (1, 256) in bf16 is required"},
        {"w=u4b8,ws=bf16/g32,a=bf16,route=softmax-topk-renorm,topk=4,rw=out,sum=out,logits=bf16",
         QN "shared_gate.npy", "1", "declares no gate"},
        {qn, QN "shared_gate.npy", "0", "there is no shared expert"},
        {qn, at(13, "gate_short.npy"), "1", "--shared-gate"},
        {qn, at(14, "gate_f32.npy"), "1", "--shared-gate"},
        {qn, at(15, "gate_inf.npy"), "1", "gate of shared expert 0, element 7"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        const char *full[] = {"verify", "--spec", c[i].spec, "--a", QN "a.npy", "--q", QN "q.npy", "--scales",
                              QN "scales.npy", "--logits", QN "logits.npy", "--out", QN "out.npy", "--shared",
                              c[i].shared, c[i].gate ? "--shared-gate" : NULL, c[i].gate, NULL};
        const char *need[] = {c[i].needle, NULL};
        qvet_expect(full, 2, need);
    }
    const char *ok[] = {"verify", "--spec", qn, "--a", QN "a.npy", "--q", QN "q.npy", "--scales", QN "scales.npy",
                        "--logits", QN "logits.npy", "--shared", "1", "--shared-gate", QN "shared_gate.npy", "--out",
                        QN "out.npy", NULL};
    const char *pass[] = {"PASS", NULL};
    qvet_expect(ok, 0, pass);
}
END_TEST

/* `qvet replay --dump DIR` of a routed case writes its inputs, output, ids and
 * weights as `qvet verify` reads them, and replay.txt's verify command gives
 * the case's verdict: PASS for the CPU model, on every routed row (shared
 * experts, a selection bias, shared gates, act_order, a bias, block-128
 * activation scales, the expert-parallel shard's map). */
START_TEST(routed_dump_verifies)
{
    for (int i = 0; i < qv_moe_row_count(); i++) {
        const char *row = qv_moe_row_get(i)->name;
        for (int c = 0; c < 2; c++) {
            const char *cs = c ? "23" : "4"; /* a batch with one-hot data; the shard */
            char d[64], file[4400], line[8192];
            snprintf(d, sizeof d, "dump%d_%d", i, c);
            const char *dir = at(c, d);
            const char *rp[] = {"replay", "--check", "--seed", "7", "--case", cs, "--variant", row, "--cpu", "--dump",
                                dir, NULL};
            const char *ok[] = {"PASS", NULL};
            qvet_expect(rp, 0, ok);
            snprintf(file, sizeof file, "%.4200s/replay.txt", dir);
            const char *words[64];
            qvet_command_words(file, line, sizeof line, words, 64);
            ck_assert_str_eq(words[1], "verify");
            qvet_expect(words + 1, 0, ok);
        }
    }
}
END_TEST

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "moe_cli");
    write_case();
}

static void teardown(void) { tmpdir_remove(dir); }

int main(void)
{
    TCase *tc;
    Suite *s = suite_single("moe_cli", "cli", 120, &tc);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, model_output_passes);
    tcase_add_test(tc, bad_outputs_fail);
    tcase_add_test(tc, jobs_same_bits);
    tcase_add_loop_test(tc, malformed_inputs_refused, 0, (int)(sizeof bad_inputs / sizeof bad_inputs[0]));
    tcase_add_test(tc, usage_errors);
    tcase_add_test(tc, score_bias_inputs);
    tcase_add_test(tc, shared_gate_inputs);
    tcase_add_test(tc, routed_dump_verifies);
    return suite_run(s);
}
