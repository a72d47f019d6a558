"""The ids a caller sends (task, context, message, artifact, push config, page token).

An id holds no control character (NUL, a newline, DEL): no store, log line or header keeps
one as it was sent, so it is refused at the edge as a bad parameter (-32602, HTTP 400) —
checked by pydantic's own pattern matching, with no Python call per id.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

ID_PATTERN = r"^[^\x00-\x1f\x7f]*$"
ID_REFUSED = "an id must not hold control characters (such as NUL or a newline)"

Id = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
"""An id a caller sends: any string without control characters."""
