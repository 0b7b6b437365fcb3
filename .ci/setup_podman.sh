#!/usr/bin/env bash
# Install and start a real OCI engine with a Docker API, for the image build tests:
# Debian's podman + runc, a containers.conf (no default ulimits, runc runtime),
# `podman system service` on unix:///run/podman/podman.sock, and a local base image
# made with debootstrap (no image registry is reachable here). Idempotent; run as root.
# Afterwards: export DOCKER_HOST=unix:///run/podman/podman.sock
set -euo pipefail

SOCK_PATH=/run/podman/podman.sock
BASE_IMAGE=${RL_BENCH_BASE_IMAGE:-localhost/rl-bench/debian-python:bookworm}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
LOG=/var/log/rl-bench-podman-service.log

say() { echo "setup_podman: $*"; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (installs packages, writes /etc/containers, starts the service)" >&2
    exit 1
fi

need=()
# iptables: netavark needs it to give containers (and RUN steps) a network.
for pair in podman:podman runc:runc debootstrap:debootstrap iptables:iptables; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        podman runc debootstrap iptables fuse-overlayfs netavark aardvark-dns conmon uidmap >/dev/null
fi

# Containers in this sandbox cannot raise ulimits, and crun is not what we test against.
mkdir -p /etc/containers
conf=/etc/containers/containers.conf
want=$'# Written by .ci/setup_podman.sh (rl-pipeline-bench)\n[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
if [ ! -f "$conf" ] || [ "$(cat "$conf")" != "${want%$'\n'}" ]; then
    if [ -f "$conf" ] && ! grep -q "setup_podman.sh" "$conf"; then
        cp "$conf" "$conf.bak.$(date +%s)"
        say "kept the previous $conf as a .bak copy"
    fi
    printf '%s' "$want" > "$conf"
    say "wrote $conf"
fi

ping_engine() { podman --url "unix://$SOCK_PATH" version >/dev/null 2>&1; }
if ! ping_engine; then
    mkdir -p "$(dirname "$SOCK_PATH")"
    rm -f "$SOCK_PATH"
    say "starting podman system service on unix://$SOCK_PATH (log: $LOG)"
    # From /: the service outlives this checkout, and a service whose working directory was
    # deleted (a removed clone) answers every container start with "write child: broken pipe".
    (cd / && setsid nohup podman system service --time=0 "unix://$SOCK_PATH" >>"$LOG" 2>&1 < /dev/null &)
    for _ in $(seq 1 60); do
        ping_engine && break
        sleep 0.5
    done
    ping_engine || { say "the podman service did not answer on $SOCK_PATH; see $LOG" >&2; exit 1; }
fi
say "engine up: $(podman --url "unix://$SOCK_PATH" version --format '{{.Server.Version}}' 2>/dev/null || echo unknown)"

if ! podman image exists "$BASE_IMAGE"; then
    rootfs=$(mktemp -d /var/tmp/rl-bench-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    say "debootstrap --variant=minbase $SUITE (+python3) from $MIRROR"
    debootstrap --variant=minbase --include=python3 "$SUITE" "$rootfs" "$MIRROR" >/var/log/rl-bench-debootstrap.log 2>&1 \
        || { say "debootstrap failed; see /var/log/rl-bench-debootstrap.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | podman import --quiet \
        --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$BASE_IMAGE" >/dev/null
    say "imported base image $BASE_IMAGE"
fi
say "ready: export DOCKER_HOST=unix://$SOCK_PATH RL_BENCH_BASE_IMAGE=$BASE_IMAGE"
