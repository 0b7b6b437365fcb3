"""Snakemake script for rule model_identity, hub models: pinned snapshot -> identity record.

Thin on purpose: the logic (download or offline lookup, hub/ layout checks, hashing)
lives in rl_pipeline_bench.models.snapshots, where it is unit-tested.
"""

import logging
import sys

from rl_pipeline_bench.models.snapshots import SnapshotError, hub_identity, write_record

smk = snakemake  # noqa: F821  (injected by Snakemake's script directive)
logging.basicConfig(filename=smk.log[0], level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("model_identity")
p = smk.params.model  # rl_pipeline_bench.models.snapshots.model_rule_params
log.info("resolving %s = %s@%s into HF_HOME %s", p["model"], p["repo_id"], p["revision"], p["hf_home"])
try:
    record = hub_identity(p["model"], p["repo_id"], p["revision"], p["hf_home"])
except SnapshotError as exc:
    log.error("%s", exc)
    print(f"model_identity: {exc}", file=sys.stderr)
    sys.exit(1)
write_record(record, smk.output[0])
log.info("verified %d files of %s; wrote %s", len(record["files"]), record["snapshot_path"], smk.output[0])
