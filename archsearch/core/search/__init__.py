"""The search method's pieces (Discovering Neural Wirings): strategies, compaction, reports."""
