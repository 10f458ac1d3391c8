"""Finalize a run: count it in shards, write its output and summary, judge it; the sweep and what it checks."""
