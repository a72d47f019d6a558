"""Calling other agents: the client, its HTTP/1.1 transport, retries, breakers and replicas."""
