"""A caller's principal from the TLS client certificate it proved it holds (mutual TLS).

The principal is a subject alternative name (SAN) of the certificate, as written there:

- its URI SAN, when it has exactly one — a SPIFFE ID such as
  `spiffe://example.org/agent/triage` (an X.509-SVID carries exactly one);
- otherwise, when it has no URI SAN, its first DNS SAN (`triage.agents.example.org`);
- nothing else: a certificate with several URI SANs (whose identity would be a guess), or
  with neither kind (an IP address or a common name names no caller), has no principal.

Only a certificate the TLS handshake verified against the agent's client CAs reaches this
module (the server's context requires one); the subject's common name is never used.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from cryptography import x509


def san_principal(uris: Sequence[str], dns: Sequence[str]) -> str | None:
    """The principal named by a certificate's URI and DNS SANs, in their order (see the
    module docstring); None when they name none."""
    if len(uris) == 1:
        return uris[0] or None
    if uris:
        return None
    return dns[0] if dns and dns[0] else None


@functools.lru_cache(maxsize=1024)
def certificate_principal(pem: str) -> str | None:
    """The principal of a verified certificate, given as PEM; None when it names none (or is
    not a certificate). Kept per certificate: a connection's calls parse it once."""
    try:
        cert = x509.load_pem_x509_certificate(pem.encode("ascii"))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound, UnicodeEncodeError):
        return None
    uris = names.get_values_for_type(x509.UniformResourceIdentifier)
    dns = names.get_values_for_type(x509.DNSName)
    return san_principal(uris, dns)
