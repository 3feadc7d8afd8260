"""The validation floor: checking our outputs against Paddle Inference, shared by the applications.

Owns the tolerances (tolerances.py), running Paddle Inference for reference outputs (paddle_reference.py) and the
input arrays a check feeds (inputs.py). Used by the CLI, batch, conformance and the demos; imports the command
plumbing, the predictor and below, never an application.
"""
