"""Building blocks of the model (rotary embeddings, attention)."""
