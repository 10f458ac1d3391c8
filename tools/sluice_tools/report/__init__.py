"""`sluice report`: a crawl's last runs drawn in one self-contained HTML file (never shipped)."""
