"""SSRF through IPv6 forms: a webhook at an IPv6 address embedding a non-public IPv4 address
(NAT64, 6to4, Teredo, IPv4-compatible, -mapped, -translated) is refused by a real agent."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.support import AgentProcess

EMBEDDED_NOT_PUBLIC = (
    "https://[64:ff9b::a9fe:a9fe]/latest",  # NAT64 of 169.254.169.254 (cloud metadata)
    "https://[64:ff9b::a00:1]/h",  # NAT64 of 10.0.0.1
    "https://[64:ff9b::7f00:1]/h",  # NAT64 of 127.0.0.1
    "https://[64:ff9b:1::a9fe:a9fe]/h",  # local-use NAT64 (/96) of 169.254.169.254
    "https://[64:ff9b:1:a9fe:a9:fe00::]/h",  # local-use NAT64 (/48) of 169.254.169.254
    "https://[2002:a9fe:a9fe::1]/h",  # 6to4 of 169.254.169.254
    "https://[2002:c0a8:101::1]/h",  # 6to4 of 192.168.1.1
    "https://[2001:0:a9fe:a9fe::f7f7:f7f7]/h",  # Teredo, server 169.254.169.254
    "https://[2001:0:808:808::5601:5efe]/h",  # Teredo, client (obfuscated) 169.254.161.1
    "https://[::a9fe:a9fe]/latest",  # IPv4-compatible 169.254.169.254
    "https://[::7f00:1]/h",  # IPv4-compatible 127.0.0.1
    "https://[::ffff:a9fe:a9fe]/h",  # IPv4-mapped 169.254.169.254
    "https://[::ffff:0:a9fe:a9fe]/latest",  # SIIT IPv4-translated 169.254.169.254
    "https://[::ffff:0:a00:1]/h",  # SIIT IPv4-translated 10.0.0.1
)


def test_a_webhook_at_an_ipv6_form_of_a_non_public_address_is_refused(tmp_path: Path) -> None:
    agent = AgentProcess("echo", f"sqlite:///{tmp_path / 'echo.db'}")
    agent.start()
    try:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        answer = agent.rpc("SendMessage", {"message": message})
        task = answer["result"]["task"]  # type: ignore[index]
        accepted: list[str] = []
        for url in EMBEDDED_NOT_PUBLIC:
            created = agent.rpc(
                "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url}
            )
            if created.get("error", {}).get("code") != -32602:  # type: ignore[union-attr]
                accepted.append(url)
        assert accepted == []
        listed = agent.rpc("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert listed["result"] == {"configs": [], "nextPageToken": ""}
        config = {"taskPushNotificationConfig": {"url": "https://[64:ff9b::a9fe:a9fe]/latest"}}
        message = {**message, "messageId": str(uuid.uuid4())}
        sent = agent.rpc("SendMessage", {"message": message, "configuration": config})
        assert sent["error"]["code"] == -32602  # type: ignore[index]
    finally:
        agent.stop()
