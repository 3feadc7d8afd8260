"""The subgraph floor: a Paddle subgraph -> device programs.

Owns the support decisions and their store (support_decisions.py), the partition plan (plan.py: which ops form
which subgraph on which device), the engine that converts, compiles, caches and runs one subgraph per input-shape
signature (engine.py), the cache key (cache_key.py), mixed precision (mixed_precision.py) and the progress bars of
long conversions (progress.py).

Imports converters (only when a subgraph is converted or an op decided), partition, the loader and the ground;
never `hal` (drivers come through the runtime), the host executor beside it, the predictor or anything above. A
warm start imports this floor and must not load the converters or networkx (tests/e2e/test_startup_memory.py).
"""
