"""Adam with decoupled weight decay (AdamW) for parameters stored as numpy arrays.

Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019
(Algorithm 2), built on Adam (Kingma & Ba, ICLR 2015).
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-8
