"""The pipeline's stages over a RunStore: each caches its units and returns tidy results."""
