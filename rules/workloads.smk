# Offered work plans: one parquet per (suite, workload), identical for every backend.


rule workload_plan:
    output:
        "results/workloads/{suite}/{workload}.parquet",
    log:
        "logs/workloads/{suite}/{workload}.log",
    params:
        suite=lambda wc: suite_settings(wc.suite).name,
        scale=lambda wc: suite_settings(wc.suite)["scale"],
        n_updates=lambda wc: sum(
            suite_settings(wc.suite).contract[k] for k in ("warmup_updates", "measured_updates")
        ),
    script:
        "../workflow_scripts/write_workload_plan.py"
