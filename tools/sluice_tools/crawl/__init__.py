"""``sluice crawl``: the engine alone (fetch, extract, follow) with an in-memory frontier and a JSON Lines sink."""
