"""A client certificate's principal (`trust.certificates`): its one URI SAN, else its first
DNS SAN, else none — never its common name, never a guess between several URIs."""

from __future__ import annotations

from pathlib import Path

from a2a_handoff.trust.certificates import certificate_principal, san_principal
from tests.tls_support import TestCA

SPIFFE = "spiffe://example.org/agent/triage"


def test_the_uri_san_names_the_caller_else_the_first_dns_san() -> None:
    assert san_principal([SPIFFE], ["triage.example.org"]) == SPIFFE
    assert san_principal([], ["triage.example.org", "other.example.org"]) == "triage.example.org"
    assert san_principal([SPIFFE, "spiffe://example.org/agent/billing"], ["x.example"]) is None
    assert san_principal([], []) is None
    assert san_principal([""], []) is None


def test_a_certificate_is_read_for_its_sans(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    cases = {
        ca.issue("svid", uris=(SPIFFE,), dns=("triage.example.org",)): SPIFFE,
        ca.issue("dns", dns=("triage.example.org",)): "triage.example.org",
        ca.issue("two", uris=(SPIFFE, "spiffe://example.org/x")): None,
        ca.issue("ip-only"): None,  # an address names no caller; nor does the CN
        ca.issue("none", ips=()): None,  # no SAN extension at all
    }
    for issued, principal in cases.items():
        assert certificate_principal(issued.cert.read_text()) == principal, issued.cert.name
    assert certificate_principal("not a certificate") is None
    assert certificate_principal(ca.cert.read_text()) is None  # the CA itself: no SAN
