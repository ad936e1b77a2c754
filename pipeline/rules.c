/* Rule matching; see rules.h. */
#include "pipeline/rules.h"

#include <math.h>

static int in_range(const cfg_range *r, double v)
{
    if (!r->set)
        return 1;
    return !isnan(v) && v >= r->lo && v <= r->hi;
}

static int matches(const cfg_rule *r, const rule_series *s)
{
    if (r->action == RULE_PROCESS && s->not_processable)
        return 0; /* `both` still matches: it sends the original only */
    return config_glob_match(r->modality, s->modality) &&
           config_glob_match(r->calling_ae, s->calling_ae) &&
           config_glob_match(r->called_ae, s->called_ae) &&
           config_glob_match(r->series_description, s->series_description) &&
           config_glob_match(r->protocol_name, s->protocol_name) &&
           config_glob_match(r->body_part_examined, s->body_part_examined) &&
           config_glob_match(r->manufacturer, s->manufacturer) &&
           config_glob_match(r->image_type, s->image_type ? s->image_type : "") &&
           in_range(&r->slice_thickness, s->slice_thickness) && in_range(&r->kvp, s->kvp) &&
           in_range(&r->ctdivol, s->ctdivol) && in_range(&r->exposure, s->exposure);
}

const cfg_rule *rules_match(const ldct_config *cfg, const rule_series *s)
{
    const cfg_rule *ordered[CFG_RULE_MAX];
    int n = config_rules_ordered(cfg, ordered, CFG_RULE_MAX);
    for (int i = 0; i < n; i++)
        if (matches(ordered[i], s))
            return ordered[i];
    return NULL;
}

cfg_algorithm rules_algorithm(const cfg_rule *r, double slice_thickness)
{
    if (r->algorithm != ALGO_AUTO)
        return (cfg_algorithm)r->algorithm;
    return !isnan(slice_thickness) && slice_thickness > 2.0 ? ALGO_NLM2D : ALGO_NLM3D;
}
