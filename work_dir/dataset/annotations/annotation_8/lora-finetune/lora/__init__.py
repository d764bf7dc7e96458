"""Low-rank adapters for torch models."""
