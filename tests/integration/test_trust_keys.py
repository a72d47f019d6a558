"""Keys over time, with real agents: a restart keeps the identity, a rotation does not break
a handoff waiting in the outbox, a retired key stops verifying, a return is not retried for
ever, and an operator's decision is used once."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from a2a_handoff.protocol.extension import HANDOFF_EXTENSION_URI as URI
from a2a_handoff.protocol.extension import SIGNATURE_KEY
from tests.integration.handoff_support import REFUND, ext, message, result, wait_for
from tests.integration.trust_support import USERS, bank, forged, send
from tests.support import ROOT, Cli, key_env
from tests.trust_support import sign_with, stolen_identity

ALICE = USERS["alice"]


def jwks_kids(url: str) -> set[str]:
    keys = httpx.get(url + ".well-known/jwks.json", timeout=5).json()["keys"]
    return {k["kid"] for k in keys}


def keys_cli(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "a2a_handoff", "keys", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_restart_keeps_the_identity_and_its_key_file_is_private(tmp_path: Path) -> None:
    with bank(tmp_path) as agents:
        before = jwks_kids(agents.triage.url)
        agents.triage.restart()
        assert jwks_kids(agents.triage.url) == before
        mode = (tmp_path / "triage.keys.json").stat().st_mode
        assert stat.S_IMODE(mode) == 0o600
        # Billing pinned triage's key with the first handoff; it still verifies after.
        for _ in range(2):
            reply = agents.triage.rpc("SendMessage", message(REFUND), **{"X-API-Key": ALICE})
            assert ext(result(reply)["task"])["state"] == "TRANSFERRED"
            agents.triage.restart()


def test_a_handoff_in_flight_across_a_rotation_and_retirement_is_delivered(
    tmp_path: Path,
) -> None:
    with bank(tmp_path) as agents:
        store = f"sqlite:///{tmp_path / 'triage.db'}"
        old = keys_cli("list", "--store", store)["keys"][0]["kid"]
        agents.billing.stop()  # the handoff waits in triage's outbox
        context = f"ctx-{time.time_ns()}"
        reply = agents.triage.rpc(
            "SendMessage",
            message(REFUND, context, returnImmediately=True),
            **{"X-API-Key": ALICE},
        )
        assert "result" in reply, reply
        wait_for(lambda: ext(tasks_in_as(agents.triage, context)[0]).get("state") == "HANDING_OFF")
        rotated = keys_cli("rotate", "--store", store)["keys"]
        new = next(k["kid"] for k in rotated if k["status"] == "signing")
        assert new != old
        keys_cli("retire", old, "--store", store)
        wait_for(lambda: jwks_kids(agents.triage.url) == {new})  # the running agent read it
        agents.billing.start()

        def transferred() -> dict[str, Any] | None:
            task = tasks_in_as(agents.triage, context)[0]
            return task if ext(task).get("state") in ("TRANSFERRED", "FAILED") else None

        source = wait_for(transferred, timeout=30)
        assert ext(source)["state"] == "TRANSFERRED", source["status"]
        successor = result(
            agents.billing.rpc(
                "GetTask",
                {"id": ext(source)["transfer"]["taskId"]},
                **{"X-API-Key": "triage-at-billing"},
            )
        )
        assert ext(successor)["handoff"]["kid"] == new


def tasks_in_as(agent: Any, context: str, key: str = ALICE) -> list[dict[str, Any]]:
    page = result(agent.rpc("ListTasks", {"contextId": context}, **{"X-API-Key": key}))
    tasks: list[dict[str, Any]] = page["tasks"]
    return tasks


def test_an_envelope_signed_with_a_retired_key_no_longer_verifies(tmp_path: Path) -> None:
    with bank(tmp_path) as agents:
        reply = agents.triage.rpc("SendMessage", message(REFUND), **{"X-API-Key": ALICE})
        assert ext(result(reply)["task"])["state"] == "TRANSFERRED"  # billing pinned the key
        stolen = stolen_identity(tmp_path / "triage.db").signing_key  # before it is retired
        store = f"sqlite:///{tmp_path / 'triage.db'}"
        keys_cli("rotate", "--store", store)
        keys_cli("retire", str(stolen.kid), "--store", store)
        wait_for(lambda: stolen.kid not in jwks_kids(agents.triage.url))
        time.sleep(1.5)  # billing's pin (--trust-max-age 1) is stale: it reads the JWKS again
        envelope = forged()
        signed = {URI: envelope, SIGNATURE_KEY: sign_with(stolen, envelope)}
        task = result(send(agents.billing, signed, "triage-at-billing"))["task"]
        assert task["status"]["state"] == "TASK_STATE_REJECTED"
        assert ext(task)["rejected"] == "envelope_forged"
        # And triage's own handoffs go on, signed with the new key.
        reply = agents.triage.rpc("SendMessage", message(REFUND), **{"X-API-Key": ALICE})
        assert ext(result(reply)["task"])["state"] == "TRANSFERRED"


def test_an_approval_is_used_once_and_a_lost_return_ends_failed_in_health(
    tmp_path: Path,
) -> None:
    big = "I was charged twice, I want a refund of $750 for order 4242"
    with bank(tmp_path, human_extra=("--return-give-up", "2")) as agents:
        reply = agents.triage.rpc("SendMessage", message(big), **{"X-API-Key": ALICE})
        context = result(reply)["task"]["contextId"]
        operator = Cli(tmp_path / "op.json")

        def waiting() -> list[dict[str, Any]]:
            _, items = operator.events(
                "--api-key", key_env("operator-key"), "inbox", "--agent", agents.human.url
            )
            return [i for i in items if i["contextId"] == context]

        item = wait_for(waiting, timeout=20)[0]
        code, out = operator.run(
            "--api-key",
            key_env("operator-key"),
            "approve",
            item["taskId"],
            "--agent",
            agents.human.url,
        )
        assert code == 0, out

        def refunded() -> list[dict[str, Any]]:
            tasks = tasks_in_as(agents.billing, context)
            return [
                t
                for t in tasks
                if t["status"]["state"] == "TASK_STATE_COMPLETED"
                and ext(t).get("state") != "TRANSFERRED"
            ]

        done = wait_for(refunded, timeout=30)[0]
        full = result(
            agents.billing.rpc("GetTask", {"id": done["id"]}, **{"X-API-Key": "human-at-billing"})
        )
        returned = full["history"][0]["metadata"]
        decision_id = ext(full)["decision"]["id"]
        assert ext(full)["approvalsUsed"] == [decision_id]
        # The human agent's key, stolen: a new return carrying the same signed approval
        # (another key, another task) is refused — the approval makes one task, ever.
        human_key = stolen_identity(tmp_path / "human.db").signing_key
        again = {**returned[URI], "idempotencyKey": "e" * 64, "handoffId": "h-again"}
        reused = {URI: again, SIGNATURE_KEY: sign_with(human_key, again)}
        reply = send(agents.billing, reused, "human-at-billing")
        assert reply["error"]["code"] == -32103, reply
        assert len(refunded()) == 1

        # A return whose target stays down is given up (FAILED), and /health says so.
        agents.triage.rpc("SendMessage", message(big, context), **{"X-API-Key": ALICE})
        second = wait_for(
            lambda: [i for i in waiting() if i["taskId"] != item["taskId"]], timeout=20
        )[0]
        agents.billing.stop()
        operator.run(
            "--api-key",
            key_env("operator-key"),
            "deny",
            second["taskId"],
            "no",
            "--agent",
            agents.human.url,
        )

        def failed() -> dict[str, Any] | None:
            # /health details need a key when auth is on (anonymous callers get the status)
            headers = {"X-API-Key": "operator-key"}
            health = httpx.get(agents.human.url + "health", headers=headers, timeout=5).json()
            return health if health["failedReturns"] else None

        health = wait_for(failed, timeout=30)
        assert "given up after" in health["lastFailedReturn"]["reason"]
        held = result(
            agents.human.rpc("GetTask", {"id": second["taskId"]}, **{"X-API-Key": "operator-key"})
        )
        assert held["status"]["state"] == "TASK_STATE_FAILED"
