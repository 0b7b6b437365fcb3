# The comparison report: a pure function of summaries, plans and retained evidence.


rule render_report:
    input:
        summaries=suite_summaries(SUITE),
        plans=suite_plans(SUITE),
        evals=eval_summaries(config.get("eval_suite")),
        offered_figures=suite_offered_figures(SUITE),
    output:
        html="reports/comparison.html",
        tables=directory("reports/tables"),
        figures=directory("reports/figures"),
    log:
        "logs/report/comparison.log",
    params:
        suite=SUITE.name,
        evidence_root="results/evidence",
    shell:
        # A separate light process: imports inside Snakemake's own process run several
        # times slower (its scheduler loop holds the interpreter), script: jobs re-import Snakemake.
        "bench report --suite {params.suite} --summaries {input.summaries:q} --plans {input.plans:q}"
        " --offered-figures {input.offered_figures:q}"
        " --evidence-root {params.evidence_root:q} --html {output.html:q} --tables {output.tables:q}"
        " --figures {output.figures:q} --eval-summaries {input.evals:q} --set suite={params.suite} > {log:q} 2>&1"
