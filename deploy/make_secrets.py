"""Make the secrets deploy/compose.yaml and deploy/k8s read, as files in DIR (default
deploy/secrets, which .gitignore and .dockerignore keep out of commits and images).

    python deploy/make_secrets.py [DIR]

What it writes, for the agents triage, billing and human and the gateway in front of them:
- NAME.keys.json: each agent's signing keys (what `keys init` makes);
- api-keys: the API keys every agent takes (`--auth-keys`), `principal=key` lines: one
  principal per agent (the key it presents to the others), `gateway` and `operator`;
- NAME.key: that agent's own key, for its `--credential PEER=@FILE`;
- gateway.keys: the gateway's keys for the agents' origins (`--keys-file`);
- gateway.clients: the keys the gateway takes from its clients (`--auth-keys`);
- pgpass (the agents' PostgreSQL password, a libpq password file) and postgres-password
  (the same password, for the PostgreSQL container).
Those are mounted into containers: mode 0644, so that the container's user — another uid
than the host's — reads its bind mount (compose); the directory, 0700, keeps them private on
the host, and each container copies them to files of its own, 0600 (deploy/entrypoint.sh).
operator.key and client.key (0600) stay on the host: an operator's and a client's key.

A DIR that holds files already is refused: new keys would change every agent's identity.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from a2a_handoff.trust.keys import Identity

AGENTS = ("triage", "billing", "human")
PORT = 8000  # every container's port (deploy/compose.yaml, deploy/k8s)
DB_USER = "a2a"


def _write(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, mode)  # whatever the umask took away


def make(directory: Path) -> list[Path]:
    """The secrets, written in `directory`; the files, in the order written."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    if any(directory.iterdir()):
        raise SystemExit(f"error: {directory} holds files already: remove them to make new ones")
    keys = {name: secrets.token_urlsafe(32) for name in (*AGENTS, "gateway", "operator")}
    client = secrets.token_urlsafe(32)
    password = secrets.token_urlsafe(24)
    mounted = {
        **{f"{name}.keys.json": Identity.generate(name).to_document() for name in AGENTS},
        "api-keys": "".join(f"{name}={key}\n" for name, key in keys.items()),
        **{f"{name}.key": keys[name] + "\n" for name in AGENTS},
        "gateway.keys": "".join(f"http://{n}:{PORT}={keys['gateway']}\n" for n in AGENTS),
        "gateway.clients": f"client={client}\n",
        "pgpass": f"*:*:*:{DB_USER}:{password}\n",
        "postgres-password": password + "\n",
    }
    kept = {"operator.key": keys["operator"] + "\n", "client.key": client + "\n"}
    written = []
    for name, text in mounted.items():
        _write(directory / name, text, 0o644)
        written.append(directory / name)
    for name, text in kept.items():
        _write(directory / name, text, 0o600)
        written.append(directory / name)
    return written


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else Path(__file__).parent / "secrets"
    for path in make(directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
