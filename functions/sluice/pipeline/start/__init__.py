"""Start a run: its seeds planned (the spec's, a seed file, its sitemaps, its catalog run) and fanned into the queue."""
