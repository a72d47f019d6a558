"""Checks of the files to deploy (Dockerfile, deploy/compose.yaml, deploy/k8s) that need no
Docker daemon and no cluster: every container's command parsed by the parser of the program
it runs, and every name one file gives another — a secret, a volume, a service, a probe's
port, a label — found where it points. Each check returns its problems as lines (empty: none),
so a test can also break a file on purpose and see the check say so."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from servers.__main__ import EXAMPLES
from servers._flags import agent_options
from tests.support import ROOT

DEPLOY = ROOT / "deploy"
IMAGE = "a2a-handoff"
SECRETS_IN = "/run/secrets"  # where secrets are mounted
SECRETS = "/run/a2a"  # where the image's entrypoint copies them, the agent's own
DRAIN_DEFAULT = 10.0
CLOSE_DEFAULT = 10.0
STREAMS_GRACE = 5.0  # servers/_run.py's: the open connections' grace before the close


class _Refused(Exception):
    """A command line the parser refused."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise _Refused(message)


def agent_parser() -> argparse.ArgumentParser:
    """`python -m servers NAME`'s parser (servers.__main__), refusing instead of exiting."""
    parser = _Parser(prog="python -m servers", add_help=False)
    parser.add_argument("agent", choices=sorted(EXAMPLES))
    agent_options(parser)
    return parser


def orchestrator_args(argv: list[str]) -> argparse.Namespace:
    """`python -m orchestrator ARGV` parsed by its own parser; _Refused with its message."""
    from orchestrator.__main__ import _parser

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return _parser().parse_args(argv)
        except SystemExit:
            raise _Refused(err.getvalue().strip().splitlines()[-1]) from None


@dataclass
class Container:
    """One process of the image as a file runs it: its command, the secrets it finds in
    /run/a2a (copied from what is mounted at /run/secrets) and the directories mounted."""

    where: str
    argv: list[str]
    secrets: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)


@dataclass
class Checked:
    """What a container's command says, once parsed."""

    program: str  # "servers NAME", "orchestrator serve", "db upgrade"
    args: argparse.Namespace | None = None
    store: str | None = None
    port: int | None = None
    drain: float | None = None  # the longest a stop takes: drain, streams' grace, close


def _readable(container: Container, path: str | Path | None, what: str) -> list[str]:
    if path is None:
        return []
    text = str(path)
    if text.startswith(SECRETS + "/"):
        if text.removeprefix(SECRETS + "/") in container.secrets:
            return []
        return [f"{container.where}: {what} {text}: no such secret is mounted"]
    if any(text.startswith(d.rstrip("/") + "/") for d in container.dirs):
        return []
    return [f"{container.where}: {what} {text}: neither a secret nor on a mounted volume"]


def _store_problems(container: Container, store: str, what: str) -> list[str]:
    parts = urlsplit(store)
    if parts.scheme.startswith("postgres"):
        passfile = parse_qs(parts.query).get("passfile", [None])[0]
        if passfile is None:
            return [f"{container.where}: {what} {store}: no passfile (a password from a file)"]
        return _readable(container, passfile, f"{what}'s passfile")
    if parts.scheme == "sqlite":
        return _readable(container, parts.path.removeprefix("/"), what)
    return [f"{container.where}: {what} {store}: neither PostgreSQL nor SQLite"]


