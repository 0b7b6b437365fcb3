# Every Python name the rules use, imported once, here. rules/common.smk includes this
# file first; a test that runs one rules/*.smk on its own includes it before that file.
# Imports that only some jobs need stay inside the functions of common.smk (lazy).

import json
import os
import shlex
from pathlib import Path

from rl_pipeline_bench import paths
from rl_pipeline_bench.provenance import recipes as provenance
from rl_pipeline_bench.backends import names as backend_names
from rl_pipeline_bench.settings.config import validate_config
from rl_pipeline_bench.records.configfile import ConfigError, get_suite, safe_name_regex
from rl_pipeline_bench.eval import targets as eval_targets
from rl_pipeline_bench.evidence.digest import edited_evidence
from rl_pipeline_bench.records.settings_hash import HASH_LENGTH
from rl_pipeline_bench.evidence.progress import PREFIX as progress_prefix
from rl_pipeline_bench.models.snapshots import model_rule_params
from rl_pipeline_bench.settings.spec import SPEC_ID_PATTERN, RunSpec, SpecError, build_spec, load_spec
