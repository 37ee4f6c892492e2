/* t_json.c: the strict JSON reader and the writer helpers (json.h).
 * Valid texts are checked value by value against what RFC 8259 says they
 * mean; invalid ones must be refused with QV_ERR_FORMAT and a message naming
 * the problem; written strings and numbers must read back exactly. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/json.h"

#include "support/suite.h"

static qv_json *parse_ok(const char *text)
{
    qv_json *j;
    qv_status st = qv_json_parse(text, strlen(text), &j);
    ck_assert_msg(st == QV_OK, "refused %s: %s", text, qv_errmsg());
    return j;
}

START_TEST(test_values)
{
    qv_json *j = parse_ok(" {\"s\": \"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\", \"n\": -12.5e1, \"t\": true,"
                          " \"f\": false, \"z\": null, \"a\": [1, [2], {}], \"o\": {\"k\": 0}} \r\n");
    ck_assert_int_eq(qv_json_type_of(j), QV_JSON_OBJECT);
    ck_assert_int_eq(qv_json_len(j), 7);
    ck_assert_str_eq(qv_json_key(j, 0), "s");
    /* é is U+00E9 (C3 A9), the emoji U+1F600 (F0 9F 98 80) from its surrogate pair. */
    ck_assert_str_eq(qv_json_str(qv_json_get(j, "s")), "a\"b\\c/\n\xc3\xa9\xf0\x9f\x98\x80");
    ck_assert_uint_eq(qv_json_get(j, "s")->text_len, 13);
    ck_assert(qv_json_num(qv_json_get(j, "n"), 0) == -125.0);
    ck_assert_int_eq(qv_json_bool(qv_json_get(j, "t"), 0), 1);
    ck_assert_int_eq(qv_json_bool(qv_json_get(j, "f"), 1), 0);
    ck_assert(qv_json_is_null(qv_json_get(j, "z")));
    const qv_json *a = qv_json_get(j, "a");
    ck_assert_int_eq(qv_json_len(a), 3);
    ck_assert(qv_json_num(qv_json_at(a, 0), 0) == 1.0);
    ck_assert(qv_json_num(qv_json_at(qv_json_at(a, 1), 0), 0) == 2.0);
    ck_assert_int_eq(qv_json_type_of(qv_json_at(a, 2)), QV_JSON_OBJECT);
    ck_assert_int_eq(qv_json_len(qv_json_at(a, 2)), 0);
    ck_assert_ptr_null(qv_json_at(a, 3));
    ck_assert_ptr_null(qv_json_at(a, -1));
    ck_assert_ptr_null(qv_json_key(a, 0));
    /* Absent keys and wrong types give the defaults, and chains stay safe. */
    ck_assert_ptr_null(qv_json_get(j, "missing"));
    ck_assert_ptr_null(qv_json_str(qv_json_get(j, "n")));
    ck_assert(isnan(qv_json_num(qv_json_get(j, "s"), NAN)));
    ck_assert_int_eq(qv_json_bool(NULL, 7), 7);
    ck_assert_ptr_null(qv_json_get(qv_json_get(qv_json_get(j, "x"), "y"), "z"));
    ck_assert_int_eq(qv_json_len(NULL), 0);
    ck_assert(!qv_json_is_null(NULL));
    ck_assert_int_eq(qv_json_type_of(NULL), QV_JSON_NULL);
    ck_assert_str_eq(qv_json_type_name(QV_JSON_ARRAY), "array");
    qv_json_free(j);
    qv_json_free(NULL);
}
END_TEST

START_TEST(test_scalars_at_top)
{
    static const char *const texts[] = {"0", "-0", "\"\"", "true", "null", "[]", "1E+2", "  3.25  "};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) qv_json_free(parse_ok(texts[i]));
    qv_json *j = parse_ok("1E+2");
    ck_assert(j->number == 100.0);
    ck_assert_str_eq(j->text, "1E+2");
    qv_json_free(j);
    /* Not NUL-terminated: only len bytes are read. */
    char buf[4] = {'[', '7', ']', 'x'};
    ck_assert_int_eq(qv_json_parse(buf, 3, &j), QV_OK);
    ck_assert(qv_json_num(qv_json_at(j, 0), 0) == 7.0);
    qv_json_free(j);
}
END_TEST