def _peer_problems(
    container: Container, option: str, url: str, services: Mapping[str, int]
) -> list[str]:
    """A URL another container is reached at: a service of these files, on its port."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in services:
        return [f"{container.where}: {option} {url}: no service {host!r}"]
    if parts.port != services[host]:
        return [f"{container.where}: {option} {url}: {host} listens on {services[host]}"]
    return []


def check_command(
    container: Container, services: Mapping[str, int]
) -> tuple[list[str], Checked | None]:
    """The container's command parsed and its references checked; `services`: the name →
    port of every service the files define (what a URL may point at)."""
    argv = container.argv
    where = container.where
    if argv[:2] != ["python", "-m"] or len(argv) < 4:
        return [f"{where}: runs {argv[:4]}, not python -m MODULE COMMAND"], None
    module = argv[2]
    try:
        if module == "servers":
            return _agent(container, services)
        if module == "orchestrator":
            return _gateway(container, services)
        if module == "a2a_handoff":
            return _migration(container)
    except _Refused as exc:
        return [f"{where}: {shlex.join(argv)}: refused: {exc}"], None
    return [f"{where}: no module {module} in the package"], None


def _agent(container: Container, services: Mapping[str, int]) -> tuple[list[str], Checked]:
    args = agent_parser().parse_args(container.argv[3:])
    where = container.where
    problems: list[str] = []
    if args.host != "0.0.0.0":
        problems.append(f"{where}: --host {args.host}: not reachable from outside the container")
    if args.url is not None:
        problems += _peer_problems(container, "--url", args.url, services)
    routes = _pairs(args.route)
    trusts = _pairs(args.trust)
    for option, named in (("--route", routes), ("--trust", trusts)):
        for name, url in named.items():
            if name not in EXAMPLES:
                problems.append(f"{where}: {option} {name}: no such agent")
            problems += _peer_problems(container, f"{option} {name}", url, services)
            if urlsplit(url).hostname != name:
                problems.append(f"{where}: {option} {name}={url}: the URL is another agent's")
    for name, source in _pairs(args.credential).items():
        if name not in routes and name not in trusts:
            problems.append(f"{where}: --credential {name}: names no route or trusted agent")
        if not source.startswith("@"):
            problems.append(f"{where}: --credential {name}: not read from a file")
        problems += _readable(container, source.removeprefix("@"), f"--credential {name}")
    problems += _readable(container, args.key_file, "--key-file")
    problems += _readable(container, args.auth_keys, "--auth-keys")
    if args.store is None:
        problems.append(f"{where}: no --store (the default is a file in the image)")
    else:
        problems += _store_problems(container, args.store, "--store")
    drain = getattr(args, "drain_seconds", None)
    close = getattr(args, "close_seconds", None)
    stop = (DRAIN_DEFAULT if drain is None else drain) + STREAMS_GRACE
    stop += CLOSE_DEFAULT if close is None else close
    checked = Checked(f"servers {args.agent}", args, args.store, args.port, stop)
    return problems, checked


def _gateway(container: Container, services: Mapping[str, int]) -> tuple[list[str], Checked]:
    args = orchestrator_args(container.argv[3:])
    where = container.where
    if args.command != "serve":
        return [f"{where}: orchestrator {args.command}: not the gateway (serve)"], Checked("")
    problems: list[str] = []
    if args.host != "0.0.0.0":
        problems.append(f"{where}: --host {args.host}: not reachable from outside the container")
    problems += _peer_problems(container, "--entry", args.entry, services)
    problems += _readable(container, args.auth_keys, "--auth-keys")
    problems += _readable(container, args.keys_file, "--keys-file")
    if args.api_key is not None:
        problems += _readable(container, args.api_key.removeprefix("@"), "--api-key")
    problems += _store_problems(container, args.store, "--store")
    return problems, Checked("orchestrator serve", args, args.store, args.port)


def _migration(container: Container) -> tuple[list[str], Checked | None]:
    """`python -m a2a_handoff db upgrade --store URL`, as the issue names it."""
    rest = container.argv[3:]
    if len(rest) != 4 or rest[:3] != ["db", "upgrade", "--store"]:
        return [f"{container.where}: {rest}: not db upgrade --store URL"], None
    problems = _store_problems(container, rest[3], "db upgrade --store")
    return problems, Checked("db upgrade", store=rest[3])


def _pairs(values: Iterable[str]) -> dict[str, str]:
    return dict(value.split("=", 1) for value in values)


# -- the Dockerfile ------------------------------------------------------------------------


def dockerfile(path: Path = ROOT / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: continuations joined, comments left out."""
    joined: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            joined.append(pending)
            pending = ""
    out = []
    for text in joined:
        keyword, _, rest = text.strip().partition(" ")
        out.append((keyword.upper(), re.sub(r"\s+", " ", rest).strip()))
    return out


def exec_form(arguments: str) -> list[str]:
    """A JSON array (exec form) as its list; a shell form as the words of one `sh -c`."""
    if arguments.startswith("["):
        return [str(word) for word in json.loads(arguments)]
    return ["sh", "-c", arguments]


