"""The A2A 1.0 protobuf messages, built from the specification's `a2a.proto`.

They come from `a2a.binpb` beside this module — the descriptor set `scripts/protos` compiles
from `a2a.proto` (the specification's, unmodified, under its Apache-2.0 `LICENSE`) — loaded
into a descriptor pool of this module's own, not protobuf's default one. So no generated
Python is committed (generated code pins the protobuf runtime to the compiler's major and
minor version), and the classes never clash with another copy of `lf.a2a.v1` in the same
process: the official SDK's, or anyone's, lives in the default pool beside ours. The wire is
the same: a message's bytes do not depend on the pool it was built in.

The classes have no typed stubs: the server's face (`server._grpc.face`) and the client's
transport (`client.grpc_transport`) handle them as `Any`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import ServiceDescriptor

PACKAGE = "lf.a2a.v1"
SERVICE = f"{PACKAGE}.A2AService"
DESCRIPTORS = Path(__file__).resolve().parent / "a2a.binpb"


def _pool() -> descriptor_pool.DescriptorPool:
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTORS.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:  # dependencies first, as protoc writes them
        pool.AddSerializedFile(file.SerializeToString())
    return pool


POOL = _pool()


def message_class(full_name: str) -> Any:
    """The class of the message `full_name` (`lf.a2a.v1.Task`, `google.rpc.Status`)."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


def service() -> ServiceDescriptor:
    """`A2AService`: its methods, their request and response types, which stream."""
    return POOL.FindServiceByName(SERVICE)


Task = message_class(f"{PACKAGE}.Task")
Message = message_class(f"{PACKAGE}.Message")
StreamResponse = message_class(f"{PACKAGE}.StreamResponse")
SendMessageResponse = message_class(f"{PACKAGE}.SendMessageResponse")
ListTasksResponse = message_class(f"{PACKAGE}.ListTasksResponse")
AgentCard = message_class(f"{PACKAGE}.AgentCard")
TaskPushNotificationConfig = message_class(f"{PACKAGE}.TaskPushNotificationConfig")
ListTaskPushNotificationConfigsResponse = message_class(
    f"{PACKAGE}.ListTaskPushNotificationConfigsResponse"
)
Empty = message_class("google.protobuf.Empty")
Status = message_class("google.rpc.Status")
ErrorInfo = message_class("google.rpc.ErrorInfo")
BadRequest = message_class("google.rpc.BadRequest")
