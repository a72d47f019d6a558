"""Two of pydantic's calls on wire models, without their generic machinery: every request's
path makes a few of each (a task's steps are copies of it; its rows and answer, JSON).

- `copied(model, update)` is `model.model_copy(update=update)`: a shallow copy, `update` set
  and marked set. pydantic's goes through `copy.copy` three times and reads the config.
- `json_of(model)` is `model.dump_json()`: the serializer called directly, not through
  `model_dump_json`'s sixteen keyword arguments.
- `built(cls, **given)` is `cls(**given)` for values that are valid as they are (a model made
  of parts already validated, its oneof members given exactly one): nothing is validated again.

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


def built(cls: type[M], **given: Any) -> M:
    """`cls(**given)`, the values taken as they are: the defaults filled in, `given` marked set."""
    defaults = _DEFAULTS.get(cls)
    if defaults is None:
        defaults = _DEFAULTS[cls] = _defaults(cls)
    new = _new(cls)
    fields = defaults.copy()
    fields.update(given)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", set(given))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


_DEFAULTS: dict[type[WireModel], dict[str, Any]] = {}


def _defaults(cls: type[WireModel]) -> dict[str, Any]:
    """Each field's default (required ones absent): plain values only, shared by every copy."""
    defaults = {}
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            raise TypeError(f"{cls.__name__}.{name}: built() takes no default factory")
        if not info.is_required():
            if info.default not in (None, False, True) and not isinstance(info.default, str):
                raise TypeError(f"{cls.__name__}.{name}: built() takes immutable defaults")
            defaults[name] = info.default
    return defaults


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
