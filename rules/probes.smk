# Infrastructure probes (seed 002): per-run telemetry/MFU summaries and the suite's
# all-reduce, storage and checkpoint probes. All through `bench probe ...`.
#
# The NVML telemetry itself is recorded by every GPU run (runner + lease); these rules
# only summarise it. Probe records are measurements like run.json: protected, never
# re-run implicitly; delete one to measure again. GPU probes run under the suite's lease
# and take the bench slot, so they never overlap a benchmark run.


rule model_flops:
    input:
        model=ancient("results/models/{model}.json"),
    output:
        "results/probes/flops/{model}.json",
    log:
        "logs/probes/flops/{model}.log",
    shell:
        "bench probe model-flops --model-record {input.model:q} --output {output:q} > {log:q} 2>&1"


rule run_infra:
    input:
        run=rules.run_benchmark.output[0],
        card=lambda wc: f"results/probes/flops/{suite_settings(wc.suite)['model']}.json",
    output:
        "results/runs/{suite}/{backend}/{workload}/trial{trial}/infra.json",
    log:
        "logs/probes/runs/{suite}/{backend}/{workload}/trial{trial}.log",
    wildcard_constraints:
        trial=r"\d+",
    shell:
        "bench probe summarize-run {input.run:q} --flops-card {input.card:q} --output {output:q} > {log:q} 2>&1"


rule allreduce_probe:
    output:
        json=protected("results/probes/{suite}/allreduce.json"),
        sweep=protected("results/probes/{suite}/allreduce.parquet"),
    log:
        "logs/probes/{suite}/allreduce.log",
    resources:
        gpu=lambda wc: suite_settings(wc.suite)["gpus"],
        bench_slot=1,
    params:
        lease=lambda wc: probe_lease_prefix(wc.suite, "allreduce"),
        s=lambda wc: suite_probe_settings(wc.suite)["allreduce"],
    shell:
        "{params.lease}bench probe allreduce --world-size {params.s[world_size]} --backend {params.s[backend]}"
        " --min-bytes {params.s[min_bytes]} --max-bytes {params.s[max_bytes]} --warmup-iters {params.s[warmup_iters]}"
        " --iters {params.s[iters]} --timeout {params.s[timeout_s]} --label {wildcards.suite}"
        " --output {output.json:q} > {log:q} 2>&1"


rule storage_probe:
    output:
        protected("results/probes/{suite}/storage.json"),
    log:
        "logs/probes/{suite}/storage.log",
    resources:
        bench_slot=1,
    params:
        s=lambda wc: suite_probe_settings(wc.suite)["storage"],
    shell:
        "bench probe storage --directory {params.s[directory]:q} --size-bytes {params.s[size_bytes]}"
        " --block-bytes {params.s[block_bytes]} --engine {params.s[engine]} --timeout {params.s[timeout_s]}"
        " --label {wildcards.suite} --output {output:q} > {log:q} 2>&1"


rule checkpoint_probe:
    input:
        model=lambda wc: ancient(model_record(wc)),
    output:
        protected("results/probes/{suite}/checkpoint.json"),
    log:
        "logs/probes/{suite}/checkpoint.log",
    resources:
        gpu=lambda wc: suite_settings(wc.suite)["gpus"],
        bench_slot=1,
    params:
        lease=lambda wc: probe_lease_prefix(wc.suite, "checkpoint"),
        s=lambda wc: suite_probe_settings(wc.suite)["checkpoint"],
        lora=config["reference"],
    shell:
        "{params.lease}bench probe checkpoint --model-record {input.model:q} --directory {params.s[directory]:q}"
        " --device {params.s[device]} --lora-rank {params.lora[lora_rank]} --lora-alpha {params.lora[lora_alpha]}"
        " --label {wildcards.suite} --output {output:q} > {log:q} 2>&1"


# `snakemake --cores 1 probes`: the selected suite's probes and per-run summaries, no report.
rule probes:
    input:
        suite_probes(SUITE),
        suite_run_infra(SUITE),
