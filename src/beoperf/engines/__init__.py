"""Transports behind one interface; importing this registers the built-in ones."""

from beoperf.engines import tcp  # noqa: F401  (registers "tcp")
from beoperf.engines.base import MODES, TRANSPORTS, Transport, register

__all__ = ["MODES", "TRANSPORTS", "Transport", "register"]
