"""`bench schema`: the config schema as validation uses it (base file + registered backends)."""

from __future__ import annotations

import json

from ..paths import SCHEMA_PATH


def cmd_schema(args) -> int:
    from ..settings.config import config_schema

    print(json.dumps(config_schema(args.schema), indent=2))
    return 0


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the config JSON schema completed from the backend registry")
    p.add_argument("--schema", default=str(SCHEMA_PATH), help="base schema file (default: %(default)s)")
    p.set_defaults(func=cmd_schema)
