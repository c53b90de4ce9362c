"""One module per CLI subcommand. Top-level imports stay light (typer, stdlib): heavy libraries
load inside the command body, so `harness --help` is instant."""
