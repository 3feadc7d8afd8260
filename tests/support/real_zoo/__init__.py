"""The real-architecture model zoo for the tests: models built from the official model-zoo packages' own code.

catalog.py: the model list (plain data). build_model.py: the builder, run in the side venv (never imported by the
project's tests). env.py: the side venv and the cached exports. fixtures.py: the pytest fixtures.
"""
