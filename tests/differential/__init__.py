"""The differential tester: random single-op Paddle programs, Paddle Inference as the truth, our predictor on
every device (cases.py generates, programs.py batches and caches, runner.py runs and judges)."""
