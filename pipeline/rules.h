/* rules: which rule a stable series falls under, and what `auto` means.
 * Pure functions over a loaded configuration; any thread. */
#ifndef LDCT_PIPELINE_RULES_H
#define LDCT_PIPELINE_RULES_H

#include "config/config.h"

/* The attributes rules match on. Strings never NULL ("" when absent);
 * numbers NAN when absent (a rule with a range on it then does not match). */
typedef struct rule_series {
    const char *modality, *calling_ae, *called_ae;
    const char *series_description, *protocol_name, *body_part_examined, *manufacturer;
    const char *image_type; /* "ORIGINAL\\PRIMARY\\AXIAL" */
    double slice_thickness, kvp, ctdivol, exposure;
    /* Why the series can never be processed (asm_not_processable), or NULL:
     * `process` rules do not match it. */
    const char *not_processable;
} rule_series;

/* The first rule (by priority, then file order) that matches, or NULL. A
 * `process` rule never matches a series that cannot be processed
 * (s->not_processable); `both` (which then only sends the original),
 * `route` and `discard` rules still do. */
const cfg_rule *rules_match(const ldct_config *cfg, const rule_series *s);

/* The algorithm a rule runs on a series: `auto` is nlm2d for slices
 * thicker than 2 mm and nlm3d otherwise (seed 000's advice; nlm3d also
 * when the thickness is unknown). */
cfg_algorithm rules_algorithm(const cfg_rule *r, double slice_thickness);

#endif
