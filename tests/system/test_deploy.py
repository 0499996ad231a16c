"""Past one GPU: the compose file with one appliance per GPU id, and the Kubernetes manifests, validated offline
against the Kubernetes schemas that kubernetes-validate bundles, and checked against what the appliance needs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MANIFESTS = sorted((ROOT / "k8s").glob("*.yaml"))


def manifests() -> dict[str, dict]:
    return {doc["kind"]: doc for path in MANIFESTS for doc in yaml.safe_load_all(path.read_text())}


def offline(command: list[str]) -> list[str]:
    """Without a network namespace's interfaces where we may make one (root): proves nothing is fetched."""
    if os.getuid() == 0 and shutil.which("unshare"):
        return ["unshare", "--net", *command]
    return command


def test_gpus_compose_file_matches_the_compose_specification():
    result = subprocess.run(
        [
            str(BIN / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(ROOT / "docker-compose.gpus.yml"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gpus_compose_runs_one_appliance_per_gpu_id():
    services = yaml.safe_load((ROOT / "docker-compose.gpus.yml").read_text())["services"]
    services.pop("postgres")
    ports = set()
    for name, service in services.items():
        gpu = re.fullmatch(r"hymt-gpu(\d+)", name).group(1)
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["device_ids"] == [gpu] and "count" not in device
        assert service["profiles"] == [f"gpu{gpu}"]
        (port,) = service["ports"]
        assert port.endswith(":80")
        ports.add(port.split(":")[0])
        assert service["healthcheck"]["test"] == ["CMD", "hymt-probe"]
    assert len(ports) == len(services) == 8


def test_gpus_compose_appliances_share_one_postgres():
    compose = yaml.safe_load((ROOT / "docker-compose.gpus.yml").read_text())
    services = compose["services"]
    database = services.pop("postgres")
    assert "profiles" not in database  # up with whichever GPUs are picked
    assert database["environment"]["POSTGRES_USER"] == "hymt" and database["environment"]["POSTGRES_DB"] == "hymt"
    assert database["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    (volume,) = database["volumes"]
    assert volume.split(":")[0] in compose["volumes"] and volume.endswith(":/var/lib/postgresql/data")
    password = database["environment"]["POSTGRES_PASSWORD"]
    for name, service in services.items():
        url = service["environment"]["HYMT_DATABASE_URL"]
        assert url == f"postgresql://hymt:{password}@postgres:5432/hymt", name
        assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}
        # No volume of its own for jobs: they are the database's, so any appliance answers any of them.
        assert not any(v.endswith(":/data") for v in service["volumes"]), name


def test_kubernetes_manifests_validate_offline():
    result = subprocess.run(
        offline([str(BIN / "kubernetes-validate"), "--strict", *map(str, MANIFESTS)]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" passed for resource ") == 5, result.stdout


def test_the_validator_rejects_a_wrong_manifest(tmp_path):
    broken = tmp_path / "deployment.yaml"
    broken.write_text((ROOT / "k8s/deployment.yaml").read_text().replace("startupProbe:", "startProbe:"))
    result = subprocess.run(
        offline([str(BIN / "kubernetes-validate"), "--strict", str(broken)]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0 and "startProbe" in result.stdout + result.stderr


def test_kubernetes_manifests_fit_the_appliance():
    docs = manifests()
    assert set(docs) == {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "Secret"}
    pod = docs["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    env = {e["name"]: e.get("value") for e in container["env"]}
    port = int(env["HYMT_PORT"])
    assert container["ports"][0]["containerPort"] == port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    # Start-up may take as long as the image's own HEALTHCHECK start period (15 minutes: loading and compiling).
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 900
    stop_wait = int(env["HYMT_STOP_WAIT_S"])
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["spec"]["terminationGracePeriodSeconds"] > stop_wait + pre_stop
    labels = pod["metadata"]["labels"]
    assert docs["Service"]["spec"]["selector"] == labels
    assert docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"] == labels
    hpa = docs["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"]["name"] == docs["Deployment"]["metadata"]["name"]
    # Every replica reads the shared database's URL from the Secret; the Service needs no session affinity then.
    (database,) = [e for e in container["env"] if e["name"] == "HYMT_DATABASE_URL"]
    secret = docs["Secret"]
    assert database["valueFrom"]["secretKeyRef"] == {"name": secret["metadata"]["name"], "key": "url"}
    assert secret["stringData"]["url"].startswith("postgresql://")
    assert "sessionAffinity" not in docs["Service"]["spec"]
    metric = hpa["metrics"][0]["pods"]["metric"]["name"]
    assert f'"{metric}"' in (ROOT / "app/hymt/api/metrics.py").read_text()
