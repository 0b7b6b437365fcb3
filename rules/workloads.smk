# Offered work plans: one parquet per (spec, workload), identical for every backend,
# with the figure of its offered length distributions (it depends on the plan alone,
# so the report embeds it instead of redrawing it on every rebuild). The spec fixes the
# distributions, scale, seed and the updates offered (trained + extra).


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    workload_plan,


rule workload_plan:
    message:
        "plan {wildcards.workload} ({wildcards.spec})"
    input:
        spec=ancient(rules.run_spec.output[0]),
    output:
        plan="results/workloads/{spec}/{workload}.parquet",
        offered_figure="results/workloads/{spec}/{workload}.offered.png",
    log:
        "logs/workloads/{spec}/{workload}.log",
    shell:
        "bench write-plan --spec {input.spec:q} --workload {wildcards.workload} --output {output.plan:q}"
        " --offered-figure {output.offered_figure:q} > {log:q} 2>&1"
