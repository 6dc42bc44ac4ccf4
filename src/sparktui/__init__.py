"""sparktui: the night-shift console for a DGX Spark cluster."""

__version__ = "0.1.0"
