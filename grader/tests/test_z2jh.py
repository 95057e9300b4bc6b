"""hub/z2jh/: the course's Zero to JupyterHub values and its grading cluster, loaded into the real traitlets of
KubeSpawner and JupyterHub and the Kubernetes API's models, so that a wrong key or a wrong type fails here.  No
Kubernetes runs: what this cannot check (a deployment) is listed in grader/docs/cluster.md."""
from __future__ import annotations

import inspect
import json
import re

import pytest
import yaml
from traitlets.config import Config

from translab.paths import REPO_ROOT

kubespawner = pytest.importorskip("kubespawner", reason="pip install '.[hub-kubernetes]' (make setup installs it)")
from kubernetes import client as k8s  # noqa: E402 - after the skip: dask-kubernetes brings it

Z2JH = REPO_ROOT / "hub" / "z2jh"
VALUES = yaml.safe_load((Z2JH / "config.yaml").read_text(encoding="utf-8"))


def spawner_config(values: dict) -> Config:
    """What the chart's jupyterhub_config.py makes of the values we use (singleuser.* -> KubeSpawner traits,
    hub.config -> as it is), then hub.extraConfig run on it, as the chart runs it last."""
    config = Config(values["hub"].get("config", {}))
    single = values["singleuser"]
    spawner = config.KubeSpawner
    spawner.image = f"{single['image']['name']}:{single['image']['tag']}"
    for key, trait in (("guarantee", "mem_guarantee"), ("limit", "mem_limit")):
        spawner[trait] = single["memory"][key]
    for key, trait in (("guarantee", "cpu_guarantee"), ("limit", "cpu_limit")):
        spawner[trait] = float(single["cpu"][key])
    storage = single["storage"]
    spawner.storage_capacity = storage["capacity"]
    spawner.volumes = storage["extraVolumes"]
    spawner.volume_mounts = storage["extraVolumeMounts"]
    spawner.environment = single["extraEnv"]
    spawner.profile_list = single["profileList"]
    for source in values["hub"].get("extraConfig", {}).values():
        exec(source, {"c": config})
    return config


def _k8s_keys(model, given: dict, where: str) -> None:
    """``given``'s keys are fields of the Kubernetes model (its JSON names), recursively where we know the type."""
    known = set(model.attribute_map.values())
    unknown = set(given) - known
    assert not unknown, f"{where}: {sorted(unknown)} are not fields of {model.__name__}"
    by_json = {json_name: model.openapi_types[name] for name, json_name in model.attribute_map.items()}
    for key, value in given.items():
        kind = by_json[key]
        inner = re.fullmatch(r"list\[(V1\w+)\]", kind) or re.fullmatch(r"(V1\w+)", kind)
        if inner and isinstance(value, (dict, list)):
            for item in value if isinstance(value, list) else [value]:
                _k8s_keys(getattr(k8s, inner.group(1)), item, f"{where}.{key}")


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


@pytest.fixture(autouse=True)
def no_cluster(tmp_path, monkeypatch):
    """KubeSpawner reads a kube-config when it is made (it talks to nothing until it starts a server)."""
    from kubernetes_asyncio.config import kube_config
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(tmp_path / "kubeconfig"))


def _in_a_loop(function):
    """KubeSpawner makes its API client on the running event loop, as inside the hub."""
    import asyncio

    async def run():
        return function()
    return asyncio.run(run())


def _spawner(config: Config, groups: tuple[str, ...] = ()):
    from jupyterhub import orm
    from jupyterhub.user import User
    session = orm.new_session_factory("sqlite://")()
    user = orm.User(name="ann")
    session.add(user)
    for name in groups:
        session.add(orm.Group(name=name, users=[user]))
    session.commit()
    return kubespawner.KubeSpawner(_mock=True, config=config, user=User(user, {}))


def test_every_spawner_setting_is_a_kubespawner_trait_of_the_right_type():
    config = spawner_config(VALUES)
    traits = set(kubespawner.KubeSpawner.class_trait_names(config=True))
    assert set(config.KubeSpawner) <= traits, set(config.KubeSpawner) - traits
    def check():
        spawner = _spawner(config)  # traitlets validates every configured value here (TraitError otherwise)
        assert spawner.mem_limit > spawner.mem_guarantee > 0 and spawner.cpu_limit >= 1
        assert spawner.environment["TRANSLAB_HOME"] == "/srv/translab" and spawner.allow_privilege_escalation is False
        for profile in VALUES["singleuser"]["profileList"]:
            override = profile.get("kubespawner_override", {})
            assert set(override) <= traits, f"{profile['slug']}: {set(override) - traits}"
            for trait, value in override.items():
                setattr(spawner, trait, value)  # validated as the spawner would at start
    _in_a_loop(check)