START_TEST(test_integers)
{
    qv_json *j = parse_ok("[9007199254740993, -9223372036854775808, 9223372036854775807,"
                          " 9223372036854775808, 18446744073709551615, 18446744073709551616, 1.0, 1e3, -1]");
    int64_t v;
    uint64_t u;
    ck_assert(qv_json_int64(qv_json_at(j, 0), &v) == QV_OK);
    ck_assert_int_eq(v, 9007199254740993ll); /* 2^53 + 1, which a double cannot hold */
    ck_assert(qv_json_int64(qv_json_at(j, 1), &v) == QV_OK);
    ck_assert(v == INT64_MIN);
    ck_assert(qv_json_int64(qv_json_at(j, 2), &v) == QV_OK);
    ck_assert(v == INT64_MAX);
    ck_assert_int_eq(qv_json_int64(qv_json_at(j, 3), &v), QV_ERR_FORMAT);
    ck_assert(qv_json_uint64(qv_json_at(j, 3), &u) == QV_OK);
    ck_assert(u == 9223372036854775808ull);
    ck_assert(qv_json_uint64(qv_json_at(j, 4), &u) == QV_OK);
    ck_assert(u == UINT64_MAX);
    ck_assert_int_eq(qv_json_uint64(qv_json_at(j, 5), &u), QV_ERR_FORMAT);
    ck_assert_int_eq(qv_json_int64(qv_json_at(j, 6), &v), QV_ERR_FORMAT);
    ck_assert_int_eq(qv_json_int64(qv_json_at(j, 7), &v), QV_ERR_FORMAT);
    ck_assert_int_eq(qv_json_uint64(qv_json_at(j, 8), &u), QV_ERR_FORMAT);
    ck_assert(qv_json_int64(qv_json_at(j, 8), &v) == QV_OK && v == -1);
    ck_assert_int_eq(qv_json_int64(NULL, &v), QV_ERR_FORMAT);
    qv_json_free(j);
}
END_TEST

typedef struct bad {
    const char *text;
    const char *needle;
} bad;

static const bad bads[] = {
    {"", "expected a JSON value at byte 0"},
    {"   ", "found end of text"},
    {"[1,]", "expected a JSON value at byte 3"},
    {"[1 2]", "',' or ']'"},
    {"{\"a\" 1}", "':' after a key"},
    {"{a:1}", "a quoted key"},
    {"{\"a\":1,}", "a quoted key"},
    {"{\"a\":1", "',' or '}'"},
    {"[1] [2]", "end of text after the value"},
    {"01", "leading zero"},
    {"-", "a digit"},
    {"1.", "after the decimal point"},
    {"1e", "in the exponent"},
    {".5", "a JSON value"},
    {"+1", "a JSON value"},
    {"1e400", "beyond the double range"},
    {"NaN", "a JSON value"},
    {"tru", "a JSON value"},
    {"\"abc", "unterminated string"},
    {"\"a\tb\"", "raw control character 0x09"},
    {"\"\\x\"", "invalid escape"},
    {"\"\\u12\"", "bad \\u escape"},
    {"\"\\u0000\"", "\\u0000"},
    {"\"\\ud800\"", "unpaired UTF-16 high surrogate"},
    {"\"\\udc00\"", "unpaired UTF-16 low surrogate"},
    {"\"\xc3\"", "invalid UTF-8"},
    {"\"\xc0\x80\"", "invalid UTF-8"},
    {"\"\xed\xa0\x80\"", "invalid UTF-8"},
    {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},
    {"{\"k\":1,\"k\":2}", "duplicate key \"k\""},
    {"'a'", "a JSON value"},
};

START_TEST(test_refused)
{
    const bad *b = &bads[_i];
    size_t n = strlen(b->text);
    /* An exact-size copy, so ASan would see any read past the end. */
    char *exact = malloc(n ? n : 1);
    memcpy(exact, b->text, n);
    qv_json *j = (qv_json *)exact;
    qv_status st = qv_json_parse(exact, n, &j);
    printf("%-22s -> %s\n", b->text, qv_errmsg());
    ck_assert_msg(st == QV_ERR_FORMAT, "accepted %s", b->text);
    ck_assert_ptr_null(j);
    ck_assert_msg(strstr(qv_errmsg(), b->needle), "message \"%s\" lacks \"%s\"", qv_errmsg(), b->needle);
    free(exact);
}
END_TEST

START_TEST(test_depth_limit)
{
    char text[2 * QV_JSON_MAX_DEPTH + 8];
    for (int depth = QV_JSON_MAX_DEPTH; depth <= QV_JSON_MAX_DEPTH + 1; depth++) {
        for (int i = 0; i < depth; i++) {
            text[i] = '[';
            text[depth + i] = ']';
        }
        qv_json *j;
        qv_status st = qv_json_parse(text, 2 * (size_t)depth, &j);
        if (depth <= QV_JSON_MAX_DEPTH) {
            ck_assert_msg(st == QV_OK, "depth %d refused: %s", depth, qv_errmsg());
            qv_json_free(j);
        } else {
            ck_assert_int_eq(st, QV_ERR_FORMAT);
            ck_assert_ptr_nonnull(strstr(qv_errmsg(), "nesting deeper"));
        }
    }
}
END_TEST

