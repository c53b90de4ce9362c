"""The run config and task suite schemas, and reading them from YAML."""
