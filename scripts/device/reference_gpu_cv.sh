#!/usr/bin/env bash
# Trial-to-trial noise of the reference_gpu suite on one GPU, through the real pipeline.
#
#   scripts/device/reference_gpu_cv.sh WORKLOADS TRIALS [BUDGET_S]
#   e.g. scripts/device/reference_gpu_cv.sh multi_turn 3 540
#
# WORKLOADS: comma-separated subset of the suite's workloads; TRIALS: trials per workload.
# BUDGET_S (default 540): no new run starts once this many seconds have passed, so a
# 10-minute device call ends cleanly. Runs `snakemake` one summary at a time (model build,
# spec, plan, preflight, `bench lease run` under real NVML, `bench run`, summary) with a
# --configfile that narrows reference_gpu to WORKLOADS x TRIALS, and copies each run's
# summary, manifest and logs to $OUT as soon as it exists. Ends with the CV table
# ($OUT/cv_table.csv, printed) and, when scipy is importable, the rendered report.
#
# For a GPU box without Snakemake: carry the wheels that scripts/device/wheels.sh puts
# in .whl/ (plus, if the image lacks scipy, its wheel: `python3 -m pip download --no-deps
# --only-binary=:all: --python-version 3.12 --platform manylinux_2_17_x86_64 -d .whl scipy==1.17.1`);
# this script installs them into /tmp/site. Estimated cost at the chosen scale: about
# 3.5-5 min per run on one H200 (measured: multi_turn 206-249 s, long_generation 289-311 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
WORKLOADS=${1:?usage: $0 WORKLOADS TRIALS [BUDGET_S]}
TRIALS=${2:?usage: $0 WORKLOADS TRIALS [BUDGET_S]}
BUDGET_S=${3:-540}
SUITE=${SUITE:-reference_gpu}   # SUITE=smoke runs the same steps on CPU (to check this script)
OUT=${OUT:-$PWD/out-reference-gpu-cv}
mkdir -p "$OUT/runs" "$OUT/logs"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "[$(elapsed)s] $*" | tee -a "$OUT/progress.log"; }

# --- environment: Snakemake and friends from carried wheels, `bench` on PATH ---------------
if ! python3 -c "import snakemake" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      > "$OUT/logs/pip.log" 2>&1 || { say "wheel install failed (see logs/pip.log)"; exit 2; }
    export PYTHONPATH=/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/site/bin:$PATH
  else
    say "snakemake is not importable and .whl/ holds no wheels"; exit 2
  fi
else
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi
if ! command -v bench >/dev/null 2>&1; then
  mkdir -p /tmp/site/bin
  printf '#!/bin/sh\nexec python3 -m rl_pipeline_bench.cli "$@"\n' > /tmp/site/bin/bench
  chmod +x /tmp/site/bin/bench
  export PATH=/tmp/site/bin:$PATH
fi
{
  nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.used,memory.total --format=csv
  python3 -c "import sys, torch, transformers, peft, snakemake; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__, 'snakemake', snakemake.__version__)"
  python3 -c "import scipy; print('scipy', scipy.__version__)" 2>&1 || true
  git log -1 --format='commit %H %s' 2>/dev/null || true
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

# --- the suite, narrowed by an override (the pipeline's own --configfile path) ------------
OVERRIDE="$OUT/override.yaml"
printf 'suite: %s\nsuites:\n  %s:\n    workloads: [%s]\n    trials: %s\n' "$SUITE" "$SUITE" "$WORKLOADS" "$TRIALS" > "$OVERRIDE"
# SCALE=X narrows the suite's scale too (a shorter check; its figures are at that scale, and the spec id says so)
[ -n "${SCALE:-}" ] && printf '    scale: %s\n' "$SCALE" >> "$OVERRIDE"
# Targets go first: --resources and --configfile take every following word as a value.
smk() { python3 -m snakemake "$@" --cores 1 --resources gpu=1 --configfile "$OVERRIDE"; }
SPEC=$(bench plan --configfile "$OVERRIDE" --json \
       | python3 -c 'import json, sys; print(json.load(sys.stdin)["spec"]["id"])') \
  || { say "cannot resolve the spec"; exit 2; }
say "spec $SPEC: workloads $WORKLOADS, $TRIALS trial(s), budget ${BUDGET_S}s"

copy_run() {  # $1 = run dir relative to results/runs/$SPEC
  local d="results/runs/$SPEC/$1" dest="$OUT/runs/${1//\//_}"
  mkdir -p "$dest"
  cp -f "$d"/summary.json "$d"/run.json "$dest"/ 2>/dev/null
  local ev; ev=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['evidence_dir'])" "$d/run.json" 2>/dev/null)
  [ -n "$ev" ] && cp -f "$ev"/manifest.json "$ev"/run.log "$ev"/updates.parquet "$ev"/trainer_intervals.parquet "$dest"/ 2>/dev/null
  cp -f logs/runs/"$SPEC"/"$1".log "$dest"/job.log 2>/dev/null
  return 0
}

