"""The subgraph floor: a Paddle subgraph -> device programs.

Owns the support decisions and their store (support_decisions.py), the partition plan (plan.py: which ops form
which subgraph on which device), the engine that converts, compiles, caches and runs one subgraph per input-shape
signature (engine.py), the cache key (cache_key.py), mixed precision (mixed_precision.py) and the progress bars of
long conversions (progress.py). Imports converters, partition, hal-free runtime and the ground; never the
predictor or anything above it.
"""
