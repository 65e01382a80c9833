"""deploy/: Arena's Kubernetes manifests (docs/deploy.md), checked offline.

Every kustomization (the base and each overlay) is rendered with `kubectl kustomize`; every
object it renders is validated against the Kubernetes JSON schemas (kubernetes-validate,
strict: an unknown field is an error) or, for KEDA's objects, against the CRDs of a KEDA
release vendored in tests/deploy/schemas/; then what an operator relies on is asserted:
locked-down containers, the GPU pool on GPU nodes, autoscaling on the lists Celery really
fills, a single beat, a grace period that outlasts a unit, a Redis that keeps data behind a
password, and no password in the repository. Nothing here touches a network.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import json
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import redis
import yaml
from celery import Celery

from arena.embedded import embedded_redis
from tasks.app import QUEUES, configure
from tasks.keys import Keys
from tasks.settings import ArenaSettings, celery_url
from tasks.spec import Protocol
from tasks.units import chunk_time_limits
from tasks.workloads.base import Unit
from tests.needs import unavailable

Manifest = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMAS = Path(__file__).parent / "schemas"
# kubectl v1.32 (kustomize v5.5) is what these manifests were written against; the schemas
# kubernetes-validate ships for 1.32 are the ones to meet.
KUBERNETES_VERSION = "1.32.0"
NAMESPACE = "arena"
WORKER_UID = 10001  # the `arena` user of workers/docker/Dockerfile
WORK_DIR = "/var/lib/arena/work"
GPU_TAINT = ("nvidia.com/gpu", "NoSchedule")
# After Celery's hard time limit of a chunk: storing its result, acknowledging, exiting.
STORE_MARGIN_S = 60
SECRET = "redis-auth"
PASSWORD_KEY = "REDIS_PASSWORD"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
KUSTOMIZATIONS = ["base", *(f"overlays/{name}" for name in OVERLAYS)]
WITH_GPU_POOL = [k for k in KUSTOMIZATIONS if k != "overlays/cpu-only"]
VAR_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


# ---------------------------------------------------------------------------------------------
# Rendering


def kubectl_or_skip() -> str:
    found = shutil.which("kubectl")
    if found:
        return found
    unavailable(
        "kubectl (with its built-in kustomize) is not installed: deploy/ cannot be rendered"
    )
    raise AssertionError("unreachable")


def gitignore_patterns() -> list[str]:
    lines = (DEPLOY / ".gitignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(relative: str) -> bool:
    """Whether deploy/.gitignore keeps `relative` (a path under deploy/) out of the repository."""
    return any(fnmatch.fnmatchcase(relative, pattern) for pattern in gitignore_patterns())


def committed_files() -> list[Path]:
    return [
        p
        for p in sorted(DEPLOY.rglob("*"))
        if p.is_file() and not ignored(p.relative_to(DEPLOY).as_posix())
    ]


def secret_sources(kustomization: Path) -> list[Path]:
    """The files a kustomization's secretGenerators read."""
    spec = yaml.safe_load(kustomization.read_text()) or {}
    found = []
    for generator in spec.get("secretGenerator", []):
        for entry in [*generator.get("envs", []), *generator.get("files", [])]:
            found.append(kustomization.parent / str(entry).split("=", 1)[-1])
    return found


def copy_deploy(dest: Path) -> Path:
    """deploy/ as the repository holds it: without the password files a developer may have."""

    def skip(folder: str, names: list[str]) -> set[str]:
        base = Path(folder).relative_to(DEPLOY)
        return {n for n in names if ignored((base / n).as_posix())}

    shutil.copytree(DEPLOY, dest, ignore=skip)
    return dest


def kustomize(kubectl: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=120
    )


@dataclass
class Tree:
    path: Path
    passwords: dict[str, str]  # overlay -> the password written to its secret file


