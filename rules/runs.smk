# Benchmark runs. A run's declared output is run.json, which points at the fresh
# evidence directory the run created under results/evidence/ (outside declared
# outputs, so Snakemake never deletes it, also when the run fails).
#
# Runs are never re-executed implicitly: inputs are ancient(), run.json is
# protected(), and the default profile sets rerun-triggers to mtime. To re-run a
# benchmark on purpose, delete its run.json (README: "Re-running a benchmark").


rule run_benchmark:
    input:
        unpack(run_inputs),
    output:
        protected("results/runs/{suite}/{backend}/{workload}/trial{trial}/run.json"),
    log:
        "logs/runs/{suite}/{backend}/{workload}/trial{trial}.log",
    wildcard_constraints:
        trial=r"\d+",
    resources:
        gpu=lambda wc: suite_settings(wc.suite)["gpus"],
        bench_slot=1,
    params:
        lease=lease_prefix,
        runtime=lambda wc: suite_settings(wc.suite)["runtime"],
        image=image_args,
    shell:
        # Preflight (recipe/source/image/model identity) runs before any GPU lease.
        "bench preflight --suite {wildcards.suite} --backend {wildcards.backend} --runtime {params.runtime}"
        " --model-record {input.model} > {log} 2>&1 && "
        "{params.lease}bench run --suite {wildcards.suite} --backend {wildcards.backend}"
        " --workload {wildcards.workload} --trial {wildcards.trial}"
        " --model-record {input.model} --plan {input.plan}"
        " --recipe-record {input.recipe} --source-record {input.source}"
        " --evidence-root results/evidence {params.image} --run-json {output} >> {log} 2>&1"


rule summarize_run:
    input:
        run=rules.run_benchmark.output[0],
    output:
        "results/runs/{suite}/{backend}/{workload}/trial{trial}/summary.json",
    log:
        "logs/summaries/{suite}/{backend}/{workload}/trial{trial}.log",
    wildcard_constraints:
        trial=r"\d+",
    shell:
        "bench summarize-run {input.run:q} --output {output:q} > {log:q} 2>&1"
