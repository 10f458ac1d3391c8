"""``sluice run --emulate-aws``: the real Lambda handlers on embedded AWS (moto), the event source played by threads."""
