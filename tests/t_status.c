/* t_status.c: status names, qv_fail's message buffer, exit codes, and
 * QV_ASSERT aborting (status.h). Expected values are the contract stated in
 * status.h: 0 for QV_OK, 2 for input and usage errors, 3 for environment ones. */
#include "qvet/status.h"

#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

START_TEST(names_are_distinct)
{
    for (int a = QV_OK; a <= QV_ERR_NODEVICE; a++) {
        const char *na = qv_status_str((qv_status)a);
        ck_assert_ptr_nonnull(na);
        ck_assert_int_gt((int)strlen(na), 0);
        for (int b = a + 1; b <= QV_ERR_NODEVICE; b++)
            ck_assert_str_ne(na, qv_status_str((qv_status)b));
    }
    ck_assert_str_eq(qv_status_str(QV_OK), "ok");
}
END_TEST

START_TEST(fail_records_message)
{
    qv_status st = qv_fail(QV_ERR_SHAPE, "K=%d is not a multiple of g=%d", 100, 64);
    ck_assert_int_eq(st, QV_ERR_SHAPE);
    ck_assert_str_eq(qv_errmsg(), "K=100 is not a multiple of g=64");
    /* a longer message than the buffer is cut, never overrun */
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    qv_fail(QV_ERR_IO, "%s", big);
    size_t len = strlen(qv_errmsg());
    ck_assert(len > 0 && len < sizeof big - 1);
    qv_fail(QV_ERR_USAGE, "second");
    ck_assert_str_eq(qv_errmsg(), "second");
}
END_TEST

START_TEST(exit_codes)
{
    ck_assert_int_eq(qv_status_exit_code(QV_OK), 0);
    const qv_status input[] = {QV_ERR_USAGE, QV_ERR_IO,    QV_ERR_FORMAT,     QV_ERR_DTYPE,
                               QV_ERR_SHAPE, QV_ERR_RANGE, QV_ERR_UNSUPPORTED};
    for (size_t i = 0; i < sizeof input / sizeof input[0]; i++)
        ck_assert_int_eq(qv_status_exit_code(input[i]), 2);
    const qv_status env[] = {QV_ERR_NOMEM, QV_ERR_CUDA, QV_ERR_NODEVICE};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++)
        ck_assert_int_eq(qv_status_exit_code(env[i]), 3);
}
END_TEST

static qv_status try_twice(int fail_first)
{
    QV_TRY(fail_first ? qv_fail(QV_ERR_RANGE, "q=16 > 15") : QV_OK);
    return QV_ERR_DTYPE;
}

START_TEST(try_propagates)
{
    ck_assert_int_eq(try_twice(1), QV_ERR_RANGE);
    ck_assert_int_eq(try_twice(0), QV_ERR_DTYPE);
}
END_TEST

/* Check runs this in a forked child and expects SIGABRT. */
START_TEST(assert_aborts)
{
    int one = 1;
    QV_ASSERT(one == 2, "this assertion is meant to fail");
}
END_TEST

START_TEST(assert_passes)
{
    int one = 1;
    QV_ASSERT(one == 1, "never shown");
}
END_TEST

static Suite *status_suite(void)
{
    Suite *su = suite_create("status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, names_are_distinct);
    tcase_add_test(tc, fail_records_message);
    tcase_add_test(tc, exit_codes);
    tcase_add_test(tc, try_propagates);
    tcase_add_test_raise_signal(tc, assert_aborts, SIGABRT);
    tcase_add_test(tc, assert_passes);
    suite_add_tcase(su, tc);
    return su;
}

int main(void)
{
    SRunner *sr = srunner_create(status_suite());
    /* assert_aborts needs a child process to die in */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
