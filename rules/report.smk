# The comparison report: a pure function of summaries, plans and retained evidence.


rule render_report:
    input:
        summaries=suite_summaries(SUITE),
        plans=suite_plans(SUITE),
    output:
        html="reports/comparison.html",
        tables=directory("reports/tables"),
        figures=directory("reports/figures"),
    log:
        "logs/report/comparison.log",
    params:
        suite=SUITE.name,
        evidence_root="results/evidence",
    run:
        # In-process (rl_pipeline_bench.jobs): a script job's interpreter start-up costs more than the work.
        from rl_pipeline_bench import jobs

        jobs.render_report(input, output, params, log[0], config)
