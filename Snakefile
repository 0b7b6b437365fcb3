# RL Systems Bench workflow entry point.
# Loads the config, includes one rules/*.smk per stage and names the targets.
# The config is validated once, in rules/common.smk, against schemas/config.schema.yaml
# completed from the backend registry (rl_pipeline_bench.settings.config.validate_config).
# Newcomer: `uv run snakemake --cores 1 reports/comparison.html` (README.md).

import logging
import os
import time

from snakemake.utils import min_version

from rl_pipeline_bench.runs.terminal import interrupt_summary, quiet_terminal

min_version("9.0")

#: When this invocation started: onsuccess names only the reports it wrote.
STARTED = time.time()

# The terminal and every job log carry the pipeline's own progress lines, not library progress bars.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

# The terminal without the scheduler's bookkeeping and, after Ctrl-C, without an error block per
# stopped job: onerror says what ran (rl_pipeline_bench.runs.terminal). The log file keeps everything.
INTERRUPT = quiet_terminal(logging.getLogger("snakemake.logging"))


configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/specs.smk"
include: "rules/provenance.smk"
include: "rules/containers.smk"
include: "rules/model.smk"
include: "rules/workloads.smk"
include: "rules/runs.smk"
include: "rules/eval.smk"
include: "rules/probes.smk"
include: "rules/report.smk"
include: "rules/tracking.smk"
include: "rules/readiness.smk"


# Light rules run where Snakemake runs, also under a cluster executor
# (--profile profiles/slurm or profiles/kubernetes): only benchmark runs, evaluation
# runs and the infrastructure probes (the rules with a `gpu` or `bench_slot` resource:
# they need GPUs or measure the machine they run on) go to the cluster. Each rules/*.smk
# names its light rules in its own `localrules:` next to them; tests/test_localrules.py
# checks that exactly the rules without those resources are local.
localrules:
    all,


rule all:
    default_target: True
    input:
        rules.render_report.output.html,


onsuccess:
    # The answer last, where a user looks: which reports this invocation wrote.
    import os
    import sys

    written = [path for path in (rules.render_report.output.html, f"{rules.render_paper.output[0]}/paper.pdf")
               if os.path.exists(path) and os.path.getmtime(path) >= STARTED]
    for path in written:
        print(f"Report written: {path}", file=sys.stderr)


onerror:
    import sys

    if INTERRUPT.interrupted:
        print(interrupt_summary(STARTED), file=sys.stderr)
