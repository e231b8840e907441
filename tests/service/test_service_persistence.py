"""Restart persistence of the embedded Redis: SIGTERM and kill -9 of `featurehash serve`.

One data directory for the module. The first test creates maps, stops the server with
SIGTERM, starts a new one on the same directory and checks every map (and that its
features are bitwise the same). The second creates a map on that server and kills the
launcher with SIGKILL right away: its redis-server child must die too (PDEATHSIG), and a
new server on the directory must still have the map.
"""

from __future__ import annotations

import os
import signal
import subprocess

import numpy as np
import pytest

from featurehash.maps import create_map
from service_support import (NPY, ServiceProcess, children, cmdline, group_members, list_all, load_npy, npy_bytes,
                             proc_stat, serve_command, service_env, start_all, wait_until)

SPECS = [
    {"method": "rff", "input_dim": 8, "n_components": 64, "seed": 1, "params": {"gamma": 0.2}},
    {"method": "nrff", "input_dim": 8, "n_components": 32, "seed": 2},
    {"method": "gcws", "input_dim": 8, "n_components": 16, "seed": 3, "params": {"bits": 5}},
]
X = np.random.default_rng(0).random((10, 8)) + 0.05


class Holder:
    def __init__(self, data_dir):
        self.data_dir = data_dir
        self.port: int | None = None
        self.server: ServiceProcess | None = None
        self.specs: list[dict] = []
        self.outputs: dict[str, bytes] = {}


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    holder = Holder(tmp_path_factory.mktemp("persistent-store"))
    yield holder
    if holder.server is not None:
        problems = holder.server.terminate()
        assert not problems, problems


def start_server(holder: Holder, name: str) -> ServiceProcess:
    server = ServiceProcess(name, holder.data_dir, port=holder.port)
    holder.port = server.port  # restarts reuse the port
    start_all([server])
    holder.server = server
    return server


def outputs(server: ServiceProcess, map_id: str) -> bytes:
    """The .npy answer of /transform (dense features or GCWS indices)."""
    with server.client() as http:
        response = http.post(f"/v1/maps/{map_id}/transform", content=npy_bytes(X),
                             headers={"Content-Type": NPY, "Accept": NPY})
        assert response.status_code == 200, response.text
        return response.content


def check_maps(server: ServiceProcess, holder: Holder) -> None:
    with server.client() as http:
        stored = {spec["id"]: spec for spec in list_all(http)}
        assert set(stored) == {spec["id"] for spec in holder.specs}
        for spec in holder.specs:
            assert stored[spec["id"]] == spec
            assert http.get(f"/v1/maps/{spec['id']}").json() == spec
            assert outputs(server, spec["id"]) == holder.outputs[spec["id"]], spec["id"]


def test_maps_survive_a_sigterm_restart(state):
    first = start_server(state, "first")
    with first.client() as http:
        for spec in SPECS:
            response = http.post("/v1/maps", json=spec)
            assert response.status_code == 201, response.text
            state.specs.append(response.json())
    for spec in state.specs:
        state.outputs[spec["id"]] = outputs(first, spec["id"])
        library = create_map(spec).transform(X)
        expected = library if isinstance(library, np.ndarray) else library.indices
        np.testing.assert_array_equal(load_npy(state.outputs[spec["id"]]), expected)

    # a second launcher on the same data directory refuses to start (one Redis per data file)
    second = subprocess.Popen(serve_command() + ["serve", "--port", "0", "--data-dir", str(state.data_dir)],
                              env=service_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        _, stderr = second.communicate(timeout=60)
    finally:
        if second.poll() is None or group_members(second.pid):
            os.killpg(second.pid, signal.SIGKILL)
            second.wait()
    assert second.returncode != 0
    assert "another featurehash server already uses" in stderr

    problems = first.terminate()
    state.server = None
    assert not problems, problems
    assert (state.data_dir / "redis.log").exists()

    restarted = start_server(state, "after-sigterm")
    check_maps(restarted, state)


def test_maps_created_just_before_a_kill_9_survive(state):
    server = state.server or start_server(state, "before-kill")
    with server.client() as http:
        response = http.post("/v1/maps", json={"method": "rff", "input_dim": 8, "n_components": 16, "seed": 99,
                                               "params": {"variant": "phase"}})
        assert response.status_code == 201, response.text
    spec = response.json()
    state.specs.append(spec)
    state.outputs[spec["id"]] = outputs(server, spec["id"])

    kids = {pid: cmdline(pid) for pid in children(server.pid)}
    redis_pids = [pid for pid, line in kids.items() if "redis-server" in line]
    web_pids = [pid for pid, line in kids.items() if "featurehash.service.web" in line]
    assert len(redis_pids) == 1 and len(web_pids) == 1, kids
    server.proc.send_signal(signal.SIGKILL)
    assert server.proc.wait(10) == -signal.SIGKILL
    redis_died = wait_until(lambda: not children_alive(redis_pids), 10.0)
    web_died = wait_until(lambda: not children_alive(web_pids), 5.0)
    server.cleanup()  # kills whatever is left of the old process group (an orphaned uvicorn)
    state.server = None
    assert redis_died, "the embedded redis-server outlived its killed launcher"

    restarted = start_server(state, "after-kill")
    check_maps(restarted, state)
    assert web_died, ("the uvicorn child outlived its killed launcher (it keeps the port and answers 503s): "
                      "start it with preexec_fn=_die_with_parent too")


def children_alive(pids: list[int]) -> bool:
    return any(proc_stat(pid) is not None for pid in pids)
