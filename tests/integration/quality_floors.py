#!/usr/bin/env python3
"""Checks the image-quality floors of issue 6 on two `ldct quality --json`
outputs (input = low dose, output = denoised, both against the truth).
Usage: quality_floors.py INPUT.json OUTPUT.json [--cnr-lesions all|20|20,10]
Prints one line per floor with the numbers; exit 1 when one fails.
Floors: PSNR +3 dB, noise sd at most half, |bias| <= 2 HU in every ROI,
CNR higher than the input for the chosen lesions (nominal contrast in HU;
the mean CNR over all lesions must rise in every case), edge rise distance
grows by at most 10%."""
import json, sys

a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
which = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--cnr-lesions" else "all"
ok = True


def check(cond, text):
    global ok
    ok = ok and cond
    print(("ok   " if cond else "FAIL ") + text)


check(b["psnr"] >= a["psnr"] + 3, "psnr %.2f -> %.2f dB (+%.2f, floor +3)" % (a["psnr"], b["psnr"], b["psnr"] - a["psnr"]))
check(b["noise_sd"] <= a["noise_sd"] / 2, "noise %.2f -> %.2f HU (x%.3f, floor 0.5)" % (a["noise_sd"], b["noise_sd"], b["noise_sd"] / a["noise_sd"]))
check(b["max_abs_bias_hu"] <= 2, "worst |bias| %.2f HU (floor 2; input %.2f)" % (b["max_abs_bias_hu"], a["max_abs_bias_hu"]))
check(b["edge_rise_mm"] <= 1.1 * a["edge_rise_mm"], "edge rise %.3f -> %.3f mm (x%.3f, floor 1.10)" % (a["edge_rise_mm"], b["edge_rise_mm"], b["edge_rise_mm"] / a["edge_rise_mm"]))
sel = None if which == "all" else {float(x) for x in which.split(",")}
for la, lb in zip(a["lesions"], b["lesions"]):
    name = "lesion %4.1f mm +%2.0f HU" % (la["diameter_mm"], la["nominal_hu"])
    text = "%s: cnr %.2f -> %.2f" % (name, la["cnr"], lb["cnr"])
    if sel is None or la["nominal_hu"] in sel:
        check(lb["cnr"] > la["cnr"], text)
    else:
        print("info " + text)
ma = sum(a["cnr"]) / len(a["cnr"])
mb = sum(b["cnr"]) / len(b["cnr"])
check(mb > ma, "mean cnr %.3f -> %.3f" % (ma, mb))
sys.exit(0 if ok else 1)
