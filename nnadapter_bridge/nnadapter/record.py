"""`plain_dataclass`: a dataclass made without generating code at import.

`dataclasses.dataclass` writes the source of `__init__`, `__repr__`, `__eq__` (and, frozen, `__setattr__`,
`__delattr__`, `__hash__`) and `exec`s it when the class is defined: about 0.6 ms a class, paid at every start
for every class a start imports (issue 31: some thirty of them, 20 ms of a warm start that takes 0.4 s).
`plain_dataclass` lets dataclasses process the fields only (init/repr/eq off: no code generated) and gives the class
generic methods written once here, with the same behaviour: positional and keyword arguments in field order,
defaults and default factories, `__post_init__`, the repr and the equality over the fields that take part in them,
frozen instances that refuse assignment and hash by their compared fields. `dataclasses.fields`, `replace`,
`asdict` and `is_dataclass` work on them as on any dataclass. Creating an instance costs about a microsecond
more than a generated `__init__`: for classes made a few times per start, not per operand or per run.

Must not import anything of the project (it is the ground's, used by every floor).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # type checkers see the classes as dataclasses (PEP 681); nothing is imported at run time
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs):
        return lambda function: function

_MISSING = dataclasses.MISSING


def _spec(cls) -> tuple:
    """(init fields as (name, default, factory), compared field names, repr field names), computed once."""
    spec = cls.__dict__.get("_record_spec")
    if spec is None:
        fields = dataclasses.fields(cls)
        spec = (tuple((f.name, f.default, f.default_factory) for f in fields if f.init),
                tuple(f.name for f in fields if f.compare), tuple(f.name for f in fields if f.repr))
        type.__setattr__(cls, "_record_spec", spec)
    return spec


def _init(self, *args, **kwargs) -> None:
    cls = type(self)
    init_fields = _spec(cls)[0]
    if len(args) > len(init_fields):
        raise TypeError(f"{cls.__name__}() takes {len(init_fields)} arguments, {len(args)} were given")
    assign = object.__setattr__
    for k, (name, default, factory) in enumerate(init_fields):
        if k < len(args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for argument '{name}'")
            value = args[k]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif default is not _MISSING:
            value = default
        elif factory is not _MISSING:
            value = factory()
        else:
            raise TypeError(f"{cls.__name__}() missing required argument: '{name}'")
        assign(self, name, value)
    if kwargs:
        raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{sorted(kwargs)[0]}'")
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _repr(self) -> str:
    names = _spec(type(self))[2]
    return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _spec(type(self))[1]
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _frozen_setattr(self, name, value):
    raise dataclasses.FrozenInstanceError(f"cannot assign to field '{name}'")


def _frozen_delattr(self, name):
    raise dataclasses.FrozenInstanceError(f"cannot delete field '{name}'")


def _hash(self) -> int:
    return hash(tuple(getattr(self, n) for n in _spec(type(self))[1]))


@dataclass_transform(eq_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def plain_dataclass(cls=None, *, frozen: bool = False, eq: bool = True, repr: bool = True):
    """`@plain_dataclass`, `@plain_dataclass(frozen=True)` or `@plain_dataclass(eq=False)`: the class as
    `dataclasses.dataclass` would make it with those flags (module docstring), without generating code."""

    def wrap(klass):
        # What the class body defines itself stays, as with dataclasses.
        own = set(klass.__dict__)
        explicit_hash = "__hash__" in own and klass.__dict__["__hash__"] is not None
        undocumented = not klass.__dict__.get("__doc__")
        if undocumented:  # else dataclasses asks inspect.signature(object.__init__), which compiles its text
            klass.__doc__ = klass.__name__
        klass = dataclasses.dataclass(klass, init=False, repr=False, eq=False)
        if undocumented:
            klass.__doc__ = f"{klass.__name__}({', '.join(f.name for f in dataclasses.fields(klass))})"
        if "__init__" not in own:
            klass.__init__ = _init
        if repr and "__repr__" not in own:
            klass.__repr__ = _repr
        if eq and "__eq__" not in own:
            klass.__eq__ = _eq
        if eq and not explicit_hash:
            # As dataclasses: eq without frozen makes instances unhashable; eq with frozen hashes the fields.
            klass.__hash__ = _hash if frozen else None
        if frozen:
            klass.__setattr__ = _frozen_setattr
            klass.__delattr__ = _frozen_delattr
        return klass

    return wrap if cls is None else wrap(cls)
