"""gp_mapper: continual magnetic-field mapping with an online sparse Gaussian process."""

__version__ = "0.1.0"
