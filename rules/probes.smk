# Infrastructure probes (seed 002): the model's FLOPs card and the spec's all-reduce,
# storage and checkpoint probes. All through `bench probe ...`.
#
# The NVML telemetry itself is recorded by every GPU run (runner + lease, settings from
# the spec's probes.telemetry); the per-run infrastructure summary (infra.json) is
# written by rules/runs.smk's summarize_run beside summary.json. Probe records are keyed by
# the run spec like the runs (results/probes/{suite}-{hash}/) and read their settings from
# the spec's `probes` (docs/probes.md): an edited probe setting is a new spec and new
# targets. They are measurements like run.json: protected, never re-run implicitly;
# delete one to measure again. GPU probes run under the spec's lease and take the bench
# slot, so they never overlap a benchmark run.


include: "probe_helpers.smk"



# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    model_flops,
    probes,


rule model_flops:
    message:
        "FLOPs card of {wildcards.model}"
    input:
        model=ancient(paths.MODEL_RECORD),
    output:
        paths.FLOPS_CARD,
    log:
        "logs/probes/flops/{model}.log",
    shell:
        "bench probe model-flops --model-record {input.model:q} --output {output:q} > {log:q} 2>&1"


rule allreduce_probe:
    message:
        "all-reduce probe ({wildcards.spec})"
    input:
        spec=ancient(rules.run_spec.output[0]),
    output:
        json=protected(paths.probe_record_pattern("allreduce")),
        sweep=protected(paths.ALLREDUCE_SWEEP),
    log:
        "logs/probes/{spec}/allreduce.log",
    resources:
        gpu=lambda wc: spec_settings(wc)["gpus"],
        bench_slot=1,
    params:
        lease=lambda wc: probe_lease_prefix(wc, "allreduce"),
    shell:
        "{params.lease}bench probe allreduce --spec {input.spec:q} --output {output.json:q} > {log:q} 2>&1"


rule storage_probe:
    message:
        "storage probe ({wildcards.spec})"
    input:
        spec=ancient(rules.run_spec.output[0]),
    output:
        protected(paths.probe_record_pattern("storage")),
    log:
        "logs/probes/{spec}/storage.log",
    resources:
        bench_slot=1,
    shell:
        "bench probe storage --spec {input.spec:q} --output {output:q} > {log:q} 2>&1"


rule checkpoint_probe:
    message:
        "checkpoint probe ({wildcards.spec})"
    input:
        spec=ancient(rules.run_spec.output[0]),
        model=lambda wc: ancient(model_record(wc)),
    output:
        protected(paths.probe_record_pattern("checkpoint")),
    log:
        "logs/probes/{spec}/checkpoint.log",
    resources:
        gpu=lambda wc: spec_settings(wc)["gpus"],
        bench_slot=1,
    params:
        lease=lambda wc: probe_lease_prefix(wc, "checkpoint"),
    shell:
        "{params.lease}bench probe checkpoint --spec {input.spec:q} --model-record {input.model:q}"
        " --output {output:q} > {log:q} 2>&1"


# `snakemake --cores 1 probes`: the selected suite's probes and per-run summaries, no report.
rule probes:
    input:
        spec_probes(SPEC_ID),
        spec_run_infra(SPEC_ID),
