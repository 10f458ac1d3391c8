"""The pipeline's steps: start a run (``start/``), visit its URLs (``visit/``), finalize it (``finalize/``).

Called by the handlers and the local runner; what the steps share (services, credentials, robots) is here.
"""
