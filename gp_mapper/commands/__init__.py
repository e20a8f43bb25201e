"""Command-line programs built on the layers: replay, demo (and the CLI dispatcher in ``cli``)."""
