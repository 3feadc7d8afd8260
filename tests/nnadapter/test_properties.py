"""Context-properties parsing (facts §6.2): separators, trimming, malformed entries, env fallback."""
from __future__ import annotations

import pytest

from nnadapter_bridge.errors import NNAdapterError, PropertiesError
from nnadapter_bridge.nnadapter.codes import ResultCode
from nnadapter_bridge.nnadapter.properties import Properties, parse_bool, parse_properties


@pytest.mark.parametrize("text,expected", [
    ("", {}),
    (None, {}),
    ("A=1", {"A": "1"}),
    ("A=1;B=two;", {"A": "1", "B": "two"}),
    ("  A = 1 ;  B=  x y  ; ", {"A": "1", "B": "x y"}),
    ("A=1\nB=2\n", {"A": "1", "B": "2"}),
    ("A=1\r\nB=2\r\n", {"A": "1", "B": "2"}),
    ("A=1;\r\nB=2;\r\n\r\n", {"A": "1", "B": "2"}),
    ("A=1;;B=2", {"A": "1", "B": "2"}),
    ("A=1;A=3", {"A": "3"}),  # later duplicates override, as in Lite
    ("INTEL_OPENVINO_SELECT_DEVICE_NAMES=CPU,GPU;", {"INTEL_OPENVINO_SELECT_DEVICE_NAMES": "CPU,GPU"}),
])
def test_parse(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize("text,entry,problem", [
    ("A=1;JUSTAKEY;", "JUSTAKEY", "has no '='"),
    ("=5", "=5", "empty key"),
    ("  = 5 ;", "= 5", "empty key"),
    ("A=b=c", "A=b=c", "2 '=' signs"),
    ("A=", "A=", "empty value"),
])
def test_malformed_entries_quote_the_entry_and_the_syntax(text, entry, problem):
    with pytest.raises(PropertiesError) as info:
        parse_properties(text)
    message = str(info.value)
    assert f"'{entry}'" in message and problem in message
    assert "KEY=value;KEY=value;" in message
    assert isinstance(info.value, NNAdapterError) and info.value.code == ResultCode.INVALID_PARAMETER


def test_environment_fallback_per_key(monkeypatch):
    monkeypatch.setenv("TEST_PROPS_FROM_ENV", " 7 ")
    monkeypatch.setenv("TEST_PROPS_BOTH", "env")
    monkeypatch.delenv("TEST_PROPS_ABSENT", raising=False)
    props = Properties("TEST_PROPS_BOTH=props;")
    assert props.get("TEST_PROPS_BOTH") == "props"
    assert props.get("TEST_PROPS_FROM_ENV") == "7"
    assert props.get_int("TEST_PROPS_FROM_ENV") == 7
    assert props.get("TEST_PROPS_ABSENT") is None
    assert props.get("TEST_PROPS_ABSENT", "d") == "d"
    assert "TEST_PROPS_FROM_ENV" in props and "TEST_PROPS_ABSENT" not in props


def test_explicit_environment_mapping():
    props = Properties("", environ={"K": "v"})
    assert props.get("K") == "v"
    assert Properties("", environ={}).get("K") is None


@pytest.mark.parametrize("value,expected", [("true", True), ("TRUE", True), ("True", True), ("1", True),
                                            ("false", False), ("0", False), ("yes", False), ("2", False)])
def test_booleans(value, expected):
    assert parse_bool(value) is expected
    assert Properties(f"FLAG={value}", environ={}).get_bool("FLAG") is expected


def test_bool_default_and_int_errors():
    props = Properties("N=abc", environ={})
    assert props.get_bool("MISSING", True) is True
    assert props.get_int("MISSING", 3) == 3
    with pytest.raises(PropertiesError, match="N='abc' is not an integer"):
        props.get_int("N")


def test_list_values():
    props = Properties("NAMES= CPU , GPU ,", environ={})
    assert props.get_list("NAMES") == ["CPU", "GPU"]
    assert props.get_list("OTHER", ["x"]) == ["x"]
