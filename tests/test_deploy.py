"""The files to deploy, checked as far as this machine can without Docker or a cluster
(tests/deploy_support.py): the Dockerfile's instructions, every container command of
deploy/compose.yaml and deploy/k8s parsed by its program's own parser with every reference
found, the secrets deploy/make_secrets.py writes read as the agents read them once the
image's entrypoint copied them, and the commands of docs/deploy.md pointing at these files.
Each check is also shown failing on a file broken on purpose."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from a2a_handoff.auth import parse_keys
from a2a_handoff.secrets import SecretError, check_private
from a2a_handoff.trust.keys import KeyFile, own_identity
from orchestrator.reach import parse_keys as parse_origin_keys
from tests import deploy_support as d
from tests.support import ROOT

MADE = {
    *(f"{agent}.keys.json" for agent in ("triage", "billing", "human")),
    *(f"{agent}.key" for agent in ("triage", "billing", "human")),
    "api-keys",
    "gateway.keys",
    "gateway.clients",
    "pgpass",
    "postgres-password",
    "operator.key",
    "client.key",
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The secrets, made by the command docs/deploy.md gives (into a directory of its own)."""
    (command,) = [c for c in d.shell_commands() if "deploy/make_secrets.py" in " ".join(c)]
    assert command[:2] == [".venv/bin/python", "deploy/make_secrets.py"]
    directory = tmp_path_factory.mktemp("deploy") / "secrets"
    done = subprocess.run(
        [sys.executable, *command[1:], str(directory)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return directory


def k8s_secrets() -> dict[str, set[str]]:
    return d.created_secrets(d.shell_commands())


# -- the Dockerfile --------------------------------------------------------------------------


def test_the_image_is_slim_python_run_by_a_user_of_its_own_and_checked_on_livez() -> None:
    steps = d.dockerfile()
    stages = [i for i, (keyword, _) in enumerate(steps) if keyword == "FROM"]
    assert all(steps[i][1].split()[0] == "python:3.11-slim" for i in stages)
    final = steps[stages[-1] :]
    users = [args for keyword, args in final if keyword == "USER"]
    assert users, "the final stage names a USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    (healthcheck,) = [args for keyword, args in final if keyword == "HEALTHCHECK"]
    assert "CMD " in healthcheck
    probe = d.exec_form(healthcheck.split("CMD ", 1)[1])
    assert probe[:2] == ["python", "-c"]
    assert "http://127.0.0.1:8000/livez" in probe[2]  # urllib: slim images have no curl
    assert ("EXPOSE", "8000") in final
    compile(probe[2], "HEALTHCHECK", "exec")


def test_the_image_installs_the_package_with_the_store_extras_from_its_own_tree() -> None:
    steps = d.dockerfile()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    installs = [args for keyword, args in steps if keyword == "RUN" and "pip " in args]
    assert any("pip wheel" in args and '".[postgres,redis]"' in args for args in installs)
    assert any("--no-index" in a and "a2a-handoff[postgres,redis]" in a for a in installs)
    assert {"postgres", "redis"} <= set(extras)
    for keyword, args in steps:
        if keyword != "COPY" or "--from=" in args:
            continue
        words = [w for w in args.split() if not w.startswith("--")]
        for source in words[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the tree"
            assert d.dockerignore_admits(source.rstrip("/")), f"COPY {source}: .dockerignore'd"


def test_no_secret_is_baked_into_the_image() -> None:
    for keyword, args in d.dockerfile():
        if keyword in ("ENV", "ARG"):
            assert not any(w in args.upper() for w in ("KEY", "SECRET", "PASSWORD", "TOKEN"))
    for path in ("deploy/secrets/api-keys", "deploy/secrets", "data/billing.db", ".venv"):
        assert not d.dockerignore_admits(path), f"{path} would be in the build context"
    assert d.dockerignore_admits("a2a_handoff/agent.py")
    assert "/deploy/secrets/" in (ROOT / ".gitignore").read_text().split()


def test_the_images_entrypoint_and_default_command() -> None:
    steps = d.dockerfile()
    (entrypoint,) = [args for keyword, args in steps if keyword == "ENTRYPOINT"]
    assert d.exec_form(entrypoint) == ["a2a-entrypoint"]
    assert any(
        keyword == "COPY" and "deploy/entrypoint.sh /usr/local/bin/a2a-entrypoint" in args
        for keyword, args in steps
    )
    (cmd,) = [args for keyword, args in steps if keyword == "CMD"]
    container = d.Container("CMD", d.exec_form(cmd), dirs={"/var/lib/a2a"})
    problems, checked = d.check_command(container, {"127.0.0.1": 8000})  # -p 8000:8000
    assert problems == [], problems
    assert checked is not None
    assert checked.program == "servers triage"
    assert checked.port == 8000


# -- the secrets and the entrypoint ----------------------------------------------------------


def test_the_secrets_are_the_ones_the_files_mount_and_agree(made: Path) -> None:
    assert {p.name for p in made.iterdir()} == MADE
    assert made.stat().st_mode & 0o777 == 0o700
    for name in ("operator.key", "client.key"):  # used on the host: private there too
        assert (made / name).stat().st_mode & 0o777 == 0o600
    keys = parse_keys((made / "api-keys").read_text())
    assert set(keys) == {"triage", "billing", "human", "gateway", "operator"}
    for agent in ("triage", "billing", "human"):
        own_identity((made / f"{agent}.keys.json").read_text(), agent)
        assert (made / f"{agent}.key").read_text().strip() == keys[agent]
    assert (made / "operator.key").read_text().strip() == keys["operator"]
    origins = parse_origin_keys((made / "gateway.keys").read_text(), "gateway.keys")
    assert origins == {f"http://{a}:8000": keys["gateway"] for a in ("triage", "billing", "human")}
    clients = parse_keys((made / "gateway.clients").read_text())
    assert list(clients.values()) == [(made / "client.key").read_text().strip()]
    host, port, db, user, password = (made / "pgpass").read_text().strip().split(":")
    assert (host, port, db, user) == ("*", "*", "*", "a2a")
    assert (made / "postgres-password").read_text().strip() == password
    again = subprocess.run(
        [sys.executable, "deploy/make_secrets.py", str(made)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode != 0, "a second run would change every identity"
    assert "holds files already" in again.stderr


def test_the_entrypoint_gives_the_agent_private_copies_it_accepts(
    made: Path, tmp_path: Path
) -> None:
    mounted = made / "api-keys"
    with pytest.raises(SecretError, match="readable by other users"):
        check_private(mounted, "--auth-keys")  # as mounted: refused, hence the copy
    copies = tmp_path / "a2a"
    check = (
        "import sys; from pathlib import Path;"
        " from a2a_handoff.secrets import check_private;"
        " from a2a_handoff.trust.keys import KeyFile;"
        " [check_private(p, p.name) for p in Path(sys.argv[1]).iterdir()];"
        " print(KeyFile(Path(sys.argv[1]) / 'billing.keys.json').read() is not None)"
    )
    done = subprocess.run(
        ["sh", str(ROOT / "deploy" / "entrypoint.sh"), sys.executable, "-c", check, str(copies)],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "A2A_SECRETS_FROM": str(made),
            "A2A_SECRETS_TO": str(copies),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr  # the command ran, exec'd, with every copy
    assert done.stdout.strip() == "True"
    assert {p.name for p in copies.iterdir()} == MADE
    for path in copies.iterdir():
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.read_text() == (made / path.name).read_text()
    assert KeyFile(copies / "billing.keys.json").read() is not None


# -- compose ---------------------------------------------------------------------------------


def test_compose_runs_postgresql_and_the_agents_the_issue_names() -> None:
    compose = d.load_compose()
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert "POSTGRES_PASSWORD_FILE" in services["postgres"]["environment"]
    assert services["billing"]["deploy"]["replicas"] == 2
    programs = {
        name: container.argv[2:4] for name, container in d.compose_containers(compose).items()
    }
    for agent in ("triage", "billing", "human"):
        assert programs[agent] == ["servers", agent]
    assert programs["gateway"] == ["orchestrator", "serve"]


def test_compose_references_all_hold() -> None:
    problems = d.compose_problems(d.load_compose(), MADE)
    assert problems == [], "\n".join(problems)


def _broken_compose(change: str) -> dict[str, Any]:
    compose = copy.deepcopy(d.load_compose())
    services = compose["services"]
    billing = services["billing"]
    if change == "unknown flag":
        billing["command"] = [*billing["command"], "--no-such-flag=1"]
    elif change == "secret not mounted":
        billing["secrets"] = [s for s in billing["secrets"] if s != "billing.key"]
    elif change == "secret not defined":
        del compose["secrets"]["pgpass"]
    elif change == "route to nowhere":
        billing["command"] = [
            "--route=human=http://humans:8000/" if a.startswith("--route=human") else a
            for a in billing["command"]
        ]
    elif change == "grace below the drain":
        billing["stop_grace_period"] = "15s"
    elif change == "healthcheck elsewhere":
        billing["healthcheck"] = {"test": ["CMD", "true"]}
    elif change == "started before its migration":
        billing["depends_on"]["migrate-billing"]["condition"] = "service_started"
    elif change == "unmigrated store":
        services["migrate-billing"]["command"][-1] += "x"
    elif change == "not an agent":
        billing["command"][3] = "billings"
    return compose


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("unknown flag", "unrecognized arguments: --no-such-flag=1"),
        ("secret not mounted", "--credential human /run/a2a/billing.key: no such secret"),
        ("secret not defined", "secret pgpass is not defined"),
        ("route to nowhere", "no service 'humans'"),
        ("grace below the drain", "stop_grace_period 15.0 s <= its stop's bound 35.0 s"),
        ("healthcheck elsewhere", "no healthcheck on /livez"),
        ("started before its migration", "migrate-billing: service_started"),
        ("unmigrated store", "billing: no db upgrade of its store"),
        ("not an agent", "invalid choice: 'billings'"),
    ],
)
def test_a_broken_compose_reference_is_found(change: str, said: str) -> None:
    problems = d.compose_problems(_broken_compose(change), MADE)
    assert any(said in p for p in problems), problems


# -- Kubernetes ------------------------------------------------------------------------------


def test_the_manifests_hold_what_the_issue_asks() -> None:
    docs = d.load_manifests()
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    for agent in ("triage", "billing", "human"):
        assert {("Deployment", agent), ("Service", agent), ("PodDisruptionBudget", agent)} <= kinds
    assert {("Deployment", "gateway"), ("Service", "gateway"), ("Job", "a2a-migrate")} <= kinds
    for doc in docs:
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] != "gateway":
            assert doc["spec"]["replicas"] >= 2  # replicas sharing PostgreSQL
            assert doc["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_manifest_references_all_hold() -> None:
    secrets = k8s_secrets()
    assert set(secrets) == {"a2a-postgres", "a2a-triage", "a2a-billing", "a2a-human", "a2a-gateway"}
    for keys in secrets.values():
        assert keys <= MADE
    problems = d.manifest_problems(d.load_manifests(), secrets)
    assert problems == [], "\n".join(problems)


def _deployment(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [x for x in docs if x["kind"] == "Deployment" and x["metadata"]["name"] == name]
    return found


def _broken_manifests(change: str) -> list[dict[str, Any]]:
    docs = copy.deepcopy(d.load_manifests())
    billing = _deployment(docs, "billing")
    pod = billing["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if change == "liveness elsewhere":
        container["livenessProbe"]["httpGet"]["path"] = "/health"
    elif change == "readiness on another port":
        container["readinessProbe"]["httpGet"]["port"] = 9000
    elif change == "grace below the drain":
        pod["terminationGracePeriodSeconds"] = 20
    elif change == "secret readable by others":
        pod["volumes"][0]["projected"]["defaultMode"] = 0o644
    elif change == "secret nobody creates":
        pod["volumes"][0]["projected"]["sources"][0]["secret"]["name"] = "a2a-billings"
    elif change == "budget selects nothing":
        (pdb,) = [x for x in docs if x["kind"] == "PodDisruptionBudget" and "billing" in str(x)]
        pdb["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "biling"}
    elif change == "service selects nothing":
        (service,) = [
            x for x in docs if x["kind"] == "Service" and x["metadata"]["name"] == "billing"
        ]
        service["spec"]["selector"] = {"app.kubernetes.io/name": "biling"}
    elif change == "run as root":
        pod["securityContext"]["runAsNonRoot"] = False
    elif change == "unknown flag":
        container["args"] = [*container["args"], "--no-such-flag=20"]
    elif change == "volume not declared":
        container["volumeMounts"][0]["name"] = "secret"
    return docs


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("liveness elsewhere", "livenessProbe is not GET /livez on port 8000"),
        ("readiness on another port", "readinessProbe is not GET /readyz on port 8000"),
        ("grace below the drain", "terminationGracePeriodSeconds 20 <= its stop's bound"),
        ("secret readable by others", "defaultMode 644"),
        ("secret nobody creates", "no Secret a2a-billings is created"),
        ("budget selects nothing", "selects no pods"),
        ("service selects nothing", "Service billing: selects no pods"),
        ("run as root", "not run as a user of its own"),
        ("unknown flag", "unrecognized arguments: --no-such-flag=20"),
        ("volume not declared", "mounts no volume secret"),
    ],
)
def test_a_broken_manifest_reference_is_found(change: str, said: str) -> None:
    problems = d.manifest_problems(_broken_manifests(change), k8s_secrets())
    assert any(said in p for p in problems), problems


# -- the docs page ---------------------------------------------------------------------------


def test_the_docs_commands_name_these_files_and_this_image() -> None:
    compose = d.load_compose()
    images = {s["image"] for s in compose["services"].values() if "a2a-handoff" in s["image"]}
    for argv in d.shell_commands():
        if argv[:2] == ["docker", "build"]:
            tag = argv[argv.index("-t") + 1]
            assert tag.split(":")[0] == "a2a-handoff"
        for flag in ("-f", "--from-file"):
            for i, word in enumerate(argv):
                path = argv[i + 1] if word == flag else word.removeprefix(flag + "=")
                if word == flag or (word.startswith(flag + "=") and flag != "-f"):
                    if path.startswith("deploy/secrets/"):
                        assert Path(path).name in MADE, path
                    else:
                        assert (ROOT / path).exists(), f"{' '.join(argv)}: no {path}"
    assert images == {"a2a-handoff:latest"}
    applied = {
        argv[i + 1]
        for argv in d.shell_commands()
        if argv[:2] == ["kubectl", "apply"]
        for i, word in enumerate(argv)
        if word == "-f"
    }
    assert applied == {f"deploy/k8s/{p.name}" for p in (ROOT / "deploy" / "k8s").glob("*.yaml")}