@pytest.fixture(scope="module")
def kubectl() -> str:
    return kubectl_or_skip()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    """A copy of deploy/ with a fresh random password file for every overlay, as an operator
    writes it (docs/deploy.md)."""
    path = copy_deploy(tmp_path_factory.mktemp("render") / "deploy")
    passwords = {}
    for overlay in OVERLAYS:
        password = secrets.token_hex(32)
        for source in secret_sources(path / "overlays" / overlay / "kustomization.yaml"):
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_text(f"{PASSWORD_KEY}={password}\n")
        passwords[overlay] = password
    return Tree(path, passwords)


@pytest.fixture(scope="module")
def render(kubectl: str, tree: Tree) -> Callable[[str], list[Manifest]]:
    rendered: dict[str, list[Manifest]] = {}

    def objects(name: str) -> list[Manifest]:
        if name not in rendered:
            done = kustomize(kubectl, tree.path / name)
            assert done.returncode == 0, f"kubectl kustomize {name}: {done.stderr}"
            rendered[name] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
        return rendered[name]

    return objects


# ---------------------------------------------------------------------------------------------
# Helpers over rendered objects


def find(objects: list[Manifest], kind: str, name: str) -> Manifest | None:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    return None


def get(objects: list[Manifest], kind: str, name: str) -> Manifest:
    obj = find(objects, kind, name)
    assert obj is not None, f"no {kind} {name} rendered"
    return obj


