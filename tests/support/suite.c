/* suite.c: suite.h. */
#include "support/suite.h"

#include <stdlib.h>

int suite_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

Suite *suite_single(const char *name, const char *tcase, double timeout_s, TCase **tc)
{
    Suite *s = suite_create(name);
    *tc = tcase_create(tcase);
    tcase_set_timeout(*tc, timeout_s);
    suite_add_tcase(s, *tc);
    return s;
}
