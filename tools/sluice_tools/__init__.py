"""Developer tooling that never ships to Lambda: the sluice CLI, local runs, the demo site, the engine alone."""
