"""A minimal RetinaNet-style dense detector head and its training criterion in numpy."""
