"""preemptlens: what preemption costs and buys on a shared GPU cluster."""

__version__ = "0.1.0"