def dockerignore_admits(path: str, ignore: Path = ROOT / ".dockerignore") -> bool:
    """Whether the build context holds `path` under .dockerignore (its last matching rule
    wins; a rule matches the path or a directory above it)."""
    admitted = True
    for raw in ignore.read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negated = rule.startswith("!")
        pattern = rule.removeprefix("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*")
        if re.fullmatch(f"{regex}(/.*)?", path):
            admitted = negated
    return admitted


# -- compose -------------------------------------------------------------------------------


def load_compose(path: Path = DEPLOY / "compose.yaml") -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def compose_containers(compose: Mapping[str, Any]) -> dict[str, Container]:
    """Every service that runs the image, as a Container."""
    out = {}
    for name, service in compose["services"].items():
        if not str(service.get("image", "")).startswith(IMAGE + ":"):
            continue
        secrets = set()
        for secret in service.get("secrets", []):
            target = secret if isinstance(secret, str) else secret.get("target", secret["source"])
            secrets.add(target)
        dirs = {volume.split(":")[1] for volume in service.get("volumes", [])}
        out[name] = Container(f"compose service {name}", list(service["command"]), secrets, dirs)
    return out


def seconds(duration: str | int | float) -> float:
    """A compose duration (`30s`, `1m30s`) in seconds."""
    if isinstance(duration, int | float):
        return float(duration)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    found = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert "".join(n + u for n, u in found) == duration, f"not a duration: {duration!r}"
    return sum(float(n) * units[u] for n, u in found)


def compose_problems(compose: Mapping[str, Any], made: set[str]) -> list[str]:
    """Every reference of deploy/compose.yaml checked; `made`: the files make_secrets.py
    writes (what a secret's file may be)."""
    services = compose["services"]
    containers = compose_containers(compose)
    problems: list[str] = []
    ports: dict[str, int] = {}
    checked: dict[str, Checked] = {}
    for name, container in containers.items():
        found, one = check_command(container, {})  # ports first: URLs checked below
        if one is not None and one.port is not None:
            ports[name] = one.port
    for name, container in containers.items():
        found, one = check_command(container, ports)
        problems += found
        if one is not None:
            checked[name] = one
    defined = compose.get("secrets", {})
    for name, secret in defined.items():
        file = Path(secret["file"])
        if file.parent != Path("secrets") or file.name not in made:
            problems.append(f"compose secret {name}: {file} is not a file make_secrets.py writes")
    volumes = compose.get("volumes", {})
    for name, service in services.items():
        for secret in service.get("secrets", []):
            source = secret if isinstance(secret, str) else secret["source"]
            if source not in defined:
                problems.append(f"compose service {name}: secret {source} is not defined")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if not source.startswith((".", "/")) and source not in volumes:
                problems.append(f"compose service {name}: volume {source} is not defined")
        for needed, condition in _depends(service).items():
            if needed not in services:
                problems.append(f"compose service {name}: depends on no service {needed}")
                continue
            wanted = (
                "service_completed_successfully"
                if name in checked and needed in checked and checked[needed].program == "db upgrade"
                else "service_healthy"
            )
            if condition != wanted:
                problems.append(f"compose service {name}: {needed}: {condition}, not {wanted}")
            if wanted == "service_healthy" and "healthcheck" not in services[needed]:
                problems.append(f"compose service {name}: {needed} has no healthcheck")
    for name, one in checked.items():
        if one.program == "db upgrade":
            continue
        problems += _compose_serving(name, services[name], one)
        migrations = [
            other
            for other, it in checked.items()
            if it.program == "db upgrade" and it.store == one.store
        ]
        if not migrations:
            problems.append(f"compose service {name}: no db upgrade of its store {one.store}")
        for migration in migrations:
            if _depends(services[name]).get(migration) != "service_completed_successfully":
                problems.append(f"compose service {name}: does not wait for {migration}")
    return problems


def _depends(service: Mapping[str, Any]) -> dict[str, str]:
    depends = service.get("depends_on", {})
    if isinstance(depends, list):
        return dict.fromkeys(depends, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in depends.items()}


def _compose_serving(name: str, service: Mapping[str, Any], one: Checked) -> list[str]:
    """A serving container's healthcheck and stop grace."""
    problems = []
    test = " ".join(service.get("healthcheck", {}).get("test", []))
    if f"http://127.0.0.1:{one.port}/livez" not in test:
        problems.append(f"compose service {name}: no healthcheck on /livez at its port")
    grace = seconds(service.get("stop_grace_period", "10s"))
    if one.drain is not None and not grace > one.drain:
        problems.append(
            f"compose service {name}: stop_grace_period {grace} s <= its stop's bound {one.drain} s"
        )
    return problems


