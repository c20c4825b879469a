#!/usr/bin/env bash
# The HTML report in a real browser: Debian's chromium, headless, loads the page a user would open
# (Llama-3.1-8B-Instruct on the h200-sxm, with a campaign measured beside it, so every chart kind is
# drawn) and the matrix's heat map (MATRIX.html); each must log nothing to the console. The DOM it
# built must hold the step-time charts with their lines and measured points, the roofline and the
# heat map's cells, and every SVG of the report must parse as XML. The check is proven to fail: a
# page with a console error is refused by the same test.
# Usage: html_chromium.sh MET
set -uo pipefail
met="$1"
source "$(dirname "$0")/../cli/lib.sh"
w="$(mktemp -d)"
trap 'rm -rf "$w"' EXIT
browser=$(command -v chromium || command -v chromium-browser) || { bad "chromium is installed (scripts/setup.sh)" "not found"; finish html_chromium; exit 1; }

# load FILE: the DOM chromium built (stdout) and its console lines (FILE.console)
load() {
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$w/profile" \
    --enable-logging=stderr --v=0 --dump-dom "file://$1" 2>"$1.log"
  local rc=$?
  grep ':CONSOLE' "$1.log" >"$1.console"
  return $rc
}

# A campaign for the plan's C=1 and C=4 programs (their digests from the plan's own JSON).
"$met" circuit plan --hardware h200-sxm --model llama-3.1-8b-instruct --format json >"$w/plan.json" 2>"$w/err" ||
  { bad "plan json" "$(cat "$w/err")"; finish html_chromium; exit 1; }
python3 - "$w/plan.json" "$w/campaign.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
cases = [{"kind": "decode", "rows": d["rows"], "ctx": d["context"], "ms": {"median": 2e3 * d["prediction_s"]}, "plan_digest": d["plan_digest"]}
         for d in plan["decode"] if d["rows"] in (1, 4)]
json.dump({"schema": "met-campaign/1", "hardware": "h200-sxm", "stamp": "20261201T000000Z", "cases": cases}, open(sys.argv[2], "w"))
PY
"$met" circuit plan --hardware h200-sxm --model llama-3.1-8b-instruct --format html --measured "$w/campaign.json" >"$w/report.html" 2>"$w/err" ||
  { bad "plan html" "$(cat "$w/err")"; finish html_chromium; exit 1; }

if load "$w/report.html" >"$w/dom.html"; then ok "chromium loads the report"; else bad "chromium loads the report" "$(tail -5 "$w/report.html.log")"; fi
[[ ! -s $w/report.html.console ]] && ok "no console messages" || bad "no console messages" "$(cat "$w/report.html.console")"
python3 - "$w/dom.html" "$w/report.html" <<'PY' && ok "the DOM holds both step charts (four lines, the two measured points and legend) and the roofline; every svg is XML" || bad "the charts in the DOM" "see above"
import re, sys, xml.etree.ElementTree as ET
dom, page = open(sys.argv[1]).read(), open(sys.argv[2]).read()
charts = re.findall(r'<svg[^>]*class="step-chart".*?</svg>', dom, re.S)
assert len(charts) == 2, f"{len(charts)} step charts"
assert sum(c.count("<polyline") for c in charts) == 4, "lines"
assert charts[0].count("<circle") == 3, f"{charts[0].count('<circle')} circles in the decode chart (2 points and the legend's)"
roof = re.findall(r'<svg[^>]*class="roofline".*?</svg>', dom, re.S)
assert len(roof) == 1 and 'class="roof"' in roof[0] and 'class="prediction"' in roof[0], "the roofline"
for s in re.findall(r"<svg .*?</svg>", page, re.S):
    ET.fromstring(s)
PY

# The matrix heat map (MATRIX.html of --matrix): one cell per golden model x device.
"$met" circuit plan --matrix "$w/matrix" >/dev/null 2>"$w/err" || { bad "plan --matrix" "$(cat "$w/err")"; finish html_chromium; exit 1; }
if load "$w/matrix/MATRIX.html" >"$w/matrix-dom.html"; then ok "chromium loads MATRIX.html"; else bad "chromium loads MATRIX.html" "$(tail -5 "$w/matrix/MATRIX.html.log")"; fi
[[ ! -s $w/matrix/MATRIX.html.console ]] && ok "MATRIX.html: no console messages" || bad "MATRIX.html: no console messages" "$(cat "$w/matrix/MATRIX.html.console")"
cells=$(($(ls "$w/matrix"/*--*.md | wc -l)))
python3 - "$w/matrix-dom.html" "$cells" <<'PY' && ok "the heat map has one coloured cell per report ($cells)" || bad "the heat map's cells" "see above"
import re, sys
dom, cells = open(sys.argv[1]).read(), int(sys.argv[2])
maps = re.findall(r'<svg[^>]*class="heat-map".*?</svg>', dom, re.S)
assert len(maps) == 1, f"{len(maps)} heat maps"
assert maps[0].count("<rect") == cells, f"{maps[0].count('<rect')} cells, {cells} reports"
PY

# The same check refuses a page that logs to the console.
echo '<!DOCTYPE html><html><body><script>console.error("broken")</script></body></html>' >"$w/bad.html"
load "$w/bad.html" >/dev/null
grep -q '"broken"' "$w/bad.html.console" && ok "a console error is seen (the check can fail)" || bad "a console error is seen" "$(cat "$w/bad.html.log" | tail -3)"
finish html_chromium
