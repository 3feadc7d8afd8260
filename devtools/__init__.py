"""Development tools, not part of the installed package: the random-weight model zoo the tests, demos and
benchmarks build (zoo.py, zoo_quant.py) and the generators of the loader's data tables
(regenerate_pir_signatures.py, regenerate_attr_types.py, regenerate_proto.sh). Needs paddlepaddle. The runtime
package never imports it (an import-linter contract checks it)."""
