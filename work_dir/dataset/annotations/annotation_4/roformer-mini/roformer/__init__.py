"""A tiny RoFormer: a transformer encoder whose attention uses rotary position embeddings."""
