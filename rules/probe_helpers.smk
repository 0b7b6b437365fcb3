# Helpers of rules/probes.smk (and of the report's and tracking's probe inputs): probe records
# are keyed by the run spec like the runs.


def probe_lease_prefix(wildcards, probe):
    """`bench lease run ... --` over the spec's GPU set for a GPU probe; nothing on a CPU suite."""
    return spec_lease_prefix(wildcards.spec, f"{wildcards.spec}-probe-{probe}")


def spec_probes(spec_id):
    """The spec's probe records (all-reduce, storage, checkpoint)."""
    return [str(p) for p in paths.probe_records(spec_id)]
