"""Built-in demo site: a Books-to-Scrape-like catalogue and a link-heavy docs site on 127.0.0.1.

Catalogue paths: `/` and `/index.html` (301 to page 1), `/catalogue/page-{n}.html`,
`/catalogue/{slug}_{id}/index.html`, `/catalogue/category/{name}_{k}/index.html|page-{n}.html`,
`/private/...` (disallowed by `/robots.txt`), `/sitemap.xml`, `/media/...` (1x1 GIF), and the
sitemaps (sitemaps.py, named by robots.txt's `Sitemap:` lines): `/sitemap-index.xml`, its children
`/sitemaps/listings.xml` and `/sitemaps/books.xml.gz`, lastmod moving with the catalogue's versions.
Docs paths (docs.py): `/docs/index.html`, `/docs/{section}/index.html`, `/docs/{section}/{slug}.html`.
The catalogue behind credentials (access.py): `/members/catalogue/...` wants a token (header or
cookie, 403 without), `/staff/catalogue/...` HTTP basic auth (401 and a challenge without).
Test endpoints live under `/_test/` (testroutes.py), stats under `/_demo/stats|reset`.
"""

from .catalogue import Catalogue
from .cli import main
from .config import DemoSiteConfig
from .docs import DocsSite
from .faults import Fault
from .server import DemoSite
from .stats import DemoStats, RequestRecord
from .threaded import RunningDemoSite, running_demo_site

__all__ = [
    "Catalogue",
    "DemoSite",
    "DemoSiteConfig",
    "DemoStats",
    "DocsSite",
    "Fault",
    "RequestRecord",
    "RunningDemoSite",
    "main",
    "running_demo_site",
]
