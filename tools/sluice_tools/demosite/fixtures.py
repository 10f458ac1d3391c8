"""Static bodies served by the /_test/ endpoints (windows-1252 page, broken HTML)."""

from __future__ import annotations

CP1252_TEXT = (
    "<!DOCTYPE html>\n<html><head>\n"
    '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">\n'
    "<title>Café €</title>\n</head><body>\n"
    '<article class="product_pod"><h3><a href="#" title="Café crème à 5 €">Café crème à 5 €</a>'
    '</h3>\n<p class="price_color">€12.50</p>\n'
    '<p class="description">It’s a naïve café – “quoted” text.</p></article>\n'
    "</body></html>\n"
)
CP1252 = CP1252_TEXT.encode("cp1252")

BROKEN_HTML = b"""<html><head><title>Broken page
<body>
<div class="page"><ol class="row">
<li><article class="product_pod"><h3><a href="unclosed-card_1/index.html" title="Unclosed Card">Unclosed Card</a></h3>
<div class="product_price"><p class="price_color">\xc2\xa310.00<p class="instock availability">In stock</div></article>
</div></div>
<li><article class="product_pod"><h3><a href="no-price_2/index.html" title="No Price">No Price</a></h3></article>
<li><article class="product_pod"><div class="product_price"><p class="price_color">\xc2\xa320.00</p></div></article>
<li><article class="product_pod"><h3><a title="No Href">No Href</a></h3><p class="price_color">\xc2\xa3thirty</p>
</ol><p>Unclosed paragraph <b>bold <i>both
</div>
</body>
"""