# -- Kubernetes ----------------------------------------------------------------------------


def load_manifests(directory: Path = DEPLOY / "k8s") -> list[dict[str, Any]]:
    docs = []
    for path in sorted(directory.glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def created_secrets(commands: Iterable[list[str]]) -> dict[str, set[str]]:
    """Secret name → its keys, from `kubectl create secret generic NAME --from-file=…`."""
    out: dict[str, set[str]] = {}
    for argv in commands:
        if argv[:4] != ["kubectl", "create", "secret", "generic"]:
            continue
        keys = set()
        for word in argv[5:]:
            if word.startswith("--from-file="):
                source = word.removeprefix("--from-file=")
                key, _, path = source.rpartition("=")
                keys.add(key or Path(path).name)
        out[argv[4]] = keys
    return out


def _pod_containers(
    kind: str,
    name: str,
    pod: Mapping[str, Any],
    secrets: Mapping[str, set[str]],
    claims: Iterable[Mapping[str, Any]] = (),
) -> tuple[list[Container], list[str]]:
    """The pod's containers of the image, what each has mounted, and the volume problems
    (`claims`: a StatefulSet's volumeClaimTemplates, volumes too)."""
    problems = []
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    volumes.update({c["metadata"]["name"]: {"name": c["metadata"]["name"]} for c in claims})
    out = []
    for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        where = f"{kind} {name} container {container['name']}"
        found: set[str] = set()
        dirs = set()
        for mount in container.get("volumeMounts", []):
            volume = volumes.get(mount["name"])
            if volume is None:
                problems.append(f"{where}: mounts no volume {mount['name']}")
                continue
            keys, wrong = _secret_volume(volume, secrets)
            problems += [f"{where}: {w}" for w in wrong]
            if keys is None:
                dirs.add(mount["mountPath"])
            elif mount["mountPath"] == SECRETS_IN:
                found |= keys
            else:
                problems.append(f"{where}: secrets mounted at {mount['mountPath']}")
        if str(container["image"]).startswith(IMAGE + ":"):
            out.append(Container(where, list(container.get("args", [])), found, dirs))
    return out, problems


def _secret_volume(
    volume: Mapping[str, Any], secrets: Mapping[str, set[str]]
) -> tuple[set[str] | None, list[str]]:
    """A volume's files when it holds secrets (None when not), and its problems: a Secret
    nobody creates, a key it lacks, files others could read."""
    if "secret" in volume:
        spec = volume["secret"]
        sources = [{"name": spec["secretName"], "items": spec.get("items")}]
        mode = spec.get("defaultMode", 0o644)
    elif "projected" in volume:
        spec = volume["projected"]
        sources = [s["secret"] for s in spec["sources"] if "secret" in s]
        mode = spec.get("defaultMode", 0o644)
    else:
        return None, []
    problems = []
    if mode not in (0o400, 0o600):
        problems.append(f"volume {volume['name']}: defaultMode {mode:o}, not 400 or 600")
    files: set[str] = set()
    for source in sources:
        name = source["name"]
        if name not in secrets:
            problems.append(f"volume {volume['name']}: no Secret {name} is created")
            continue
        items = source.get("items")
        if items is None:
            files |= secrets[name]
            continue
        for item in items:
            if item["key"] not in secrets[name]:
                problems.append(f"volume {volume['name']}: Secret {name} has no key {item['key']}")
            files.add(item["path"])
    return files, problems


def _labels_match(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def manifest_problems(docs: list[dict[str, Any]], secrets: Mapping[str, set[str]]) -> list[str]:
    """Every reference of the manifests checked; `secrets`: the Secrets the docs create."""
    problems: list[str] = []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    services = {
        s["metadata"]["name"]: s["spec"]["ports"][0]["port"] for s in by_kind.get("Service", [])
    }
    claims = {c["metadata"]["name"] for c in by_kind.get("PersistentVolumeClaim", [])}
    workloads = [*by_kind.get("Deployment", []), *by_kind.get("Job", [])]
    migrated: set[str] = set()
    serving: list[tuple[dict[str, Any], Checked]] = []
    for workload in [*workloads, *by_kind.get("StatefulSet", [])]:
        kind, name = workload["kind"], workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        claimed = workload["spec"].get("volumeClaimTemplates", [])
        containers, found = _pod_containers(kind, name, pod, secrets, claimed)
        problems += found
        for volume in pod.get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim is not None and claim not in claims:
                problems.append(f"{kind} {name}: no PersistentVolumeClaim {claim}")
        for container in containers:
            found, one = check_command(container, services)
            problems += found
            if one is None:
                continue
            if one.program == "db upgrade":
                migrated.add(one.store or "")
            elif kind == "Deployment":
                serving.append((workload, one))
                problems += _deployment_problems(workload, container, one)
    for workload, one in serving:
        if one.store not in migrated:
            problems.append(
                f"Deployment {workload['metadata']['name']}: no db upgrade of its store"
            )
    problems += _selector_problems(by_kind)
    return problems


def _deployment_problems(
    deployment: Mapping[str, Any], container: Container, one: Checked
) -> list[str]:
    """Probes on the container's port, the grace above the drain, a user of its own."""
    name = deployment["metadata"]["name"]
    pod = deployment["spec"]["template"]["spec"]
    spec = next(c for c in pod["containers"] if container.where.endswith(f" {c['name']}"))
    ports = {p.get("name"): p["containerPort"] for p in spec.get("ports", [])}
    problems = []
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = spec.get(probe, {}).get("httpGet", {})
        port = get.get("port")
        port = ports.get(port) if isinstance(port, str) else port
        if get.get("path") != path or port != one.port:
            problems.append(f"Deployment {name}: {probe} is not GET {path} on port {one.port}")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if one.drain is not None and not grace > one.drain:
        problems.append(
            f"Deployment {name}: terminationGracePeriodSeconds {grace} <= its stop's bound"
        )
    context = pod.get("securityContext", {})
    if context.get("runAsNonRoot") is not True or not context.get("runAsUser"):
        problems.append(f"Deployment {name}: not run as a user of its own (runAsNonRoot)")
    if not spec.get("resources", {}).get("requests"):
        problems.append(f"Deployment {name}: no resource requests")
    return problems


def _selector_problems(by_kind: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """Each Deployment selects its own pods; each Service and PodDisruptionBudget selects a
    Deployment's (a Service on a port its pods name); a Deployment of several replicas has a
    budget."""
    problems = []
    pods: dict[str, dict[str, Any]] = {}
    for kind in ("Deployment", "StatefulSet"):
        for workload in by_kind.get(kind, []):
            name = workload["metadata"]["name"]
            template = workload["spec"]["template"]
            if not _labels_match(
                workload["spec"]["selector"]["matchLabels"], template["metadata"]["labels"]
            ):
                problems.append(f"{kind} {name}: its selector does not match its pods")
            pods[name] = template
    budgets = set()
    for pdb in by_kind.get("PodDisruptionBudget", []):
        selector = pdb["spec"]["selector"]["matchLabels"]
        matched = [n for n, t in pods.items() if _labels_match(selector, t["metadata"]["labels"])]
        if not matched:
            problems.append(f"PodDisruptionBudget {pdb['metadata']['name']}: selects no pods")
        budgets.update(matched)
    for service in by_kind.get("Service", []):
        selector = service["spec"]["selector"]
        matched = [t for t in pods.values() if _labels_match(selector, t["metadata"]["labels"])]
        if not matched:
            problems.append(f"Service {service['metadata']['name']}: selects no pods")
        for template in matched:
            named = {
                p.get("name") for c in template["spec"]["containers"] for p in c.get("ports", [])
            }
            for port in service["spec"]["ports"]:
                if isinstance(port["targetPort"], str) and port["targetPort"] not in named:
                    problems.append(
                        f"Service {service['metadata']['name']}: no port {port['targetPort']}"
                    )
    for deployment in by_kind.get("Deployment", []):
        name = deployment["metadata"]["name"]
        if deployment["spec"].get("replicas", 1) > 1 and name not in budgets:
            problems.append(f"Deployment {name}: several replicas and no PodDisruptionBudget")
    return problems


# -- the docs page -------------------------------------------------------------------------


def shell_commands(page: Path = ROOT / "docs" / "deploy.md") -> list[list[str]]:
    """The commands of the page's bash blocks, continuations joined, as words."""
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(words)
    return out
