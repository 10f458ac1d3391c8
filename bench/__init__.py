"""`make bench`: Sluice against Scrapy and the httpx + BeautifulSoup recipe on the demo site.

Entry point: ``python -m bench.run`` (see run.py). Every client runs in its own fresh
subprocess pinned to core 0; the demo site runs in another, pinned to core 1.
"""
