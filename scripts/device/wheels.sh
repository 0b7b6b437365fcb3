#!/usr/bin/env bash
# Download, into DIR (default .whl), Python 3.12 x86-64 wheels of the locked packages that a GPU
# machine's Python lacks (Snakemake and its pure-Python needs, jsonschema, docker, ...), at the
# versions in uv.lock, for a GPU machine that cannot reach a package index. Run it here, from the
# project root (it needs `uv` and `pip`), then carry DIR to the GPU machine and there:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site DIR/*.whl
#   export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH
# (about 26 MB for Snakemake 9.27). Packages such an image usually has already (torch, transformers,
# peft, pandas, pyarrow, matplotlib, jinja2, pyyaml, nvidia-ml-py, scipy, ...) are not fetched; add
# any it lacks with EXTRA="name==version ...".
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-.whl}
need='^(snakemake|snakemake-interface-[a-z-]+|conda-inject|configargparse|connection-pool|docutils|dpath|gitpython|gitdb|smmap|humanfriendly|immutables|nbformat|fastjsonschema|jupyter-core|traitlets|pulp|smart-open|tenacity|throttler|yte|argparse-dataclass|sqlmodel|sqlalchemy|greenlet|pydantic|pydantic-core|typing-inspection|annotated-types|jsonschema|jsonschema-specifications|referencing|rpds-py|docker|platformdirs|tabulate|wrapt|reretry)=='
specs="$(uv export --no-hashes --frozen --no-dev | sed 's/ ;.*//; s/ *#.*//' | grep -E "$need" | sort -u) ${EXTRA:-}"
mkdir -p "$dir"
plat=(--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_39_x86_64
      --platform manylinux1_x86_64)
for s in $specs; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$dir" "$s" 2>/dev/null \
    || python3 -m pip wheel -q --no-deps -w "$dir" "$s"   # sdist-only packages (e.g. connection-pool)
done
echo "wheels in $dir: $(ls "$dir" | wc -l) ($(du -sh "$dir" | cut -f1))"
