#!/usr/bin/env bash
# Run one image-build step that downloads (apt over https, pip, uv) trusting, besides the
# image's own CA bundle, the certificates in $RL_BENCH_BUILD_CA: the extra CAs of the
# build host (a TLS-intercepting proxy's, say), passed by `bench build` as a build arg.
# Empty on most hosts. The bundle lives only for this step; nothing is left in the image.
#   bash containers/common/with_build_ca.sh COMMAND [ARGS...]
set -euo pipefail
[ "$#" -ge 1 ] || { echo "usage: with_build_ca.sh COMMAND [ARGS...]" >&2; exit 2; }
if [ -z "${RL_BENCH_BUILD_CA:-}" ]; then
    exec "$@"
fi
bundle=$(mktemp /tmp/rl-bench-build-ca.XXXXXX.pem)
trap 'rm -f "$bundle"' EXIT
system=/etc/ssl/certs/ca-certificates.crt
{ [ -f "$system" ] && cat "$system"; printf '%s\n' "$RL_BENCH_BUILD_CA"; } > "$bundle"
SSL_CERT_FILE=$bundle PIP_CERT=$bundle REQUESTS_CA_BUNDLE=$bundle "$@"