def workloads(objects: list[Manifest]) -> Iterator[Manifest]:
    return (o for o in objects if o["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "Job"})


def containers(workload: Manifest) -> list[Manifest]:
    pod = workload["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def env(container: Manifest) -> dict[str, Manifest]:
    return {e["name"]: e for e in container.get("env", [])}


def config_env(objects: list[Manifest], container: Manifest) -> dict[str, str]:
    """The variables a container gets from ConfigMaps (envFrom)."""
    values: dict[str, str] = {}
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        if ref:
            values.update(get(objects, "ConfigMap", ref["name"]).get("data", {}))
    return values


def argv(container: Manifest) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def option(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def worker_deployments(objects: list[Manifest]) -> list[Manifest]:
    return [
        o
        for o in objects
        if o["kind"] == "Deployment"
        and argv(o["spec"]["template"]["spec"]["containers"][0])[:2] == ["arena", "worker"]
    ]


def quantity(value: str | int) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


# ---------------------------------------------------------------------------------------------
# Schemas


def is_keda(obj: Manifest) -> bool:
    return str(obj["apiVersion"]).startswith("keda.sh/")


def strict(schema: Any) -> Any:
    """A CRD's schema as `kubectl apply` validates it (field validation Strict): an object with
    declared properties admits no other field."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@cache
def keda_validators() -> dict[tuple[str, str], jsonschema.Draft4Validator]:
    """(apiVersion, kind) -> a validator for the vendored KEDA CRDs' served versions."""
    validators = {}
    for path in sorted(SCHEMAS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                key = (f"{group}/{version['name']}", kind)
                validators[key] = jsonschema.Draft4Validator(
                    strict(version["schema"]["openAPIV3Schema"])
                )
    return validators


def keda_errors(obj: Manifest) -> list[str]:
    validator = keda_validators().get((obj["apiVersion"], obj["kind"]))
    assert validator is not None, f"no vendored CRD for {obj['apiVersion']} {obj['kind']}"
    return [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(obj)
    ]


def kubernetes_errors(obj: Manifest) -> list[str]:
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(str(p) for p in exc.path)}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"no schema: {exc.message}"]
    return []


# ---------------------------------------------------------------------------------------------
# Rendering and schemas


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_kustomization_renders_into_the_arena_namespace(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), "an object is rendered twice"
    assert ("Namespace", NAMESPACE) in keys
    for obj in objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == NAMESPACE, obj["metadata"]["name"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kubernetes_objects_match_the_kubernetes_schemas(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    problems = {
        f"{o['kind']}/{o['metadata']['name']}": errors
        for o in render(name)
        if not is_keda(o) and (errors := kubernetes_errors(o))
    }
    assert not problems


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_keda_objects_match_keda_crds(render: Callable[[str], list[Manifest]], name: str) -> None:
    keda = [o for o in render(name) if is_keda(o)]
    assert {o["kind"] for o in keda} == {"ScaledObject", "TriggerAuthentication"}
    problems = {
        f"{o['kind']}/{o['metadata']['name']}": errors for o in keda if (errors := keda_errors(o))
    }
    assert not problems


def test_validation_rejects_unknown_fields_and_wrong_types(
    render: Callable[[str], list[Manifest]],
) -> None:
    """The checks above would catch a typo: both validators are strict."""
    objects = render("base")
    deployment = copy.deepcopy(get(objects, "Deployment", "worker-cpu"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    assert kubernetes_errors(deployment)
    typo = copy.deepcopy(get(objects, "ScaledObject", "worker-gpu"))
    typo["spec"]["minReplicas"] = typo["spec"].pop("minReplicaCount")
    assert keda_errors(typo)
    wrong = copy.deepcopy(get(objects, "ScaledObject", "worker-gpu"))
    wrong["spec"]["triggers"][0]["metadata"]["listLength"] = 2  # KEDA's metadata are strings
    assert keda_errors(wrong)


def test_vendored_keda_crds_name_their_release_source_and_license() -> None:
    for path in sorted(SCHEMAS.glob("*.yaml")):
        text = path.read_text()
        header = text[: text.index("apiVersion:")]
        for needle in ("KEDA v2.9.1", "kedacore/", "Apache-2.0", "commit "):
            assert needle in header, f"{path.name}: header lacks {needle!r}"
        crd = yaml.safe_load(text)
        assert crd["metadata"]["labels"]["app.kubernetes.io/version"] == "2.9.1"


# ---------------------------------------------------------------------------------------------
# What an operator relies on


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_container_runs_locked_down(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    for workload in workloads(render(name)):
        pod = workload["spec"]["template"]["spec"]
        where = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod.get("automountServiceAccountToken") is False, where
        for container in containers(workload):
            security = container["securityContext"]
            uid = security.get("runAsUser", pod["securityContext"].get("runAsUser"))
            assert uid not in (None, 0), where
            assert security.get("runAsNonRoot", True) is True, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["allowPrivilegeEscalation"] is False, where
            assert "ALL" in security["capabilities"]["drop"], where
            assert not security["capabilities"].get("add"), where
            assert not security.get("privileged"), where
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][kind]), where


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_arena_pods_run_as_the_image_user_with_writable_scratch(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    for workload in workloads(objects):
        if workload["metadata"]["name"] == "redis":
            continue
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == WORKER_UID
        emptydirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for container in containers(workload):
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            assert mounts.get("/tmp") in emptydirs
            assert env(container)["HOME"]["value"] == "/tmp"
    for worker in worker_deployments(objects):
        container = worker["spec"]["template"]["spec"]["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        assert config_env(objects, container)["ARENA_WORK_DIR"] == WORK_DIR
        assert mounts.get(WORK_DIR) in {
            v["name"] for v in worker["spec"]["template"]["spec"]["volumes"] if "emptyDir" in v
        }


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_workers_consume_their_queue_and_export_metrics(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    workers = {w["metadata"]["name"]: w for w in worker_deployments(render(name))}
    expected = {"worker-cpu": "cpu"} | ({"worker-gpu": "gpu"} if name in WITH_GPU_POOL else {})
    assert {n: option(argv(containers(w)[0]), "--queues") for n, w in workers.items()} == expected
    for worker in workers.values():
        container = containers(worker)[0]
        args = argv(container)
        # `args`, not `command`: the image's entrypoint (tini) stays PID 1 and forwards SIGTERM.
        assert "command" not in container
        port = int(option(args, "--metrics-port"))
        assert option(args, "--metrics-host") == "0.0.0.0"
        assert port in [p["containerPort"] for p in container["ports"]]
        annotations = worker["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        # The autoscaler owns the replica count: `kubectl apply` must not reset it.
        assert "replicas" not in worker["spec"]


@pytest.mark.parametrize(
    ("name", "pool"),
    [(n, "worker-cpu") for n in KUSTOMIZATIONS] + [(n, "worker-gpu") for n in WITH_GPU_POOL],
)
def test_workers_run_one_process_per_cpu_of_their_limit(
    render: Callable[[str], list[Manifest]], name: str, pool: str
) -> None:
    """GPU pods too: their emulators need the cores, and a checkpoint's lockstep batches share
    one inference process (one CUDA context) per pod (docs/deploy.md)."""
    container = containers(get(render(name), "Deployment", pool))[0]
    concurrency = option(argv(container), "--concurrency")
    variable = VAR_REFERENCE.fullmatch(concurrency)
    assert variable is not None
    source = env(container)[variable.group(1)]["valueFrom"]["resourceFieldRef"]
    assert source["resource"] == "limits.cpu"
    assert quantity(container["resources"]["limits"]["cpu"]) >= 1


@pytest.mark.parametrize("name", WITH_GPU_POOL)
def test_the_gpu_pool_gets_a_gpu_on_a_gpu_node(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    worker = get(render(name), "Deployment", "worker-gpu")
    pod = worker["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"].get("requests", {}).get("nvidia.com/gpu", 1) == 1
    assert pod["nodeSelector"]
    key, effect = GPU_TAINT
    assert any(
        t["key"] == key
        and t.get("effect", effect) == effect
        and t.get("operator", "Equal") in {"Exists", "Equal"}
        for t in pod["tolerations"]
    )


def test_the_cpu_only_overlay_has_no_gpu_pool(render: Callable[[str], list[Manifest]]) -> None:
    objects = render("overlays/cpu-only")
    assert not [o for o in objects if o["metadata"]["name"] == "worker-gpu"]
    for workload in workloads(objects):
        for container in containers(workload):
            assert "nvidia.com/gpu" not in container["resources"].get("limits", {})
    assert get(objects, "Deployment", "worker-cpu")


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_scaled_objects_scale_each_pool_on_the_queue_it_consumes(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    targets = {o["spec"]["scaleTargetRef"]["name"] for o in scaled}
    assert targets == {w["metadata"]["name"] for w in worker_deployments(objects)}
    redis_port = get(objects, "Service", "redis")["spec"]["ports"][0]["port"]
    for obj in scaled:
        ref = obj["spec"]["scaleTargetRef"]
        assert ref.get("kind", "Deployment") == "Deployment"
        worker = get(objects, "Deployment", ref["name"])
        container = containers(worker)[0]
        # The broker's list holds a window of the pool; the rest waits in the pool's backlog
        # (tasks/keys.py names it): the pool scales on both.
        queue = option(argv(container), "--queues")
        assert queue in QUEUES
        prefix = env(container).get("ARENA_KEY_PREFIX", {}).get("value", "arena:")
        lists = [t["metadata"]["listName"] for t in obj["spec"]["triggers"]]
        assert lists == [queue, Keys(prefix).pool_backlog(queue)]
        for trigger in obj["spec"]["triggers"]:
            assert trigger["type"] == "redis"
            meta = trigger["metadata"]
            # KEDA runs in its own namespace: the address must name this one.
            assert meta["address"] == f"redis.{obj['metadata']['namespace']}.svc:{redis_port}"
            url = env(container)["ARENA_REDIS_URL"]["value"]
            assert meta.get("databaseIndex", "0") == (urlsplit(url).path.strip("/") or "0")
            assert int(meta["listLength"]) >= 1
            auth = get(objects, "TriggerAuthentication", trigger["authenticationRef"]["name"])
            refs = auth["spec"]["secretTargetRef"]
            (password,) = [r for r in refs if r["parameter"] == "password"]
            assert (password["name"], password["key"]) == (SECRET, PASSWORD_KEY)
        assert obj["spec"]["maxReplicaCount"] >= max(1, obj["spec"]["minReplicaCount"])


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_gpu_pool_scales_to_zero_and_cpu_pool_keeps_a_watchdog(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    assert get(objects, "ScaledObject", "worker-cpu")["spec"]["minReplicaCount"] >= 1
    if name in WITH_GPU_POOL:
        assert get(objects, "ScaledObject", "worker-gpu")["spec"]["minReplicaCount"] == 0


def test_queue_lists_are_the_ones_celery_fills(tmp_path: Path) -> None:
    """KEDA counts LLEN of `cpu` and `gpu`: publish a chunk to each queue with Arena's own Celery
    configuration (tasks/app.py) through kombu's Redis transport, and find it in that list."""
    with mock.patch("tasks.app.app") as fake:
        configure(ArenaSettings(redis_url="redis://redis:6379/0"))
    config = dict(fake.conf.update.call_args.kwargs)
    with embedded_redis(tmp_path / "redis") as url:
        probe = Celery("arena-probe", set_as_current=False)
        probe.conf.update(config)
        probe.conf.update(broker_url=celery_url(url), result_backend=celery_url(url))
        try:
            for queue in QUEUES:
                probe.send_task("arena.run_chunk", ("batch", "chunk", []), queue=queue)
        finally:
            probe.close()
        client = redis.Redis.from_url(url, decode_responses=True)
        try:
            for queue in QUEUES:
                assert client.type(queue) == "list"
                assert client.llen(queue) == 1
        finally:
            client.close()


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_beat_is_a_single_replica_that_never_overlaps(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    beat = get(objects, "Deployment", "beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert argv(containers(beat)[0])[:2] == ["arena", "beat"]
    scaled = {o["spec"]["scaleTargetRef"]["name"] for o in objects if o["kind"] == "ScaledObject"}
    assert "beat" not in scaled


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_api_is_served_on_port_8000(render: Callable[[str], list[Manifest]], name: str) -> None:
    objects = render(name)
    api = get(objects, "Deployment", "api")
    container = containers(api)[0]
    assert argv(container)[:2] == ["arena", "api"]
    assert [p["containerPort"] for p in container["ports"]] == [8000]
    (port,) = get(objects, "Service", "api")["spec"]["ports"]
    assert port["port"] == 8000


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_services_select_pods_and_ports_that_exist(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    for service in (o for o in objects if o["kind"] == "Service"):
        selector = service["spec"]["selector"]
        pods = [
            w
            for w in workloads(objects)
            if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert pods, f"Service {service['metadata']['name']} selects no pod"
        names = {p.get("name") for w in pods for c in containers(w) for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            assert isinstance(target, int) or target in names


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_grace_period_outlasts_a_unit_at_the_default_time_limit(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    """A worker told to stop finishes the chunk in hand (docs/deploy.md): the kubelet must wait
    for Celery's hard limit of a one-unit chunk at the default unit_time_limit_s, plus the time
    to store its result. (A longer chunk cut off at the deadline is redelivered, not lost.)"""
    default_limit = Protocol().unit_time_limit_s
    unit = Unit(
        id="b:a:i:0",
        batch_id="b",
        workload="mario",
        agent="a",
        item="i",
        episode=0,
        env_seed=0,
        agent_seed=0,
        time_limit_s=default_limit,
        payload={},
    )
    hard_limit = chunk_time_limits([unit])[1]
    objects = render(name)
    workers = worker_deployments(objects)
    assert workers
    for worker in workers:
        grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert grace >= hard_limit + STORE_MARGIN_S, worker["metadata"]["name"]
        settings = config_env(objects, containers(worker)[0])
        # Workers refuse a chunk whose hard limit is not below the visibility timeout.
        assert float(settings["ARENA_VISIBILITY_TIMEOUT_S"]) > hard_limit
        assert float(settings["ARENA_LOST_WORKER_S"]) < grace


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_redis_keeps_every_write_and_requires_the_secret_password(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    redis_set = get(objects, "StatefulSet", "redis")
    assert redis_set["spec"]["replicas"] == 1
    container = containers(redis_set)[0]
    args = argv(container)
    assert args[0] == "redis-server"
    assert option(args, "--appendonly") == "yes"
    assert option(args, "--appendfsync") == "always"
    assert option(args, "--maxmemory-policy") == "noeviction"
    assert option(args, "--requirepass") == f"$({PASSWORD_KEY})"
    password = env(container)[PASSWORD_KEY]
    assert "value" not in password
    assert password["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": PASSWORD_KEY}
    data_dir = option(args, "--dir")
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    claims = {c["metadata"]["name"] for c in redis_set["spec"]["volumeClaimTemplates"]}
    assert mounts.get(data_dir) in claims
    assert container["image"].split(":")[0].endswith("redis")


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_redis_url_is_built_from_the_secret(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    redis_port = get(objects, "Service", "redis")["spec"]["ports"][0]["port"]
    arena_pods = [w for w in workloads(objects) if w["metadata"]["name"] != "redis"]
    assert len(arena_pods) >= 3  # the pools, beat, the API
    for container in (c for w in arena_pods for c in containers(w)):
        variables = env(container)
        url = variables["ARENA_REDIS_URL"]["value"]
        assert VAR_REFERENCE.findall(url) == [PASSWORD_KEY]
        secret_ref = variables[PASSWORD_KEY]["valueFrom"]["secretKeyRef"]
        assert secret_ref == {"name": SECRET, "key": PASSWORD_KEY}
        parts = urlsplit(url.replace(f"$({PASSWORD_KEY})", secrets.token_hex(32)))
        assert (parts.hostname, parts.port) == ("redis", redis_port)
        ArenaSettings(redis_url=parts.geturl())  # Arena accepts it


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_variable_reference_resolves(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    """The kubelet leaves a $(VAR) it cannot resolve as it is (a password-less URL, a
    concurrency of "$(X)"): each must name a variable defined before it."""
    objects = render(name)
    for workload in workloads(objects):
        for container in containers(workload):
            defined = set(config_env(objects, container))
            for variable in container.get("env", []):
                for ref in VAR_REFERENCE.findall(variable.get("value", "")):
                    assert ref in defined, f"{variable['name']} uses $({ref}) before it is set"
                defined.add(variable["name"])
            for word in argv(container):
                for ref in VAR_REFERENCE.findall(word):
                    assert ref in defined, f"{workload['metadata']['name']}: $({ref})"


def test_images_can_be_swapped_with_kustomize_images(kubectl: str, tree: Tree) -> None:
    """Every container's image is one the base's `images:` entries name, so an overlay can
    point each at another registry, tag or digest."""
    base = yaml.safe_load((tree.path / "base" / "kustomization.yaml").read_text())
    names = [entry["name"] for entry in base["images"]]
    overlay = tree.path / "swapped"
    overlay.mkdir(exist_ok=True)
    images = [{"name": n, "newName": f"registry.invalid/{n}", "newTag": "9.9.9"} for n in names]
    kustomization = {"resources": ["../base"], "images": images}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    done = kustomize(kubectl, overlay)
    assert done.returncode == 0, done.stderr
    objects = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    used = {c["image"] for w in workloads(objects) for c in containers(w)}
    assert used == {f"registry.invalid/{n}:9.9.9" for n in names}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_secret_holds_the_password_from_the_uncommitted_file(
    render: Callable[[str], list[Manifest]], tree: Tree, overlay: str
) -> None:
    secret = get(render(f"overlays/{overlay}"), "Secret", SECRET)
    password = base64.b64decode(secret["data"][PASSWORD_KEY]).decode()
    assert password == tree.passwords[overlay]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_does_not_render_without_its_password_file(
    kubectl: str, tmp_path: Path, overlay: str
) -> None:
    """Fail closed: an overlay never deploys a default password."""
    path = copy_deploy(tmp_path / "deploy")
    sources = secret_sources(path / "overlays" / overlay / "kustomization.yaml")
    assert sources, f"overlay {overlay} generates no Secret"
    done = kustomize(kubectl, path / "overlays" / overlay)
    assert done.returncode != 0
    assert sources[0].name in done.stderr


def test_no_password_is_committed() -> None:
    """Secrets come only from secretGenerators reading files deploy/.gitignore keeps out of the
    repository; no committed file holds a password-like value."""
    sources = [s for k in DEPLOY.rglob("kustomization.yaml") for s in secret_sources(k)]
    assert sources
    for source in sources:
        assert ignored(source.relative_to(DEPLOY).as_posix()), f"{source} would be committed"
    # A value after the name, the option or in a URL's userinfo; "$(VAR)" and "${VAR}" are not.
    literal = re.compile(
        r"REDIS_PASSWORD\s*[=:]\s*[\"']?(?!\$)[A-Za-z0-9+/_.~-]{8,}"
        r"|requirepass[\"']?\s+(?:-\s+)?[\"']?(?!\$)[A-Za-z0-9+/_.~-]{8,}"
        r"|redis://[^:/@\s]*:(?!\$)[^@\s]{8,}@"
    )
    for path in committed_files():
        text = path.read_text()
        assert not literal.search(text), f"{path}: a literal password"
        kustomize_tree = path.relative_to(DEPLOY).parts[0] in {"base", "overlays"}
        if kustomize_tree and path.suffix in {".yaml", ".yml"}:
            kinds = {doc.get("kind") for doc in yaml.safe_load_all(text) if isinstance(doc, dict)}
            assert "Secret" not in kinds, f"{path}: a Secret written out"


# ---------------------------------------------------------------------------------------------
# Isolation (docs/security.md): jails in worker pods, Redis reachable by Arena's pods only


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_workers_run_under_arenas_seccomp_profile_and_nothing_else_does(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    workers = {w["metadata"]["name"] for w in worker_deployments(objects)}
    for workload in workloads(objects):
        for container in containers(workload):
            profile = container["securityContext"].get("seccompProfile")
            if workload["metadata"]["name"] in workers:
                # The profile that lets the worker make bubblewrap jails (the runtime's default
                # refuses user namespaces): installed on nodes under this name (docs/deploy.md).
                assert profile == {
                    "type": "Localhost",
                    "localhostProfile": "arena/arena-worker.json",
                }, workload["metadata"]["name"]
            else:
                assert profile is None, workload["metadata"]["name"]  # the pod's RuntimeDefault


def test_the_committed_worker_seccomp_profile_is_the_one_arena_defines() -> None:
    from workers.sandbox.seccomp import JAIL_DENIED, WORKER_DENIED, worker_profile_json

    committed = (DEPLOY / "seccomp" / "arena-worker.json").read_text()
    assert committed == worker_profile_json()
    profile = json.loads(committed)
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    (denied,) = profile["syscalls"]
    assert set(denied["names"]) == set(WORKER_DENIED) and denied["action"] == "SCMP_ACT_ERRNO"
    # What a jail needs the worker to be allowed, the worker profile allows; the jail's own
    # filter then refuses it inside.
    needed_for_jails = {"unshare", "mount", "pivot_root", "umount2", "clone"}
    assert not needed_for_jails & set(WORKER_DENIED)
    assert needed_for_jails - {"clone"} <= set(JAIL_DENIED)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_only_arenas_own_pods_may_reach_redis(
    render: Callable[[str], list[Manifest]], name: str
) -> None:
    objects = render(name)
    policy = get(objects, "NetworkPolicy", "redis-from-arena-only")
    redis = get(objects, "StatefulSet", "redis")
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= redis_labels.items()
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]
    source, keda = rule["from"]
    assert set(source) == {"podSelector"}  # no namespaceSelector, no ipBlock: this namespace
    # KEDA's operator reads the queues' lengths from its own namespace, and nothing else there.
    assert keda == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "keda-operator"}},
    }
    (expression,) = source["podSelector"]["matchExpressions"]
    allowed = set(expression["values"])
    assert expression["key"] == "app.kubernetes.io/component" and expression["operator"] == "In"
    # Every pod that holds the Redis URL is allowed; no other pod of the deployment is.
    for workload in workloads(objects):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        holds_url = any("ARENA_REDIS_URL" in env(c) for c in containers(workload))
        selected = labels.get("app.kubernetes.io/component") in allowed
        assert selected == holds_url, workload["metadata"]["name"]
