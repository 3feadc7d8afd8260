"""Test helpers shared by the suite (imported as `support.<module>`; tests/conftest.py puts tests/ on
sys.path): tolerances, the converter and operation harnesses, the model-zoo fixtures, sample programs,
and data files (support/data/) copied into the repo with their sources named."""
