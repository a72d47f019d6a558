"""The A2A 1.0 protobuf messages, shared by both ends of the gRPC binding (the `grpc` extra):
`proto` (the messages, from the specification's `a2a.proto` kept here with its licence) and
`build` (its descriptor set compiled: `scripts/protos`). The server's gRPC face
(`server._grpc`) and the client's gRPC transport (`client.grpc_transport`) import them;
importing this package imports neither, nor protobuf.
"""
