"""Release objects and files: the layout, the noise model, writing and reading releases."""
