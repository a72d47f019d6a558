"""A2A 0.3 on the wire: its shapes, converted to and from the 1.0 ones this library speaks.

0.3 tags objects with `kind` (`message`, `task`, `status-update`, `artifact-update`; parts
`text`, `file`, `data`), writes states in lowercase (`input-required`), roles as `user` /
`agent`, files as `{"file": {"bytes" | "uri", "mimeType", "name"}}`, a data part as an object
only, marks the last status event of a stream `final`, and answers with the object itself
(no `{"task": …}` wrapper). Its card needs `url`, `preferredTransport` and
`protocolVersion`. Everything here is pure data conversion of ProtoJSON dicts; the 0.3
binding is `server._compat03`. TRANSFERRED has no 0.3 value: it is `completed` (the pointer
stays in `metadata`), as for any client that did not activate the handoff extension.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "card_v03",
    "message_from_v03",
    "result_to_v03",
    "send_params_from_v03",
    "state_to_v03",
    "stream_item_to_v03",
    "task_to_v03",
]

V03_PROTOCOL_VERSION = "0.3.0"
_STATE_PREFIX = "TASK_STATE_"
_ROLES = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}
_ROLES_FROM = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_COMPAT_KEY = "data_part_compat"  # a non-object data value wrapped as {"value": …}


def state_to_v03(state: str) -> str:
    """`TASK_STATE_INPUT_REQUIRED` → `input-required`; TRANSFERRED → `completed`."""
    name = state.removeprefix(_STATE_PREFIX).lower().replace("_", "-")
    if name == "transferred":
        return "completed"
    if name in ("unspecified", ""):
        return "unknown"
    return name


def _copy(source: dict[str, Any], target: dict[str, Any], *names: str) -> None:
    for name in names:
        if source.get(name) is not None:
            target[name] = source[name]


# -- 0.3 → 1.0 (requests) ------------------------------------------------------------------


def _part_from_v03(part: Any) -> Any:
    if not isinstance(part, dict):
        return part  # left for the 1.0 model to refuse, naming the field
    kind = part.get("kind")
    out: dict[str, Any] = {}
    _copy(part, out, "metadata")
    if kind == "text" or (kind is None and "text" in part):
        out["text"] = part.get("text")
    elif kind == "file" or (kind is None and "file" in part):
        file = part.get("file")
        if not isinstance(file, dict):
            return {"file": file}  # refused by the model: a part without content
        if "bytes" in file:
            out["raw"] = file["bytes"]
        if "uri" in file:
            out["url"] = file["uri"]
        if file.get("mimeType") is not None:
            out["mediaType"] = file["mimeType"]
        if file.get("name") is not None:
            out["filename"] = file["name"]
    elif kind == "data" or (kind is None and "data" in part):
        data = part.get("data")
        metadata = part.get("metadata")
        if isinstance(metadata, dict) and metadata.get(_COMPAT_KEY) and isinstance(data, dict):
            data = data.get("value")
            rest = {k: v for k, v in metadata.items() if k != _COMPAT_KEY}
            if rest:
                out["metadata"] = rest
            else:
                out.pop("metadata", None)
        out["data"] = data
    else:
        return part
    return out


def message_from_v03(message: Any) -> Any:
    """A 0.3 Message as the 1.0 one (anything unexpected is passed on for the model to
    refuse with a precise error)."""
    if not isinstance(message, dict):
        return message
    out: dict[str, Any] = {}
    _copy(
        message,
        out,
        "messageId",
        "contextId",
        "taskId",
        "metadata",
        "extensions",
        "referenceTaskIds",
    )
    role = message.get("role")
    out["role"] = _ROLES_FROM.get(role, role) if isinstance(role, str) else role
    parts = message.get("parts")
    out["parts"] = [_part_from_v03(p) for p in parts] if isinstance(parts, list) else parts
    return out


def send_params_from_v03(params: dict[str, Any]) -> dict[str, Any]:
    """0.3 MessageSendParams as a 1.0 SendMessageRequest (`blocking: false` is
    `returnImmediately`; a push config is kept so that it is refused as in 1.0)."""
    out: dict[str, Any] = {"message": message_from_v03(params.get("message"))}
    _copy(params, out, "metadata")
    config = params.get("configuration")
    if isinstance(config, dict):
        converted: dict[str, Any] = {}
        _copy(config, converted, "acceptedOutputModes", "historyLength")
        if config.get("blocking") is False:
            converted["returnImmediately"] = True
        if config.get("pushNotificationConfig") is not None:
            converted["taskPushNotificationConfig"] = config["pushNotificationConfig"]
        out["configuration"] = converted
    elif config is not None:
        out["configuration"] = config
    return out


# -- 1.0 → 0.3 (answers) -------------------------------------------------------------------


def _part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any]
    if "text" in part:
        out = {"kind": "text", "text": part["text"]}
    elif "raw" in part or "url" in part:
        file: dict[str, Any] = {}
        if "raw" in part:
            file["bytes"] = part["raw"]
        else:
            file["uri"] = part["url"]
        if part.get("mediaType") is not None:
            file["mimeType"] = part["mediaType"]
        if part.get("filename") is not None:
            file["name"] = part["filename"]
        out = {"kind": "file", "file": file}
    else:
        data = part.get("data")
        if isinstance(data, dict):
            out = {"kind": "data", "data": data}
        else:  # 0.3 data parts hold objects only
            meta = {**(part.get("metadata") or {}), _COMPAT_KEY: True}
            return {"kind": "data", "data": {"value": data}, "metadata": meta}
    _copy(part, out, "metadata")
    return out


def message_to_v03(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "message", "messageId": message["messageId"]}
    out["role"] = _ROLES.get(message.get("role", ""), "agent")
    out["parts"] = [_part_to_v03(p) for p in message.get("parts", [])]
    _copy(message, out, "contextId", "taskId", "metadata", "extensions", "referenceTaskIds")
    return out


def _status_to_v03(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": state_to_v03(status.get("state", ""))}
    if status.get("message") is not None:
        out["message"] = message_to_v03(status["message"])
    _copy(status, out, "timestamp")
    return out


def _artifact_to_v03(artifact: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": artifact["artifactId"]}
    out["parts"] = [_part_to_v03(p) for p in artifact.get("parts", [])]
    _copy(artifact, out, "name", "description", "metadata", "extensions")
    return out


def task_to_v03(task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "task",
        "id": task["id"],
        "contextId": task["contextId"],
        "status": _status_to_v03(task["status"]),
    }
    if task.get("artifacts"):
        out["artifacts"] = [_artifact_to_v03(a) for a in task["artifacts"]]
    if task.get("history") is not None:
        out["history"] = [message_to_v03(m) for m in task["history"]]
    _copy(task, out, "metadata")
    return out


def _final(state: str) -> bool:
    name = state.removeprefix(_STATE_PREFIX)
    return name in {
        "COMPLETED",
        "FAILED",
        "CANCELED",
        "REJECTED",
        "TRANSFERRED",
        "INPUT_REQUIRED",
        "AUTH_REQUIRED",
    }


def stream_item_to_v03(item: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 StreamResponse as the 0.3 event (the object itself, kind-tagged). A status
    event is `final` when the task ended or waits for input: where a 0.3 stream ended."""
    if "task" in item:
        return task_to_v03(item["task"])
    if "message" in item:
        return message_to_v03(item["message"])
    if "statusUpdate" in item:
        update = item["statusUpdate"]
        out: dict[str, Any] = {
            "kind": "status-update",
            "taskId": update["taskId"],
            "contextId": update["contextId"],
            "status": _status_to_v03(update["status"]),
            "final": _final(update["status"].get("state", "")),
        }
        _copy(update, out, "metadata")
        return out
    update = item["artifactUpdate"]
    out = {
        "kind": "artifact-update",
        "taskId": update["taskId"],
        "contextId": update["contextId"],
        "artifact": _artifact_to_v03(update["artifact"]),
    }
    _copy(update, out, "append", "lastChunk", "metadata")
    return out


