"""Suites: one module per capability, each a function from a validated spec to a document.

A suite module defines a frozen dataclass ``Spec`` (everything the capability needs,
already parsed: sizes in bytes, rates in bit/s, times in seconds) and
``run(spec, progress=None) -> Document``.  It never parses options and never prints:
progress goes through the callback the CLI passes (or nothing), errors are the classes of
``beoperf.errors`` (or a library's own, which ``cli/errors.py`` maps).  Some capabilities
have several entry points (``tune``: plan, apply, rollback, procedure); each is a function
of that shape.
"""
