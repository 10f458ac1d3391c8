"""Lambda entry points: parse the event, call one pipeline step, shape the answer. Nothing else."""
