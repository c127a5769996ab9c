"""Plumbing every room may use: the sync facade over a private event loop (``loop.py``), lazy package
exports (``lazy.py``), batch deadlines, worker-thread settings and memory release, secret redaction,
the progress bar, and the one think-block rule (``think.py``).

Imports nothing of the package above it (only other ``util`` modules).
"""
