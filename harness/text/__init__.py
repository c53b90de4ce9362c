"""Text the model reads and writes: chat templates, tokens, records and logged conversations."""
