#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by up.sh: cancel leftover jobs,
# then stop slurmd, slurmctld and munged (via their pid files only; no broad
# pkill). Packages, config and $RL_SLURM_DIR stay in place. Idempotent.
#
# Env: RL_SLURM_DIR (default /tmp/rl-slurm)
set -euo pipefail

DIR="${RL_SLURM_DIR:-/tmp/rl-slurm}"
log() { echo "rl-slurm down: $*" >&2; }

# shellcheck source=ci/slurm/pids.sh
source "$(dirname "${BASH_SOURCE[0]}")/pids.sh"

# 1. Cancel all jobs while the controller still answers, then give steps a
#    moment to be killed (KillWait=5 in our slurm.conf).
if command -v scontrol >/dev/null 2>&1 && timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; then
  jobs="$(squeue -h -o %i 2>/dev/null || true)"
  if [ -n "$jobs" ]; then
    log "cancelling jobs: $(echo $jobs)"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for i in $(seq 1 50); do
      [ -z "$(squeue -h -t PD,R,CG,S -o %i 2>/dev/null || true)" ] && break
      sleep 0.2
    done
  fi
fi

# 2. Daemons, compute side first.
stop_pidfile "$DIR/run/slurmd.pid" slurmd
stop_pidfile "$DIR/run/slurmctld.pid" slurmctld
stop_pidfile /run/munge/munged.pid munged

echo "rl-slurm: DOWN (state kept in $DIR; packages installed)"
