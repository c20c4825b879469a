# Call 1: the longest-first placement of flash slices (new) against the round-robin one (old, c1a80da),
# prefill campaigns of three shapes, old first; then ncu's stall sampling of one Qwen3-0.6B prefill of 4096.
for b in met met-old; do [[ -f .device/$b ]] || { xz -d -T4 .device/$b.xz && chmod +x .device/$b; }; done
mkdir -p $OUT; t0=$SECONDS
for v in old new; do
  b=.device/met; [[ $v == old ]] && b=.device/met-old
  MET=$b OUT=$OUT/$v WORK=/tmp/metw BUCKETS=128,512,4096 OPTEST_MODELS=" " bash bench/prefill_check.sh qwen3-0.6b,llama-3.2-1b,llama-3.1-8b > $OUT/$v-log.txt 2>&1
  echo "$v rc $? at $((SECONDS-t0)) s"; grep -E "T=(128|512|4096)" $OUT/$v-log.txt | cut -c1-200
done
export LD_LIBRARY_PATH=/tmp/metw/lib
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
timeout 400 $ncu --clock-control none -k regex:metinterp -c 1 --section WarpStateStats --section SourceCounters \
  --section SpeedOfLight --section LaunchStats -o $OUT/prof .device/met circuit run --assets /tmp/metw/qwen3-0.6b-p \
  --backend cuda --campaign prefill:4096 --warmup 0 --repeats 1 > $OUT/ncu-log.txt 2>&1
echo "ncu rc $? at $((SECONDS-t0)) s"; tail -5 $OUT/ncu-log.txt
$ncu --import $OUT/prof.ncu-rep --page details --csv > $OUT/details.csv 2>&1
$ncu --import $OUT/prof.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>$OUT/source-err.txt
echo "source rows $(wc -l < $OUT/source.csv)"; head -c 600 $OUT/source.csv; cat $OUT/source-err.txt | head -5
python3 - $OUT <<'PY'
import csv, sys, io
out = sys.argv[1]
rows = list(csv.reader(open(out + "/source.csv", newline="")))
hdr = rows[0]; body = [r for r in rows[1:] if len(r) == len(hdr)]
col = next((i for i, h in enumerate(hdr) if "Stall Sampling (All" in h), None)
print("columns:", hdr)
if col is not None:
    num = lambda r: float(r[col].replace(",", "") or 0)
    tot = sum(num(r) for r in body)
    top = sorted(range(len(body)), key=lambda i: -num(body[i]))[:600]
    with open(out + "/top.csv", "w", newline="") as f:
        w = csv.writer(f); w.writerow(["row"] + hdr)
        for i in top: w.writerow([i] + body[i])
    # sums of every numeric column, for the stall reasons overall
    sums = {}
    for j, h in enumerate(hdr):
        try: sums[h] = sum(float(r[j].replace(",", "") or 0) for r in body)
        except ValueError: pass
    print("total samples", tot); print({k: round(v) for k, v in sums.items()})
PY
grep -iE "stall|warp cycles|issued|duration|No Instruction" $OUT/details.csv | cut -c1-200 | head -40
xz -T8 -6 $OUT/source.csv; rm -f $OUT/prof.ncu-rep.x
cd $OUT && tar czf results.tar.gz *-log.txt old new details.csv top.csv source-err.txt 2>/dev/null; ls -la $OUT
