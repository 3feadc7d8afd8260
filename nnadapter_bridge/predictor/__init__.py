"""The predictor floor: Paddle Lite's predictor API.

Owns `Config` (config.py: what the user sets), the settings resolved from it once (settings.py: devices,
properties, cache, partition configs, environment), the `Predictor` and `create_predictor` (predictor.py: load,
partition, run the subgraphs and the host ops in order) and `Tensor` (tensor.py: a predictor's input/output
handle). Imports the subgraph machinery, the host executor and the ground below it; never `lite` or the
applications (cli, batch, conformance, validation, commands) above it. Users import these names from `nnadapter_bridge`.
"""
