# Task-quality evaluation (RLinf protocol). Per (eval suite, policy, run r): eval.json
# pointing at fresh evidence under results/eval_evidence/ (episodes.parquet,
# manifest.json, eval.log); per (eval suite, policy): summary.json. Targets are keyed by
# the hash of the protocol settings, so identical settings never re-evaluate and an
# evaluated checkpoint is never evaluated again. Logic: rl_pipeline_bench.eval.


include: "eval_helpers.smk"


wildcard_constraints:
    esuite=SAFE_NAME,
    ehash=EVAL_HASH_PATTERN,
    run=r"\d+",


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    eval_spec,
    eval_summary,
    eval_all,


rule eval_spec:
    message:
        "evaluation spec {wildcards.esuite}-{wildcards.ehash}"
    output:
        paths.EVAL_SPEC_FILE,
    log:
        "logs/eval/{esuite}-{ehash}/spec.log",
    params:
        settings=lambda wc: eval_settings_json(wc.esuite),
        seed=config["seed"],
    shell:
        "bench eval spec --suite {wildcards.esuite} --settings-json {params.settings:q} --seed {params.seed}"
        " --expect-hash {wildcards.ehash} --output {output:q} > {log:q} 2>&1"


rule eval_run:
    message:
        "evaluate {wildcards.policy} run {wildcards.run} ({wildcards.esuite}-{wildcards.ehash}); log: {log}"
    input:
        spec=ancient(rules.eval_spec.output[0]),
    output:
        protected(paths.EVAL_RUN_RECORD),
    log:
        "logs/eval/{esuite}-{ehash}/{policy}/run{run}.log",
    threads: lambda wc: eval_workers(wc.esuite)
    resources:
        gpu=lambda wc: eval_gpus(wc.esuite),
    params:
        lease=eval_lease_prefix,
        user=eval_user_args,
        evidence_root=paths.EVAL_EVIDENCE_ROOT,
    shell:
        "{params.lease}bench eval run --spec {input.spec:q} --policy {wildcards.policy} --run {wildcards.run}"
        " --workers {threads} {params.user} --evidence-root {params.evidence_root:q} --pointer {output:q}"
        " > {log:q} 2>&1"


rule eval_summary:
    message:
        "summarize evaluation {wildcards.policy} ({wildcards.esuite}-{wildcards.ehash})"
    input:
        spec=rules.eval_spec.output[0],
        runs=eval_run_inputs,
        run_dirs=eval_run_dirs,  # a deleted eval.json is evaluated again (common.smk, record_dirs)
    output:
        paths.EVAL_SUMMARY,
    log:
        "logs/eval/{esuite}-{ehash}/{policy}/summary.log",
    shell:
        "bench eval summarize --spec {input.spec:q} --policy {wildcards.policy} --runs {input.runs:q}"
        " --output {output:q} > {log:q} 2>&1"


# Scheduled evaluation: every global_step_* checkpoint under --config eval_checkpoints_dir
# (plus the suite's built-in policies); those with evidence already are not re-run.
rule eval_all:
    input:
        eval_summaries(config.get("eval_suite"), require=False),
