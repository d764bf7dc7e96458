"""Loss functions of the detector (classification and box regression)."""
