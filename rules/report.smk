# The comparison report: a pure function of the spec, summaries, plans and retained evidence.


# Runs where Snakemake runs, also under a cluster executor (see the Snakefile).
localrules:
    render_report,
    paper_sources,
    render_paper,


rule render_report:
    message:
        "render {output.html}"
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
        run_infra=spec_run_infra(SPEC_ID),
        probes=spec_probes(SPEC_ID),
        # A deleted summary, infra or probe record is made again (common.smk, record_dirs).
        record_dirs=lambda wc: spec_record_dirs(SPEC_ID),
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
        " --tables {output.tables:q} --figures {output.figures:q} {params.statistics}"
        " --run-infra {input.run_infra:q} --probes {input.probes:q} > {log:q} 2>&1"


# The paper report: the same inputs as the HTML report, as LaTeX tables, vector PDF figures
# and paper.tex (paper_sources), then paper.pdf (render_paper, needs TeX Live + latexmk).
# Two rules so a machine without TeX keeps the sources: the failing compile step removes
# only its own output, and its error says what to install.
rule paper_sources:
    message:
        "paper sources -> {output}"
    input:
        spec=spec_file(SPEC_ID),
        summaries=spec_summaries(SPEC_ID),
        plans=spec_plans(SPEC_ID),
        attempts=attempts_index_input,
        provenance=report_provenance_inputs,
        evals=eval_summaries(config.get("eval_suite")),
        run_infra=spec_run_infra(SPEC_ID),
        probes=spec_probes(SPEC_ID),
        record_dirs=lambda wc: spec_record_dirs(SPEC_ID),
    output:
        directory("reports/paper_sources"),
    log:
        "logs/report/paper_sources.log",
    params:
        evidence_root=rules.render_report.params.evidence_root,
        attempts=rules.render_report.params.attempts,
        statistics=rules.render_report.params.statistics,
    shell:
        "bench paper sources --spec {input.spec:q} --summaries {input.summaries:q} --plans {input.plans:q}"
        " --eval-summaries {input.evals:q} --evidence-root {params.evidence_root:q}"
        " --attempts-index {params.attempts:q} --out {output:q} {params.statistics}"
        " --run-infra {input.run_infra:q} --probes {input.probes:q} --log {log:q}"


rule render_paper:
    message:
        "compile the paper -> {output}"
    input:
        rules.paper_sources.output,
    output:
        directory("reports/paper"),
    log:
        "logs/report/paper.log",
    shell:
        "bench paper compile --sources {input:q} --out {output:q} > {log:q} 2>&1 || {{ cat {log:q} >&2; exit 1; }}"
