"""Calibrate an over-confident synthetic classifier and report NLL / ECE before and after.

Usage: python evaluate.py [--sharpness 3.0] [--bins 15] [--seed 0]
"""
from __future__ import annotations

import argparse

import numpy as np

from calibration.reliability import reliability_table
from calibration.synthetic import sample_logits
from calibration.temperature_scaling import (
    TemperatureScaler,
    expected_calibration_error,
    negative_log_likelihood,
    softmax,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sharpness", type=float, default=3.0)
    parser.add_argument("--bins", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    val_logits, val_labels = sample_logits(2000, 10, args.sharpness, args.seed)
    test_logits, test_labels = sample_logits(2000, 10, args.sharpness, args.seed + 1)
    scaler = TemperatureScaler().fit(val_logits, val_labels)
    before = softmax(test_logits)
    after = scaler.predict_proba(test_logits)
    print(f"fitted temperature: {scaler.temperature_:.3f}")
    print(f"accuracy: {np.mean(before.argmax(1) == test_labels):.3f} (unchanged by scaling)")
    for name, probs, temperature in (("uncalibrated", before, 1.0), ("calibrated", after, scaler.temperature_)):
        nll = negative_log_likelihood(test_logits, test_labels, temperature)
        ece = expected_calibration_error(probs, test_labels, args.bins)
        print(f"{name:>12}: NLL {nll:.4f}  ECE {100 * ece:.2f}%")
    print(reliability_table(after, test_labels, args.bins))


if __name__ == "__main__":
    main()
