# Benchmark runs. A run's declared output is run.json, which points at the fresh
# evidence directory the run created under results/evidence/ (outside declared
# outputs, so Snakemake never deletes it, also when the run fails).
#
# Runs live under results/runs/{suite}-{hash}/ (the run spec's id): edited settings
# give a new hash and new runs, and the old runs stay. Runs are never re-executed
# implicitly: inputs are ancient(), run.json is protected(), and the default profile
# sets rerun-triggers to mtime. To re-run a benchmark on purpose, delete its run.json
# (README: "Re-running a benchmark"). Every command reads the spec file. Runs and
# summaries append their events to the attempts index (results/attempts.jsonl), which
# is no job's output: Snakemake never deletes it, and the report depends on it.


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    summarize_run,


rule run_benchmark:
    message:
        "run {wildcards.backend} {wildcards.workload} trial{wildcards.trial} ({wildcards.spec}); log: {log}"
    input:
        unpack(run_inputs),
    output:
        # update(): Snakemake keeps an existing record instead of deleting it first (a forced
        # job as root, whom protected() does not bind), so `bench run` refuses to replace it.
        protected(update(paths.RUN_RECORD)),
    log:
        "logs/runs/{spec}/{backend}/{workload}/trial{trial}.log",
    resources:
        gpu=lambda wc: spec_settings(wc)["gpus"],
        bench_slot=1,
    params:
        lease=lease_prefix,
        image=image_args,
        evidence_root=paths.EVIDENCE_ROOT,
        attempts=paths.ATTEMPTS_INDEX,
        progress=PROGRESS_LINES,
    shell:
        # Preflight (recipe/source/image/model identity) runs before any GPU lease. The run's
        # whole output goes to its log; only its progress lines (one per update) also reach
        # the terminal (rl_pipeline_bench.evidence.progress). pipefail keeps the run's exit status.
        "bench preflight --spec {input.spec:q} --backend {wildcards.backend}"
        " --model-record {input.model} > {log} 2>&1 && "
        "{params.lease}bench run --spec {input.spec:q} --backend {wildcards.backend}"
        " --workload {wildcards.workload} --trial {wildcards.trial}"
        " --model-record {input.model} --plan {input.plan}"
        " --recipe-record {input.recipe} --source-record {input.source}"
        " --evidence-root {params.evidence_root:q} --attempts-index {params.attempts:q} {params.image}"
        " --run-json {output} 2>&1 | tee -a {log} | {{ grep --line-buffered {params.progress:q} >&2 || true; }}"


# One job per run writes both derived records: summary.json (rates, validity) and
# infra.json (telemetry per phase, peak memory, MFU), reading run.json and the spec once.
# Two jobs per run made planning 1000 runs cost 1000 more DAG jobs (benchmarks/bench_report.py).
rule summarize_run:
    message:
        "summarize {wildcards.backend} {wildcards.workload} trial{wildcards.trial} ({wildcards.spec})"
    input:
        run=rules.run_benchmark.output[0],
        spec=ancient(rules.run_spec.output[0]),
        # The offered plan of the run's workload: every recorded call must be one of it (plan_mismatch).
        plan=ancient(rules.workload_plan.output.plan),
        card=flops_card,
        # None until the evidence differs from the digest run.json recorded; then the edited files,
        # which changes the input set (a rerun trigger), so the summary is made again
        # (the evidence is no declared file; see evidence/digest.py).
        edited=lambda wc: edited_evidence(paths.RUN_RECORD.format(
            spec=wc.spec, backend=wc.backend, workload=wc.workload, trial=wc.trial)),
    output:
        summary=paths.RUN_SUMMARY,
        infra=paths.RUN_INFRA,
    log:
        "logs/summaries/{spec}/{backend}/{workload}/trial{trial}.log",
    params:
        attempts=paths.ATTEMPTS_INDEX,
    shell:
        "bench summarize-run {input.run:q} --spec {input.spec:q} --plan {input.plan:q}"
        " --flops-card {input.card:q} --infra-output {output.infra:q}"
        " --attempts-index {params.attempts:q} --output {output.summary:q} > {log:q} 2>&1"
