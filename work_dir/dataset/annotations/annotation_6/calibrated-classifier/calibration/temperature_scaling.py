"""Post-hoc calibration of classifier logits (Guo et al., 2017, "On Calibration of
Modern Neural Networks").

Temperature scaling divides every logit vector by one scalar T > 0 fitted by
minimising the negative log-likelihood on held-out data; the argmax, and hence
accuracy, is unchanged. Calibration is measured with the Expected Calibration
Error over equal-width confidence bins.
"""
from __future__ import annotations

import numpy as np

DEFAULT_N_BINS = 15
TEMPERATURE_BOUNDS = (0.05, 20.0)
