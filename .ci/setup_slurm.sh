#!/usr/bin/env bash
# Install and start a real one-node SLURM cluster on localhost, for the tests that run
# the pipeline through `--profile profiles/slurm`: Debian's slurmctld, slurmd, munge and
# slurm-client, started by hand (no systemd). The node offers fake GPUs as generic
# resources (GresTypes=gpu) backed by character-device nodes made with
# `mknod ... c 1 3` (the same device numbers as /dev/null), so SLURM allocates and
# reports GPU ids (SLURM_JOB_GPUS, SLURM_STEP_GPUS) exactly as it does on a GPU node.
# No accounting daemon: the profile polls with squeue (docs/cluster.md says why).
# Idempotent; run as root. Stop the daemons with `bash .ci/setup_slurm.sh --stop`.
set -euo pipefail

CLUSTER=rlbench
NODE=localhost
PARTITION=debug
FAKE_GPUS=${RL_BENCH_SLURM_FAKE_GPUS:-2}
GPU_DEV_PREFIX=/dev/rlbench-fake-gpu
CONF_DIR=/etc/slurm
LOG_DIR=/var/log/slurm
SPOOL_CTLD=/var/spool/slurmctld
SPOOL_D=/var/spool/slurmd
MARK="# Written by .ci/setup_slurm.sh (rl-pipeline-bench)"

say() { echo "setup_slurm: $*"; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (installs packages, writes /etc/slurm, starts munged, slurmctld, slurmd)" >&2
    exit 1
fi

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_daemons() {
    # Only the daemons this script started: their pid files, one pid each.
    for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
        if pid_alive "$pidfile"; then
            pid=$(cat "$pidfile")
            kill "$pid"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            say "stopped $(basename "$pidfile" .pid) (pid $pid)"
        fi
    done
}

if [ "${1:-}" = "--stop" ]; then
    stop_daemons
    exit 0
fi

need=()
for pair in slurmctld:slurmctld slurmd:slurmd munged:munge sbatch:slurm-client; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    apt-get update -qq
    # policy-rc.d: the packages' service scripts must not try to start anything here.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd munge slurm-client >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi

# Fake GPU devices: character nodes with /dev/null's numbers (1, 3), so opening one is
# harmless; slurmd only needs the files to exist to offer them as gres.
for i in $(seq 0 $((FAKE_GPUS - 1))); do
    dev="$GPU_DEV_PREFIX$i"
    if [ ! -c "$dev" ]; then
        rm -f "$dev"
        mknod -m 666 "$dev" c 1 3
    fi
done

# The node advertises what a small GPU node has, not what this machine has
# (SlurmdParameters=config_overrides), so the SLURM profile's per-GPU CPU and
# memory requests schedule unchanged. Nothing enforces them here (no cgroups).
cpus=${RL_BENCH_SLURM_CPUS:-16}
mem_mb=${RL_BENCH_SLURM_MEM_MB:-262144}
mkdir -p "$CONF_DIR" "$LOG_DIR" "$SPOOL_CTLD" "$SPOOL_D"

write_if_changed() {  # PATH CONTENT: rewrite only on change; returns 0 when it changed
    if [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; then
        return 1
    fi
    if [ -f "$1" ] && ! grep -q "setup_slurm.sh" "$1"; then
        cp "$1" "$1.bak.$(date +%s)"
        say "kept the previous $1 as a .bak copy"
    fi
    printf '%s\n' "$2" > "$1"
    say "wrote $1"
    return 0
}

changed=0
# MinJobAge 300 s: a finished job stays visible to squeue long enough for the
# executor plugin to see it finish (the plugin falls back to sacct below 3x its
# first status-check delay). No accounting storage, no cgroups (no systemd here).
write_if_changed "$CONF_DIR/slurm.conf" "$MARK
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SPOOL_CTLD
SlurmdSpoolDir=$SPOOL_D
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=300
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:$FAKE_GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP" && changed=1
write_if_changed "$CONF_DIR/gres.conf" "$MARK
NodeName=$NODE Name=gpu File=$GPU_DEV_PREFIX[0-$((FAKE_GPUS - 1))]" && changed=1

# munge: key from the package (or a new one), daemon as the munge user.
if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
chmod 755 /run/munge
if ! pid_alive /run/munge/munged.pid; then
    rm -f /run/munge/munge.socket.2
    runuser -u munge -- /usr/sbin/munged
    say "started munged"
fi
munge -n | unmunge >/dev/null || { say "munge does not work; see /var/log/munge/munged.log" >&2; exit 1; }

if [ "$changed" = 1 ] && { pid_alive /run/slurmctld.pid || pid_alive /run/slurmd.pid; }; then
    say "configuration changed: restarting the SLURM daemons"
    for pidfile in /run/slurmd.pid /run/slurmctld.pid; do
        if pid_alive "$pidfile"; then
            pid=$(cat "$pidfile"); kill "$pid"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    done
fi
if ! pid_alive /run/slurmctld.pid; then
    slurmctld -i   # -i: ignore state files a previous configuration left behind
    say "started slurmctld (log $LOG_DIR/slurmctld.log)"
fi
if ! pid_alive /run/slurmd.pid; then
    slurmd -N "$NODE"
    say "started slurmd -N $NODE (log $LOG_DIR/slurmd.log)"
fi

for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null || true)
    case "$state" in
        idle*|mixed*|allocated*) break ;;
        down*|drain*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
case "$state" in
    idle*|mixed*|allocated*) ;;
    *) say "node $NODE is not ready (state '${state:-unknown}'); see $LOG_DIR/slurmctld.log and $LOG_DIR/slurmd.log" >&2; exit 1 ;;
esac
say "ready: cluster $CLUSTER, partition $PARTITION, node $NODE ($state, $cpus CPUs, gres $(sinfo -h -n "$NODE" -o '%G'))"
