"""How long one API process trusts what it verified in the database: a token or session
(`auth`), and the row of a file it served (`served_files`). One number, so a revoked token
and a deleted job's files stop working within the same few seconds."""

from __future__ import annotations

VERIFIED_SECONDS = 5.0
VERIFIED_ENTRIES = 10_000  # per cache; the least recently used go first beyond it
