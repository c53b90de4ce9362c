"""One module per CLI subcommand. Top-level imports stay light (typer, stdlib, harness.errors):
a command imports the harness modules it runs inside its body, marked `# lazy: CLI start-up`,
so `harness --help` and typer's argument errors do not load pydantic, pandas or torch."""
