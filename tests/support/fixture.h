/* fixture.h: the formula the numpy- and safetensors-written fixtures hold
 * (tests/data/make_fixtures.py), random contents for round trips, and the
 * check of a refused input. Included by t_npy and t_safetensors; linked into
 * every test binary from tests/support/. Rule: expected values are derived
 * here from the element index, independently of the library's converters, and
 * every failure is a Check assertion. */
#ifndef QVET_TEST_FIXTURE_H
#define QVET_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "qvet/array.h"
#include "qvet/status.h"

/* One fixture array: its name (file stem or tensor name), dtype and shape. */
typedef struct fixture_spec {
    const char *name;
    qv_dtype dtype;
    int ndim;
    int64_t shape[4];
} fixture_spec;

/* 1 if element i of a (any dtype the fixtures use) holds the formula's value. */
int fixture_element_ok(const qv_array *a, int64_t i);

/* Asserts that a has x's dtype and shape, the element count and byte size
 * they imply, and the formula's value in every element; `what` names the
 * array in messages. */
void fixture_assert_array(const qv_array *a, const fixture_spec *x, const char *what);

/* Fills a's bytes with random bytes: byte k is test_rnd(seed, stream, k)
 * (rand.h), so the contents replay from the seed. */
void fixture_fill_random(qv_array *a, uint64_t seed, uint64_t stream);

/* Asserts that `parse` refuses every proper prefix of the file at path with
 * QV_ERR_FORMAT and a message, each prefix in a buffer of exactly its size,
 * and accepts the whole file. parse returns the status and releases whatever
 * it parsed. */
void fixture_assert_prefixes_refused(const char *path, qv_status (*parse)(const void *buf, size_t len));

/* Asserts that a refusal returned `want` (got is what it returned) with a
 * message (qv_errmsg) that contains `needle`; `what` names the case. */
void fixture_assert_refused(qv_status got, qv_status want, const char *needle, const char *what);

#endif
