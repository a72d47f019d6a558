"""Tenants: a request's `tenant` (a param, or the `/{tenant}/…` path over HTTP+JSON) scopes
every task, list, stream, push config and follow-up; a caller sees nothing of another tenant,
as if it did not exist (-32001, HTTP 404); the same messageId in two tenants makes two tasks;
a caller's push configs count against its cap in every tenant at once; an operator sees
every task of the tenant it calls in, and nothing of another (the default one included).
On SQLite, Redis and PostgreSQL, one real agent process each.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.handoff_support import result
from tests.support import A2A_HEADERS, AgentProcess, free_port

KEY = {"X-API-Key": "alice-key-0123456789abcdef"}
OPERATOR = {"X-API-Key": "op-key-0123456789abcdef0"}
TASK_NOT_FOUND = -32001


def _message(text: str, message_id: str, task_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        msg["taskId"] = task_id
    return msg


def _rpc(agent: AgentProcess, method: str, params: dict[str, Any], tenant: str | None) -> Any:
    """One JSON-RPC call as alice, in `tenant` (None: the params name none)."""
    named = params if tenant is None else {**params, "tenant": tenant}
    return agent.rpc(method, named, **KEY)


def _code(answer: Any) -> int:
    assert "error" in answer, answer
    code: int = answer["error"]["code"]
    return code


def _ids(agent: AgentProcess, tenant: str | None) -> set[str]:
    page = result(_rpc(agent, "ListTasks", {}, tenant))
    return {task["id"] for task in page["tasks"]}


def _agent(stores: Callable[[str], str], tmp_path: Path) -> AgentProcess:
    keys = tmp_path / "keys"
    keys.write_text("alice=alice-key-0123456789abcdef\nop=op-key-0123456789abcdef0\n")
    extra = (
        f"--auth-keys={keys}",
        "--operators=op",
        *("--push-allow", "127.0.0.1", "--push-retry-max", "0.3", "--push-per-caller", "2"),
    )
    return AgentProcess("echo", stores("echo"), extra=extra)


@pytest.mark.timeout(90)
def test_tenants_are_isolated_over_json_rpc(stores: Callable[[str], str], tmp_path: Path) -> None:
    agent = _agent(stores, tmp_path).start()
    try:
        same = str(uuid.uuid4())  # one messageId, sent in three tenants: three tasks
        ask = _message("ask: which?", same)
        acme = result(_rpc(agent, "SendMessage", {"message": ask}, "acme"))["task"]
        globex = result(_rpc(agent, "SendMessage", {"message": ask}, "globex"))["task"]
        default = result(_rpc(agent, "SendMessage", {"message": ask}, None))["task"]
        assert len({acme["id"], globex["id"], default["id"]}) == 3
        again = result(_rpc(agent, "SendMessage", {"message": ask}, "acme"))["task"]
        assert again["id"] == acme["id"]  # within a tenant the messageId still dedupes
        assert acme["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        assert _ids(agent, "acme") == {acme["id"]}
        assert _ids(agent, "globex") == {globex["id"]}
        assert _ids(agent, None) == {default["id"]}
        assert _ids(agent, "") == {default["id"]}  # "" is the default tenant

        get = {"id": acme["id"]}
        assert result(_rpc(agent, "GetTask", get, "acme"))["id"] == acme["id"]
        for other in ("globex", None):
            assert _code(_rpc(agent, "GetTask", get, other)) == TASK_NOT_FOUND
            assert _code(_rpc(agent, "CancelTask", get, other)) == TASK_NOT_FOUND
            assert _code(_rpc(agent, "SubscribeToTask", get, other)) == TASK_NOT_FOUND
            reply = {"message": _message("mine", str(uuid.uuid4()), acme["id"])}
            assert _code(_rpc(agent, "SendMessage", reply, other)) == TASK_NOT_FOUND

        hook = {"taskId": acme["id"], "id": "hook", "url": f"http://127.0.0.1:{free_port()}/"}
        assert _code(_rpc(agent, "CreateTaskPushNotificationConfig", hook, "globex")) == (
            TASK_NOT_FOUND
        )
        assert "result" in _rpc(agent, "CreateTaskPushNotificationConfig", hook, "acme")
        # The per-caller cap (2 here) counts alice's configs in every tenant at once.
        theirs = {**hook, "taskId": globex["id"]}
        assert "result" in _rpc(agent, "CreateTaskPushNotificationConfig", theirs, "globex")
        third = {**hook, "taskId": default["id"]}
        capped = _rpc(agent, "CreateTaskPushNotificationConfig", third, None)
        assert _code(capped) == -32602
        assert "most allowed per caller" in capped["error"]["message"]
        ref = {"taskId": acme["id"], "id": "hook"}
        for method in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
            assert _code(_rpc(agent, method, ref, "globex")) == TASK_NOT_FOUND
        listed = {"taskId": acme["id"]}
        assert _code(_rpc(agent, "ListTaskPushNotificationConfigs", listed, None)) == (
            TASK_NOT_FOUND
        )
        configs = result(_rpc(agent, "ListTaskPushNotificationConfigs", listed, "acme"))
        assert [c["id"] for c in configs["configs"]] == ["hook"]

        # Nothing of acme's moved: its task still waits, and its own tenant answers it.
        assert result(_rpc(agent, "GetTask", get, "acme"))["status"]["state"] == (
            "TASK_STATE_INPUT_REQUIRED"
        )
        reply = {"message": _message("this one", str(uuid.uuid4()), acme["id"])}
        done = result(_rpc(agent, "SendMessage", reply, "acme"))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        canceled = result(_rpc(agent, "CancelTask", {"id": globex["id"]}, "globex"))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"

        for bad in ("a/b", "-lead", "tasks", "x" * 129, 5, "t\x1f"):
            assert _code(_rpc(agent, "ListTasks", {}, bad)) == -32602  # type: ignore[arg-type]
    finally:
        agent.stop()


@pytest.mark.timeout(90)
def test_tenants_are_isolated_over_http_json_paths(
    stores: Callable[[str], str], tmp_path: Path
) -> None:
    agent = _agent(stores, tmp_path).start()
    base = agent.url.rstrip("/")
    headers = {**A2A_HEADERS, **KEY}
    try:
        with httpx.Client(timeout=30, headers=headers) as http:
            same = str(uuid.uuid4())
            body = {"message": _message("ask: which?", same)}
            made = http.post(f"{base}/acme/message:send", json=body)
            assert made.status_code == 200, made.text
            acme = made.json()["task"]
            globex = http.post(f"{base}/globex/message:send", json=body).json()["task"]
            default = http.post(f"{base}/message:send", json=body).json()["task"]
            assert len({acme["id"], globex["id"], default["id"]}) == 3

            def listed(prefix: str) -> set[str]:
                page = http.get(f"{base}{prefix}/tasks")
                assert page.status_code == 200, page.text
                return {task["id"] for task in page.json()["tasks"]}

            assert listed("/acme") == {acme["id"]}
            assert listed("/globex") == {globex["id"]}
            assert listed("") == {default["id"]}

            task = f"tasks/{acme['id']}"
            assert http.get(f"{base}/acme/{task}").json()["id"] == acme["id"]
            for prefix in ("/globex", ""):
                assert http.get(f"{base}{prefix}/{task}").status_code == 404
                assert http.post(f"{base}{prefix}/{task}:cancel").status_code == 404
                assert http.get(f"{base}{prefix}/{task}:subscribe").status_code == 404
                assert http.get(f"{base}{prefix}/{task}/pushNotificationConfigs").status_code == (
                    404
                )
                hook = {"url": f"http://127.0.0.1:{free_port()}/"}
                refused = http.post(f"{base}{prefix}/{task}/pushNotificationConfigs", json=hook)
                assert refused.status_code == 404

            # The same tenant over JSON-RPC and over the path: one scope.
            got = agent.rpc("GetTask", {"id": acme["id"], "tenant": "acme"}, **KEY)
            assert result(got)["id"] == acme["id"]

            # A body naming another tenant than the path is refused, nothing made.
            other = {**body, "tenant": "globex"}
            mismatch = http.post(f"{base}/acme/message:send", json=other)
            assert mismatch.status_code == 400
            assert mismatch.json()["error"]["status"] == "INVALID_ARGUMENT"
            agreeing = {**body, "tenant": "acme"}
            assert (
                http.post(f"{base}/acme/message:send", json=agreeing).json()["task"]["id"]
                == (acme["id"])
            )
            assert listed("/acme") == {acme["id"]}
            # The query may name the tenant too (a field the path does not hold), not another.
            assert {t["id"] for t in http.get(f"{base}/tasks?tenant=acme").json()["tasks"]} == {
                acme["id"]
            }
            assert http.get(f"{base}/{task}?tenant=acme").status_code == 200
            assert http.get(f"{base}/acme/tasks?tenant=globex").status_code == 400
            assert http.get(f"{base}/a~b.c_d-e/tasks").status_code == 200
            assert http.get(f"{base}/-x/tasks").status_code == 400
    finally:
        agent.stop()


@pytest.mark.timeout(90)
def test_an_operator_sees_every_task_of_the_tenant_it_calls_in_and_nothing_of_another(
    stores: Callable[[str], str], tmp_path: Path
) -> None:
    agent = _agent(stores, tmp_path).start()

    def as_operator(method: str, params: dict[str, Any], tenant: str | None) -> Any:
        return agent.rpc(
            method, params if tenant is None else {**params, "tenant": tenant}, **OPERATOR
        )

    def seen(tenant: str | None) -> set[str]:
        page = result(as_operator("ListTasks", {}, tenant))
        assert page["totalSize"] == len(page["tasks"])
        return {task["id"] for task in page["tasks"]}

    try:
        made = {}
        for tenant in ("acme", "globex", None):
            ask = {"message": _message("ask: which?", str(uuid.uuid4()))}
            made[tenant] = result(_rpc(agent, "SendMessage", ask, tenant))["task"]["id"]
        assert seen(None) == {made[None]}  # the default tenant's, no longer every tenant's
        assert seen("") == {made[None]}
        assert seen("acme") == {made["acme"]}
        assert seen("globex") == {made["globex"]}
        for tenant, task_id in made.items():
            for other in {"acme", "globex", None} - {tenant}:
                get = {"id": task_id}
                assert _code(as_operator("GetTask", get, other)) == TASK_NOT_FOUND
                assert _code(as_operator("CancelTask", get, other)) == TASK_NOT_FOUND
                reply = {"message": _message("mine", str(uuid.uuid4()), task_id)}
                assert _code(as_operator("SendMessage", reply, other)) == TASK_NOT_FOUND
        # Within its tenant an operator reads and ends alice's task.
        assert result(as_operator("GetTask", {"id": made["acme"]}, "acme"))["id"] == made["acme"]
        canceled = result(as_operator("CancelTask", {"id": made["acme"]}, "acme"))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert _ids(agent, "acme") == {made["acme"]}  # still alice's, as she lists it
    finally:
        agent.stop()
