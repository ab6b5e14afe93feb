#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine, installing and starting one if needed.
#
# Idempotent: when `docker info` already answers, nothing is done. Otherwise Debian's
# docker.io (dockerd + containerd + runc), iptables and debootstrap (used by
# tests/support/base_image.py) are installed if missing, and dockerd is started in the
# background, logging to $DOCKERD_LOG (default /tmp/dockerd.log). The script waits at most
# $DOCKERD_WAIT seconds (default 60) for `docker info` to answer; on failure it prints the
# log tail and exits 1.
#
# Facts about the machines this runs on (a Firecracker VM, root, no systemd as PID 1,
# kernel with overlayfs, netfilter/nf_tables, bridge and veth built in, cgroup v1
# hierarchies already mounted) that decide the flags below:
#   * storage: /var/lib/docker sits on ext4, so the default overlay2 driver works. vfs is
#     used only when overlayfs is unavailable or the data root is itself on overlayfs/tmpfs
#     (nested overlay does not work), since vfs copies every layer in full.
#   * iptables: Debian's default iptables-nft works here, so dockerd keeps its iptables
#     rules: the default bridge network gets NAT (containers reach the package registries,
#     `docker build` RUN steps need no network_mode="host") and `docker run -p
#     127.0.0.1:PORT:8000` works (DNAT). If neither iptables-nft nor
#     iptables-legacy can list the nat table we fall back to --iptables=false, and then only
#     --network host gives containers network access.
#   * no userland proxy: with iptables working, dockerd runs with --userland-proxy=false, so
#     a port published on 127.0.0.1 is reached through the kernel's NAT (dockerd then sets
#     route_localnet on its bridges). Its userland proxy, docker-proxy, holds six open files
#     per connection (two sockets and a splice pipe for each direction) and stops, dropping
#     every connection, when accept fails for want of open files: every process here is
#     capped at 20,000 (root cannot raise it), so a published port carried about 3,300
#     sessions at once and a burst of 4,096 lost them all. DOCKERD_USERLAND_PROXY=true keeps
#     the proxy.
#   * MTU: the uplink has an MTU below 1500 (1400 here); docker0 is given the same MTU
#     so large downloads from inside containers cannot hit a path-MTU black hole.
#   * cgroups: the v1 hierarchies are mounted by the VM's init; dockerd uses the cgroupfs
#     driver (no systemd). If none are mounted, cgroupfs-mount mounts them.
#   * no systemd: the packaged service cannot be used (policy-rc.d also forbids starting
#     it during install), so dockerd is launched directly; it starts its own containerd.
# Extra flags for dockerd can be given in $DOCKERD_EXTRA_ARGS; $DOCKERD_STORAGE_DRIVER
# overrides the storage driver choice.
set -euo pipefail

LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
WAIT="${DOCKERD_WAIT:-60}"
DATA_ROOT=/var/lib/docker

say() { echo "docker-engine: $*" >&2; }

engine_answers() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && engine_answers; then
    say "engine already answers"
    limit="$(ulimit -Hn)"
    if [ "${DOCKERD_USERLAND_PROXY:-false}" != true ] && [ "$limit" != unlimited ] \
        && pgrep -x dockerd >/dev/null 2>&1 \
        && ! pgrep -ax dockerd | grep -q -- '--userland-proxy=false'; then
        say "note: this dockerd runs its userland proxy: a port published on 127.0.0.1 carries" \
            "about $(( (limit - 16) / 6 )) connections at once (six open files each, of $limit);" \
            "a dockerd started by this script publishes through the kernel's NAT instead"
    fi
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    say "not root: cannot install or start dockerd; start a Docker engine by hand"
    exit 1
fi

# --- install what is missing -------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
need=()
for pkg in docker.io iptables debootstrap debian-archive-keyring ca-certificates; do
    installed "$pkg" || need+=("$pkg")
done
# cgroupfs-mount only when nothing mounted the cgroup hierarchies.
if [ -z "$(ls -A /sys/fs/cgroup 2>/dev/null)" ] && ! installed cgroupfs-mount; then
    need+=(cgroupfs-mount)
fi
if [ "${#need[@]}" -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No recommends: they would pull apparmor, criu, needrestart and git, none needed here.
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -z "$(ls -A /sys/fs/cgroup 2>/dev/null)" ]; then
    say "mounting cgroup hierarchies"
    cgroupfs-mount
fi

# A dockerd may already be starting (another process ran this script a moment ago).
if ! pgrep -x dockerd >/dev/null 2>&1; then
    flags=()

    # Storage driver.
    mkdir -p "$DATA_ROOT"
    driver="${DOCKERD_STORAGE_DRIVER:-}"
    if [ -z "$driver" ]; then
        backing="$(stat -f -c %T "$DATA_ROOT" 2>/dev/null || echo unknown)"
        if grep -qw overlay /proc/filesystems && [ "$backing" != overlayfs ] && [ "$backing" != tmpfs ]; then
            driver=overlay2
        else
            driver=vfs
        fi
    fi
    flags+=("--storage-driver=$driver")

    # iptables: prefer the nft backend (Debian's default), then legacy, then none.
    nat=yes
    if iptables -t nat -L -n >/dev/null 2>&1; then
        :
    elif [ -x /usr/sbin/iptables-legacy ] && iptables-legacy -t nat -L -n >/dev/null 2>&1; then
        say "iptables-nft unusable: switching to iptables-legacy"
        update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null
        update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null 2>&1 || true
    else
        say "no working iptables: starting dockerd with --iptables=false (containers need --network host)"
        flags+=("--iptables=false" "--ip-masq=false")
        nat=no
    fi

    # Published ports through the kernel's NAT, not docker-proxy (see the header).
    if [ "$nat" = yes ] && [ "${DOCKERD_USERLAND_PROXY:-false}" != true ]; then
        flags+=("--userland-proxy=false")
    fi

    # MTU of the interface carrying the default route.
    uplink="$(ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')"
    if [ -n "$uplink" ] && [ -r "/sys/class/net/$uplink/mtu" ]; then
        mtu="$(cat "/sys/class/net/$uplink/mtu")"
        if [ "$mtu" -lt 1500 ]; then
            flags+=("--mtu=$mtu")
        fi
    fi

    # shellcheck disable=SC2206  # word splitting of the extra args is intended
    flags+=(${DOCKERD_EXTRA_ARGS:-})

    say "starting dockerd ${flags[*]} (log: $LOG)"
    # setsid + nohup: dockerd must outlive this script and the shell that ran it.
    setsid nohup dockerd "${flags[@]}" >"$LOG" 2>&1 </dev/null &
fi

deadline=$((SECONDS + WAIT))
until engine_answers; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        say "dockerd did not answer within ${WAIT}s; last lines of $LOG:"
        tail -n 40 "$LOG" >&2 || true
        exit 1
    fi
    sleep 1
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        say "dockerd exited; last lines of $LOG:"
        tail -n 40 "$LOG" >&2 || true
        exit 1
    fi
done
say "engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
