"""The command plumbing shared by the command-line front ends (`cli`, `batch`).

Owns the error/warning channel and exit statuses (channel.py), option definitions and checks (options.py),
building a `Config` from command options (model_config.py) and what commands print (output.py). Imports the
predictor and below; never validation, cli, batch or conformance (they import it).
"""
