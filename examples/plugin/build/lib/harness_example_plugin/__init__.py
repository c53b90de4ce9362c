"""An example plugin of the prompt-persistence harness: a check type (`no_digits`), a policy
(`preface`) and an engine (`canned`), each registered by its module and found through the
entry points in pyproject.toml. docs/architecture.md, "Extending the harness", walks through
them."""
