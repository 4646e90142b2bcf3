"""beoperf: measure, explain, tune and watch the performance of Linux clusters."""

__version__ = "0.1.0"
