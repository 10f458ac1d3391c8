"""The pipeline's own vocabulary: runs, pages, outcomes, counts and verdicts, free of any AWS or SQLite type."""
