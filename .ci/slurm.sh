#!/usr/bin/env bash
# A one-node Slurm cluster on this machine for `openenv deploy slurm` and its tests
# (tests/integration/test_deploy_slurm.py). Debian packages, run as root; no systemd needed.
#
# Idempotent: when `scontrol ping` already reports the controller UP, nothing is done.
# Otherwise it installs what is missing (slurmctld, slurmd, slurm-client, munge, procps),
# creates a munge key, writes /etc/slurm/slurm.conf for this host (one node, every core, 90% of the
# memory, one default partition `debug` that lets jobs share the node), starts munged,
# slurmctld and slurmd, and waits up to $SLURM_WAIT seconds (default 30) for the node to be
# usable. The daemons' pids are written to /run/openenv-slurm.pids (stop: kill them).
set -euo pipefail

WAIT="${SLURM_WAIT:-30}"
PIDS=/run/openenv-slurm.pids

say() { echo "slurm: $*" >&2; }

if command -v scontrol >/dev/null 2>&1 && scontrol ping 2>/dev/null | grep -q 'is UP'; then
    say "controller already up"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    say "not root: cannot install or start Slurm"
    exit 1
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
need=()
for pkg in slurmctld slurmd slurm-client munge procps; do
    installed "$pkg" || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# munge authenticates the daemons to each other: one key, directories owned by its user.
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    head -c 1024 /dev/urandom >/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged
fi

node="$(hostname -s)"
cores="$(nproc)"
memory_mb="$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
# The controller's state lives in a folder of ours, made empty at every start: a machine may
# carry state of another cluster (seen in CI: a "local" cluster's state in /var/spool/slurmctld
# made slurmctld stop with CLUSTER NAME MISMATCH), and a test cluster keeps no jobs across starts.
state=/var/spool/openenv-slurmctld
rm -rf "$state"
install -d /etc/slurm /var/spool/openenv-slurmd /var/log/slurm
install -d -o slurm -g slurm "$state"
chown slurm:slurm /var/log/slurm
cat >/etc/slurm/slurm.conf <<EOF
# Written by .ci/slurm.sh: a one-node cluster for tests.
ClusterName=openenv-ci
SlurmctldHost=${node}
SlurmUser=slurm
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=${state}
SlurmdSpoolDir=/var/spool/openenv-slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=${node} CPUs=${cores} RealMemory=${memory_mb} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE OverSubscribe=YES State=UP
EOF

fail() {
    say "$1; last lines of the logs:"
    tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    exit 1
}
# A daemon left from an earlier configuration would not read the one just written.
for pidfile in /run/slurmd.pid /run/slurmctld.pid; do
    if [ -s "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null; then
        sleep 1
    fi
done
slurmctld || fail "slurmctld did not start"
slurmd || fail "slurmd did not start"

deadline=$((SECONDS + WAIT))
until sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        fail "the node is not usable after ${WAIT}s"
    fi
    sleep 0.5
done
echo "$(pgrep -x munged | tr '\n' ' ')$(cat /run/slurmctld.pid) $(cat /run/slurmd.pid)" >"$PIDS"
say "ready: node ${node} ($(sinfo -h -o '%c CPUs, %t'))"
