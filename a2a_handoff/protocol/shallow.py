"""Two of pydantic's calls on wire models, without their generic machinery: every request's
path makes a few of each (a task's steps are copies of it; its rows and answer, JSON).

- `copied(model, update)` is `model.model_copy(update=update)`: a shallow copy, `update` set
  and marked set. pydantic's goes through `copy.copy` three times and reads the config.
- `json_of(model)` is `model.dump_json()`: the serializer called directly, not through
  `model_dump_json`'s sixteen keyword arguments.

Wire models keep no extra members (`extra="ignore"`) and no private attributes: checked when
this module is imported, so that a model that would need more of pydantic's copy fails here.
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


def json_of(model: WireModel, exclude: set[str] | None = None) -> str:
    """`model.dump_json()` (camelCase, unset members left out), `exclude` left out too."""
    serializer = model.__pydantic_serializer__
    return serializer.to_json(model, exclude=exclude, exclude_none=True).decode()


def _plain(cls: type[WireModel]) -> bool:
    return cls.model_config.get("extra") == "ignore" and not cls.__private_attributes__


def _check(cls: type[WireModel]) -> None:
    for sub in cls.__subclasses__():
        if not _plain(sub):
            raise TypeError(f"{sub.__name__}: shallow.copied() copies no extra or private data")
        _check(sub)


_check(WireModel)
