"""flatscore: what quantization does to a tool-calling agent beyond the final score."""

__version__ = "0.1.0"
