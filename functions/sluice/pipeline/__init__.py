"""The pipeline's steps: start a run, visit its URLs, finalize it; called by handlers and the local runner."""
