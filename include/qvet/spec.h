/* spec.h: a variant's declared arithmetic written as text, the spec grammar v1
 * of docs/design.md §2 (docs/spec.md). Included by the CLI, the campaign, the plugin
 * loader and any C program that verifies a kernel qvet did not write. Rule: the
 * spec is parsed in one place (src/spec.c) and a variant built from it is a
 * plain registry-style row (variant.h) with the logical layout and no launch;
 * anything the grammar cannot mean is refused with the key and the reason. */
#ifndef QVET_SPEC_H
#define QVET_SPEC_H

#include <stddef.h>

#include "qvet/status.h"
#include "qvet/variant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest canonical spec qv_spec_format writes, terminator included. */
#define QV_SPEC_MAX 256

/* Parses a spec ("w=u4b8,ws=f16/g128", keys in any order, omitted keys at
 * their defaults) into a variant: family "spec", name the canonical spec,
 * layout QV_LAYOUT_LOGICAL, no GPU launch, a CPU model. The variant is
 * interned: it stays valid for the life of the process and one canonical spec
 * always gives the same pointer (thread-safe). A bad spec returns QV_ERR_USAGE
 * and a message naming the key, the value and what is accepted or why the
 * combination has no meaning. */
qv_status qv_spec_parse(const char *text, const qv_variant **out);

/* A registry row's name, or else a spec (anything holding '='). Unknown names
 * return QV_ERR_USAGE naming `qvet list`. */
qv_status qv_variant_resolve(const char *name_or_spec, const qv_variant **out);

/* 1 when the string is written as a spec rather than a row name. */
int qv_is_spec(const char *s);

/* The canonical spec of any variant, a registry row or a parsed spec: keys in
 * the grammar's order, keys at their default omitted. Returns the length, or
 * -1 (buf then holds a message) when a row's arithmetic has no spelling in
 * the grammar. len >= QV_SPEC_MAX always suffices. */
int qv_spec_format(const qv_variant *v, char *buf, size_t len);

/* The fp32 epilogue steps a variant's fields imply in the grammar's default
 * order (docs/design.md §2: accumulator, channel scales, activation scale, tensor
 * scales, bias), QV_EP_END-terminated; what qv_spec_parse uses without ep=. */
void qv_spec_default_epilogue(const qv_variant *v, qv_ep_step ep[QV_EP_MAX]);

/* K extent of the partial sums that scales varying along K multiply (a group
 * or block weight scale applied with dq=exact, a per-128-K activation scale):
 * the accumulator restarts there and each partial is scaled and added in fp32.
 * 0 when the variant has no such scales. */
int qv_spec_segment(const qv_variant *v);

#ifdef __cplusplus
}
#endif
#endif