def result_to_v03(result: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 result as the 0.3 one: a SendMessageResponse unwrapped, a Task kind-tagged."""
    if "task" in result or "message" in result or "statusUpdate" in result:
        return stream_item_to_v03(result)
    if "id" in result and "status" in result:
        return task_to_v03(result)
    return result


# -- the card ------------------------------------------------------------------------------


def _scheme_to_v03(scheme: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 security scheme (a oneof) as the 0.3 OpenAPI-style object."""
    if "apiKeySecurityScheme" in scheme:
        api = scheme["apiKeySecurityScheme"]
        out = {"type": "apiKey", "in": api.get("location", "header"), "name": api.get("name")}
    elif "httpAuthSecurityScheme" in scheme:
        http = scheme["httpAuthSecurityScheme"]
        out = {"type": "http", "scheme": str(http.get("scheme", "bearer")).lower()}
        _copy(http, out, "bearerFormat")
    elif "oauth2SecurityScheme" in scheme:
        out = {"type": "oauth2", **scheme["oauth2SecurityScheme"]}
    elif "openIdConnectSecurityScheme" in scheme:
        out = {"type": "openIdConnect", **scheme["openIdConnectSecurityScheme"]}
    else:
        out = {"type": "mutualTLS"}
    return out


def card_v03(card: dict[str, Any]) -> dict[str, Any]:
    """The 0.3 members of an agent card (`url`, `preferredTransport`, `protocolVersion`,
    `additionalInterfaces`, OpenAPI-style `securitySchemes` and `security`) for its 1.0
    ProtoJSON form, to be merged into it: 0.3 clients then find the JSON-RPC endpoint."""
    interfaces = card.get("supportedInterfaces") or []
    jsonrpc = [i for i in interfaces if i.get("protocolBinding") == "JSONRPC"]
    preferred = jsonrpc[0] if jsonrpc else interfaces[0]
    out: dict[str, Any] = {
        "url": preferred["url"],
        "preferredTransport": preferred.get("protocolBinding", "JSONRPC"),
        "protocolVersion": V03_PROTOCOL_VERSION,
        # 0.3 clients speak 0.3 JSON-RPC only here: the REST binding is served in 1.0.
        "additionalInterfaces": [{"url": i["url"], "transport": "JSONRPC"} for i in jsonrpc],
    }
    schemes = card.get("securitySchemes")
    if schemes:
        out["securitySchemes"] = {name: _scheme_to_v03(s) for name, s in schemes.items()}
        requirements = card.get("securityRequirements") or []
        out["security"] = [
            {name: (value or {}).get("list", []) for name, value in r.get("schemes", {}).items()}
            for r in requirements
        ]
    return out
