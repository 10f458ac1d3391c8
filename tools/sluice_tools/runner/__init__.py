"""``sluice run``: one crawl run on this machine, through the same pipeline steps the stack runs.

By default on the local store (``sluice.adapters.local``: SQLite and files, resumable); with
``--emulate-aws``, the real Lambda handlers on moto (``sluice_tools.emulate``).
"""
