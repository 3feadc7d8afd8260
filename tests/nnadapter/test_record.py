"""nnadapter.record.plain_dataclass: a dataclass made without generating code behaves as dataclasses.dataclass's,
compared side by side on the same class bodies (construction, defaults, factories, __post_init__, repr, equality,
hashing, frozen assignment, dataclasses.replace / asdict / fields / is_dataclass, argument errors); and it execs
nothing."""
from __future__ import annotations

import builtins
import dataclasses

import pytest

from nnadapter_bridge.nnadapter.record import plain_dataclass as record


def body(decorator):
    @decorator
    class Point:
        x: int
        y: int = 2
        tags: list = dataclasses.field(default_factory=list)
        note: str = dataclasses.field(default="", compare=False, repr=False)

        def __post_init__(self):
            object.__setattr__(self, "seen", True)

    return Point


def frozen_body(decorator):
    @decorator
    class Key:
        a: int
        b: tuple = ()

    return Key


@pytest.mark.parametrize("args, kwargs", [((1,), {}), ((1, 3), {"tags": [4]}), ((), {"x": 5, "note": "n"}),
                                          ((1, 2, [3], "z"), {})])
def test_construction_repr_and_equality_match_dataclasses(args, kwargs):
    ours, theirs = body(record)(*args, **kwargs), body(dataclasses.dataclass)(*args, **kwargs)
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    assert repr(ours) == repr(theirs) and ours.seen and theirs.seen
    assert ours == body_of(ours)(*args, **kwargs)  # same class, same compared fields
    assert ours != body_of(ours)(99) and (ours == theirs) is False  # another class is never equal
    changed = dataclasses.replace(ours, y=7, note="other")
    assert (changed.x, changed.y, changed.note) == (ours.x, 7, "other")
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    assert dataclasses.is_dataclass(ours)
    with pytest.raises(TypeError, match="unhashable"):
        hash(ours)


def body_of(instance):
    return type(instance)


def test_the_note_field_does_not_take_part_in_equality():
    Point = body(record)
    assert Point(1, note="a") == Point(1, note="b")
    assert Point(1) != Point(1, tags=[1])
    assert Point(1).tags is not Point(1).tags  # a fresh default per instance


@pytest.mark.parametrize("args, kwargs, message", [((), {}, "missing required argument: 'x'"),
                                                   ((1,), {"x": 2}, "multiple values for argument 'x'"),
                                                   ((1,), {"z": 2}, "unexpected keyword argument 'z'"),
                                                   ((1, 2, [], "", 5), {}, "takes 4 arguments")])
def test_argument_errors_are_type_errors(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        body(record)(*args, **kwargs)
    with pytest.raises(TypeError):
        body(dataclasses.dataclass)(*args, **kwargs)


def test_frozen_records_refuse_assignment_and_hash_their_fields():
    Key, Theirs = frozen_body(record(frozen=True)), frozen_body(dataclasses.dataclass(frozen=True))
    key = Key(1, (2,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.a = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        del key.b
    assert hash(key) == hash(Key(1, (2,))) == hash(Theirs(1, (2,))) and {key: 1}[Key(1, (2,))] == 1
    assert dataclasses.replace(key, a=5) == Key(5, (2,))


def test_eq_false_compares_by_identity():
    Key = frozen_body(record(eq=False))
    one = Key(1)
    assert one != Key(1) and one == one and hash(one) == object.__hash__(one)


def test_defining_a_record_execs_and_compiles_no_code(monkeypatch):
    calls = []
    real_exec, real_compile = builtins.exec, builtins.compile
    monkeypatch.setattr(builtins, "exec", lambda *a, **k: calls.append(1) or real_exec(*a, **k))
    monkeypatch.setattr(builtins, "compile", lambda *a, **k: calls.append(2) or real_compile(*a, **k))
    body(record)
    frozen_body(record(frozen=True))  # no docstring: dataclasses would compile object.__init__'s signature text
    assert calls == []
    assert frozen_body(record).__doc__ == "Key(a, b)"
    body(dataclasses.dataclass)
    assert calls, "dataclasses.dataclass generates code: the test would not see a record doing it"
