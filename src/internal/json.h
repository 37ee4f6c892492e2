/* json.h: a small strict JSON reader (text -> tree) and writer helpers.
 * Included by the .safetensors reader, `qvet list`, the report renderer, the
 * campaign (JSONL results) and tests. Rule: input is RFC 8259 JSON and nothing
 * else; anything else is refused with a qv_status (QV_ERR_FORMAT) and a message
 * naming the byte offset. Parsing never reads past `len` bytes.
 *
 * Reader, in one screen:
 *
 *   qv_json *root;
 *   if (qv_json_parse(line, strlen(line), &root) != QV_OK) { ... qv_errmsg() ... }
 *   const char *name = qv_json_str(qv_json_get(root, "variant"));   NULL if absent
 *   double e = qv_json_num(qv_json_get(root, "max_err"), NAN);       default if absent
 *   int64_t m;  qv_json_int64(qv_json_get(root, "m"), &m);           exact integers
 *   const qv_json *dims = qv_json_get(root, "shape");
 *   for (int i = 0; i < qv_json_len(dims); i++) ... qv_json_at(dims, i) ...
 *   qv_json_free(root);
 *
 * Strictness: one value per text (surrounded by optional whitespace); strings
 * are valid UTF-8 without raw control characters; "\u0000" is refused (strings
 * are handed out NUL-terminated); duplicate keys in one object are refused;
 * nesting deeper than QV_JSON_MAX_DEPTH is refused; numbers follow the JSON
 * grammar exactly and must be finite as doubles. Every getter accepts NULL and
 * a node of the wrong type, and then returns its "absent" answer, so lookups
 * chain without checks in between.
 *
 * Writer: qv_json_fput_str / qv_json_sput_str quote and escape a string;
 * qv_json_fput_num writes a double that reads back bit-exactly (non-finite
 * values, which JSON cannot hold, are written as null). */
#ifndef QVET_JSON_H
#define QVET_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qvet/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Deep enough for any results line or file header qvet reads, shallow enough
 * that the recursive parser cannot exhaust the stack on hostile input. */
#define QV_JSON_MAX_DEPTH 64

typedef enum qv_json_type {
    QV_JSON_NULL = 0,
    QV_JSON_BOOL,
    QV_JSON_NUMBER,
    QV_JSON_STRING,
    QV_JSON_ARRAY,
    QV_JSON_OBJECT
} qv_json_type;

/* One node. Fields are readable directly; the getters below are the easy way. */
typedef struct qv_json {
    qv_json_type type;
    int boolean;          /* QV_JSON_BOOL: 0 or 1 */
    double number;        /* QV_JSON_NUMBER: the value, correctly rounded */
    char *text;           /* QV_JSON_STRING: decoded UTF-8, NUL-terminated;
                             QV_JSON_NUMBER: the number's source text */
    size_t text_len;      /* bytes in text, without the NUL */
    int count;            /* QV_JSON_ARRAY / QV_JSON_OBJECT: number of items */
    struct qv_json *items;/* (count) item nodes, in source order */
    char **keys;          /* QV_JSON_OBJECT: (count) member names, NUL-terminated */
    size_t offset;        /* byte offset of the value in the parsed text */
} qv_json;

/* Parses text[0..len) (need not be NUL-terminated) into a tree owned by the
 * caller (*out; free with qv_json_free). On failure *out is NULL and the
 * message names the byte offset and what was expected. */
qv_status qv_json_parse(const char *text, size_t len, qv_json **out);
void qv_json_free(qv_json *j);

/* Type of a node; QV_JSON_NULL for a NULL pointer. */
qv_json_type qv_json_type_of(const qv_json *j);
/* Short name of a type: "null", "bool", "number", "string", "array", "object". */
const char *qv_json_type_name(qv_json_type t);

/* Object member by key, or NULL (also when j is not an object). */
const qv_json *qv_json_get(const qv_json *j, const char *key);
/* Items of an array or object: count, i-th value, i-th key (objects only). */
int qv_json_len(const qv_json *j);                  /* 0 if not array/object */
const qv_json *qv_json_at(const qv_json *j, int i); /* NULL if out of range */
const char *qv_json_key(const qv_json *j, int i);   /* NULL if not an object */

/* Scalar values, or the given default when j is NULL or of another type. */
const char *qv_json_str(const qv_json *j);          /* NULL if not a string */
double qv_json_num(const qv_json *j, double dflt);
int qv_json_bool(const qv_json *j, int dflt);
int qv_json_is_null(const qv_json *j);              /* 1 only for a JSON null */
/* Exact integer from a number's source text: refuses (QV_ERR_FORMAT) fractions,
 * exponents, values beyond int64 and non-numbers, so 2^53+1 reads exactly. */
qv_status qv_json_int64(const qv_json *j, int64_t *out);
/* The same for non-negative integers up to UINT64_MAX. */
qv_status qv_json_uint64(const qv_json *j, uint64_t *out);

/* Writes s as a quoted JSON string ("a\"b\n"). Bytes >= 0x80 pass through
 * unchanged (the caller's text is UTF-8); control characters are escaped. */
void qv_json_fput_str(FILE *f, const char *s);
/* The same into buf (always NUL-terminated when cap > 0); returns the length
 * the full output needs, like snprintf, so a too-small buf is detectable. */
size_t qv_json_sput_str(char *buf, size_t cap, const char *s);
/* Writes a double in the shortest "%.17g"-style form that reads back to the
 * same bits; NaN and +-Inf are written as null. */
void qv_json_fput_num(FILE *f, double x);

#ifdef __cplusplus
}
#endif
#endif
