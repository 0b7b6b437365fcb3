# Offered work plans: one parquet per (suite, workload), identical for every backend,
# with the figure of its offered length distributions (it depends on the plan alone,
# so the report embeds it instead of redrawing it on every rebuild).


rule workload_plan:
    output:
        plan="results/workloads/{suite}/{workload}.parquet",
        offered_figure="results/workloads/{suite}/{workload}.offered.png",
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