IFS=',' read -ra WL <<< "$WORKLOADS"
last_run_s=240
for t in $(seq 1 "$TRIALS"); do
  for w in "${WL[@]}"; do
    if [ $(( $(elapsed) + last_run_s )) -gt "$BUDGET_S" ]; then
      say "budget: not starting $w trial $t (a run takes ~${last_run_s}s)"; continue
    fi
    target="results/runs/$SPEC/reference/$w/trial$t/summary.json"
    t0=$(date +%s)
    say "run $w trial $t"
    smk "$target" > "$OUT/logs/snakemake_${w}_trial$t.log" 2>&1
    rc=$?
    last_run_s=$(( $(date +%s) - t0 ))
    copy_run "reference/$w/trial$t"
    say "  rc=$rc in ${last_run_s}s: $(python3 -c "
import json,sys
s=json.load(open(sys.argv[1])); h=s['e2e']['headline']; a=(s.get('rollout') or {}).get('headline') or {}
print(f\"valid={s['valid']} headline {h['trajectories_per_s']:.3f} traj/s over {h['window_s']:.1f} s, busy {a.get('busy_share') or 0:.0%}, warnings={len(s.get('warnings') or [])}\")
" "$target" 2>/dev/null || echo 'no summary')"
  done
done

# --- CV table (numpy/pandas only), then the report when scipy is there --------------------
python3 - "$SPEC" "$OUT" <<'PY' | tee "$OUT/cv_table.txt"
import glob, json, sys
import numpy as np, pandas as pd
spec, out = sys.argv[1], sys.argv[2]
rows = []
for p in sorted(glob.glob(f"results/runs/{spec}/*/*/trial*/summary.json")):
    s = json.load(open(p))
    h, t = s["e2e"]["headline"], s["trainer"]["headline"]
    a = (s.get("rollout") or {}).get("headline") or {}
    rows.append({"workload": s["workload"], "trial": s["trial"], "valid": s["valid"],
                 "headline_traj_per_s": h["trajectories_per_s"], "headline_tok_per_s": h["assistant_tokens_per_s"],
                 "trainer_tok_per_s": t["assistant_tokens_per_s"], "measured_traj_per_s": s["e2e"]["measured"]["trajectories_per_s"],
                 "headline_window_s": h["window_s"], "busy_share": a.get("busy_share"),
                 "calls_finished_in_window": a.get("calls_finished"), "warnings": " | ".join(s.get("warnings") or []),
                 "reasons": " | ".join(s.get("reasons") or [])})
runs = pd.DataFrame(rows)
if runs.empty:
    sys.exit(f"no summary under results/runs/{spec}: see {out}/logs/")
runs.to_csv(f"{out}/runs_table.csv", index=False)
print(runs.drop(columns=["reasons"]).to_string(index=False))
table = []
for w, g in runs.groupby("workload", sort=False):
    v = g[g.valid]
    row = {"workload": w, "trials": len(g), "valid": len(v)}
    for c in ("headline_traj_per_s", "headline_tok_per_s", "trainer_tok_per_s"):
        x = v[c].dropna().to_numpy(float)
        mean = x.mean() if len(x) else None
        std = x.std(ddof=1) if len(x) >= 2 else None
        row[f"{c}_mean"], row[f"{c}_cv"] = mean, (std / mean if std is not None and mean else None)
    row["headline_window_s_min"] = v.headline_window_s.min() if len(v) else None
    table.append(row)
cv = pd.DataFrame(table)
cv.to_csv(f"{out}/cv_table.csv", index=False)
print()
print(cv.to_string(index=False))
PY
n_done=$(ls results/runs/"$SPEC"/*/*/trial*/summary.json 2>/dev/null | wc -l)
if [ "$n_done" -lt $(( ${#WL[@]} * TRIALS )) ]; then
  # The report target needs every planned run: rendering it would start the skipped ones.
  say "report not rendered: $n_done of $(( ${#WL[@]} * TRIALS )) runs finished (the CV table above is from the summaries)"
elif python3 -c "import scipy" 2>/dev/null; then
  say "rendering the report"
  smk reports/comparison.html > "$OUT/logs/snakemake_report.log" 2>&1 \
    && cp -r reports/comparison.html reports/tables "$OUT"/ && say "report copied to \$OUT"
else
  say "scipy not importable: report not rendered (the CV table above is from the summaries)"
fi
cp -f "results/specs/$SPEC.json" "$OUT"/ 2>/dev/null
bench lease list > "$OUT/leases_after.txt" 2>&1 || true
say "done in $(elapsed)s"