/* Many members: the duplicate check stays correct past its sort. */
START_TEST(test_many_keys)
{
    enum { N = 5000 };
    char *text = malloc((size_t)N * 16 + 16);
    size_t n = 0;
    text[n++] = '{';
    for (int i = 0; i < N; i++) n += (size_t)sprintf(text + n, "%s\"k%d\":%d", i ? "," : "", i, i);
    text[n++] = '}';
    qv_json *j;
    ck_assert(qv_json_parse(text, n, &j) == QV_OK);
    ck_assert_int_eq(qv_json_len(j), N);
    ck_assert(qv_json_num(qv_json_get(j, "k4321"), -1) == 4321.0);
    qv_json_free(j);
    /* Turn the last key into a copy of the first (same length, padded with spaces). */
    char *last = strstr(text, "\"k4999\"");
    memcpy(last, "\"k0\"   ", 7);
    ck_assert_int_eq(qv_json_parse(text, n, &j), QV_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(qv_errmsg(), "duplicate key \"k0\""));
    free(text);
}
END_TEST

START_TEST(test_writer_strings)
{
    static const char *const samples[] = {"plain", "", "quote \" backslash \\ slash /", "tab\tnl\ncr\rbs\bff\f",
                                          "\x01\x1f ctrl", "utf-8 \xc3\xa9 \xf0\x9f\x98\x80", "del \x7f"};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        size_t need = qv_json_sput_str(NULL, 0, samples[i]);
        char *buf = malloc(need + 1);
        ck_assert_uint_eq(qv_json_sput_str(buf, need + 1, samples[i]), need);
        ck_assert_uint_eq(strlen(buf), need);
        qv_json *j;
        ck_assert_msg(qv_json_parse(buf, need, &j) == QV_OK, "%s: %s", buf, qv_errmsg());
        ck_assert_str_eq(qv_json_str(j), samples[i]);
        qv_json_free(j);
        /* The same text through a FILE. */
        char *mem;
        size_t memlen;
        FILE *f = open_memstream(&mem, &memlen);
        qv_json_fput_str(f, samples[i]);
        fclose(f);
        ck_assert_str_eq(mem, buf);
        free(mem);
        free(buf);
    }
    /* Truncation: always terminated, and the full length is reported. */
    char small[5];
    ck_assert_uint_eq(qv_json_sput_str(small, sizeof small, "abcdef"), 8);
    ck_assert_str_eq(small, "\"abc");
    ck_assert_uint_eq(qv_json_sput_str(small, sizeof small, "a\n"), 5);
    ck_assert_str_eq(small, "\"a\\n");
}
END_TEST

START_TEST(test_writer_numbers)
{
    static const double xs[] = {0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 6.02214076e23, 5e-324, 1.7976931348623157e308,
                                -2.5, 65504.0, 123456789012345678.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        char *mem;
        size_t memlen;
        FILE *f = open_memstream(&mem, &memlen);
        qv_json_fput_num(f, xs[i]);
        fclose(f);
        qv_json *j;
        ck_assert_msg(qv_json_parse(mem, memlen, &j) == QV_OK, "%s: %s", mem, qv_errmsg());
        double back = qv_json_num(j, NAN);
        ck_assert_msg(memcmp(&back, &xs[i], sizeof back) == 0, "%.17g written as %s", xs[i], mem);
        qv_json_free(j);
        free(mem);
    }
    static const double bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 3; i++) {
        char *mem;
        size_t memlen;
        FILE *f = open_memstream(&mem, &memlen);
        qv_json_fput_num(f, bad[i]);
        fclose(f);
        ck_assert_str_eq(mem, "null");
        free(mem);
    }
    /* The shortest form is chosen when it reads back: 0.1, not 0.10000000000000001. */
    char *mem;
    size_t memlen;
    FILE *f = open_memstream(&mem, &memlen);
    qv_json_fput_num(f, 0.1);
    fclose(f);
    ck_assert_str_eq(mem, "0.1");
    free(mem);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_scalars_at_top);
    tcase_add_test(tc, test_integers);
    tcase_add_loop_test(tc, test_refused, 0, (int)(sizeof bads / sizeof bads[0]));
    tcase_add_test(tc, test_depth_limit);
    tcase_add_test(tc, test_many_keys);
    tcase_add_test(tc, test_writer_strings);
    tcase_add_test(tc, test_writer_numbers);
    suite_add_tcase(s, tc);
    return suite_run(s);
}
