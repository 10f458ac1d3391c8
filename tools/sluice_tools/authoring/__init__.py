"""Writing a spec against a live page: `sluice parse` and `sluice shell` (never shipped)."""
