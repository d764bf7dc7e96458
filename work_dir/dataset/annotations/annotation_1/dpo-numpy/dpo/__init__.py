"""Direct Preference Optimization on a toy numpy language model."""
