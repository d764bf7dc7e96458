"""Small reference models used by the fine-tuning demo."""
