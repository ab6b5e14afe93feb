#!/usr/bin/env bash
# What the provider tests need beyond the Docker engine: the runtime's extras
# (Docker SDK, Ray) and a one-node swarm. Idempotent; run after .ci/docker-engine.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# openenv-runtime[docker,ray,daytona]: the Docker SDK, Ray (a cp311 wheel, ~80 MB) and
# Daytona's SDK (DaytonaProvider's tests use its real parameter and image objects).
python3 -m pip install --quiet --disable-pip-version-check -e "./runtime[docker,ray,daytona]"

# A one-node swarm for SwarmProvider. The ingress routing mesh does not work on these
# machines (no IPVS), so the provider publishes ports in host mode and needs none.
if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" != "active" ]; then
    docker swarm init --advertise-addr 127.0.0.1 >/dev/null
fi
