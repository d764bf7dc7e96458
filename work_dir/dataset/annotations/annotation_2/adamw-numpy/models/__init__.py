"""Small numpy models exposing parameters as a dict of arrays and analytic gradients."""
