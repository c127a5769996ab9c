"""Readers and writers of the user's files: YAML/JSON configs (``files.py``), config sections with one
set of rules for unknown keys, types, ranges and NaN (``sections.py``), the one row reader for JSONL /
CSV / ``datasets`` rows whose errors name the file and line (``rows.py``), append-only journals that
survive a kill (``journal.py``), and local model references (``models.py``).

Imports nothing of the package above it (only ``util`` and other ``io`` modules).
"""
