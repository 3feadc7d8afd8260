"""The differential tester's options: `--deep` (when pytest is started on tests/differential itself, where this
conftest is read before the command line) or the environment variable NNADAPTER_BRIDGE_DIFFERENTIAL_DEEP=<n>
(anywhere) adds n more seeds (--deep: 20) to the CI seed."""
from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--deep", action="store_true", default=False,
                     help="differential tester: run 20 more seeds besides the CI one (slow; Paddle's outputs are "
                          "cached per seed under the fixture cache)")
