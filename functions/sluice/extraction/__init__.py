"""Extraction: a fetched page in, records and in-scope links out (selectolax's lexbor parser, no I/O)."""
