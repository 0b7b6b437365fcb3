# The comparison report: a pure function of the spec, summaries, plans and retained evidence.


rule render_report:
    input:
        spec=spec_file(SPEC_ID),
        summaries=spec_summaries(SPEC_ID),
        plans=spec_plans(SPEC_ID),
        attempts=attempts_index_input,
        # Plain (not ancient) inputs on what the runs take as ancient(): when one of them
        # is remade, the report is re-rendered, and Snakemake then also finds the runs a
        # new spec still lacks (an ancient() edge alone hides them: snakemake#4166).
        provenance=report_provenance_inputs,
        evals=eval_summaries(config.get("eval_suite")),
        offered_figures=spec_offered_figures(SPEC_ID),
    output:
        html="reports/comparison.html",
        tables=directory("reports/tables"),
        figures=directory("reports/figures"),
    log:
        "logs/report/comparison.log",
    params:
        evidence_root="results/evidence",
        attempts=ATTEMPTS_INDEX,
        # How trials are judged changes no run, so it is not in the spec (docs/run-spec.md).
        statistics=" ".join(f"--{k.replace('_', '-')} {v}" for k, v in (config.get("statistics") or {}).items()),
    shell:
        # A separate light process: imports inside Snakemake's own process run several
        # times slower (its scheduler loop holds the interpreter), script: jobs re-import Snakemake.
        "bench report --spec {input.spec:q} --summaries {input.summaries:q} --plans {input.plans:q}"
        " --offered-figures {input.offered_figures:q} --eval-summaries {input.evals:q}"
        " --evidence-root {params.evidence_root:q} --attempts-index {params.attempts:q} --html {output.html:q}"
        " --tables {output.tables:q} --figures {output.figures:q} {params.statistics} > {log:q} 2>&1"
