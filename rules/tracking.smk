# Results in MLflow: every benchmark run, probe and evaluation of the selected suites
# becomes one MLflow run (idempotent: a run id is logged once). Default store: SQLite
# under results/mlflow/; --config mlflow_uri=http://HOST:PORT for a server.


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    mlflow_export,


rule mlflow_export:
    message:
        "export to MLflow ({wildcards.suite})"
    input:
        summaries=spec_summaries(SPEC_ID),
        evals=eval_summaries(config.get("eval_suite")),
        probes=spec_probes(SPEC_ID) + spec_run_infra(SPEC_ID),
    output:
        "results/mlflow/exported-{suite}.json",
    log:
        "logs/tracking/mlflow-{suite}.log",
    params:
        uri=lambda wc: f"--uri {shlex.quote(config['mlflow_uri'])}" if config.get("mlflow_uri") else "",
        experiment=config.get("mlflow_experiment", "RLinf"),
    shell:
        "bench mlflow export --summaries {input.summaries:q} --eval-summaries {input.evals:q}"
        " --probe-summaries {input.probes:q} {params.uri}"
        " --experiment {params.experiment:q} --record {output:q} > {log:q} 2>&1"
