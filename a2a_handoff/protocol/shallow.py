"""`copied(model, update)`: pydantic's `model.model_copy(update=update)` on a wire model,
without its generic machinery (it goes through `copy.copy` three times and reads the config):
every request's path makes a few (a task's steps are copies of it).

A shallow copy of `__dict__` and the fields set is the whole of a wire model because wire
models keep no extra members (`extra="ignore"`) and no private attributes
(`test_shallow` holds every one of them to it).
"""

from __future__ import annotations

from typing import Any, TypeVar

from a2a_handoff.protocol.models import WireModel

M = TypeVar("M", bound=WireModel)

_new = object.__new__
_set = object.__setattr__


def copied(model: M, update: dict[str, Any]) -> M:
    """`model.model_copy(update=update)` (the values in `update` taken as they are)."""
    new = _new(type(model))
    fields = model.__dict__.copy()
    fields.update(update)
    _set(new, "__dict__", fields)
    marked = model.__pydantic_fields_set__.copy()
    marked.update(update)
    _set(new, "__pydantic_fields_set__", marked)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new