def test_the_hubs_own_settings_are_jupyterhub_traits():
    from jupyterhub.app import JupyterHub
    from jupyterhub.auth import Authenticator
    hub = VALUES["hub"]["config"]
    assert set(hub["JupyterHub"]) <= set(JupyterHub.class_trait_names(config=True))
    assert set(hub["Authenticator"]) <= set(Authenticator.class_trait_names(config=True))
    Authenticator(config=Config({"Authenticator": hub["Authenticator"]}))


def test_volumes_mounts_and_the_grading_cluster_are_valid_kubernetes_objects():
    single = VALUES["singleuser"]
    for volume in single["storage"]["extraVolumes"]:
        _k8s_keys(k8s.V1Volume, volume, "singleuser.storage.extraVolumes")
    for mount in single["storage"]["extraVolumeMounts"]:
        _k8s_keys(k8s.V1VolumeMount, mount, "singleuser.storage.extraVolumeMounts")
    instructor = next(p for p in single["profileList"] if p["slug"] == "instructor")["kubespawner_override"]
    for volume in instructor["volumes"]:
        _k8s_keys(k8s.V1Volume, volume, "instructor.volumes")
    cluster = yaml.safe_load((Z2JH / "dask-cluster.yaml").read_text(encoding="utf-8"))
    from dask_kubernetes.operator import make_cluster_spec
    generated = make_cluster_spec(name="translab-grading")
    assert (cluster["apiVersion"], cluster["kind"]) == (generated["apiVersion"], generated["kind"])
    assert set(cluster["spec"]) <= set(generated["spec"]) and set(cluster["spec"]["worker"]) <= set(generated["spec"]["worker"])
    for role in ("worker", "scheduler"):
        _k8s_keys(k8s.V1PodSpec, cluster["spec"][role]["spec"], f"dask-cluster.yaml {role}")
    _k8s_keys(k8s.V1ServiceSpec, cluster["spec"]["scheduler"]["service"], "dask-cluster.yaml service")
    worker = cluster["spec"]["worker"]["spec"]["containers"][0]
    # a student at a time per CPU, all in the pod's one grading process (grader.grading.cluster.GradingServer)
    assert worker["args"][worker["args"].index("--nthreads") + 1] == worker["resources"]["limits"]["cpu"]
    from grader.grading.cluster import dask_environment
    for role in ("worker", "scheduler"):
        env = {pair["name"]: pair["value"] for pair in cluster["spec"][role]["spec"]["containers"][0]["env"]}
        assert dask_environment().items() <= env.items(), f"dask-cluster.yaml {role}: grader.grading.cluster.DASK_SETTINGS"
    spec = json.loads((Z2JH / "grading-cluster.json").read_text(encoding="utf-8"))["kubernetes"]
    from dask_kubernetes.operator import KubeCluster
    accepted = set(inspect.signature(KubeCluster.__init__).parameters) | {"workers"}
    assert set(spec) <= accepted, set(spec) - accepted
    assert spec["custom_cluster_spec"].endswith("hub/z2jh/dask-cluster.yaml")


def test_students_never_see_the_instructors_profile():
    config = spawner_config(VALUES)
    listed = config.KubeSpawner.profile_list
    assert callable(listed)
    assert _in_a_loop(lambda: [p["slug"] for p in listed(_spawner(config))]) == ["student"]
    assert _in_a_loop(lambda: [p["slug"] for p in listed(_spawner(config, ("instructors",)))]) == ["student", "instructor"]


def _bytes(size: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)([KMG]?)", size).groups()
    return float(number) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[unit]


def test_each_student_is_guaranteed_the_memory_of_the_largest_notebook_measured():
    bench = json.loads((REPO_ROOT / "results" / "bench.json").read_text(encoding="utf-8"))
    peaks = [row.get("student_peak_mb") for row in bench.get("notebooks", {}).values()]
    if not peaks or None in peaks:
        pytest.fail("results/bench.json has no kernel peaks: python -m experiments.bench --only-notebooks")
    memory = VALUES["singleuser"]["memory"]
    assert _bytes(memory["guarantee"]) >= max(peaks) * 1e6 * 1.1, (memory, max(peaks))
    assert _bytes(memory["limit"]) >= _bytes(memory["guarantee"]) + 0.5e9
