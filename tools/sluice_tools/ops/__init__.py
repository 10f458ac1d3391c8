"""Operating Sluice day to day: query a crawl's output, read its runs, their logs, and redrive dead letters.

Each command reads the local state folder (``--state``) or a deployed stage (``--stage``) through
the same adapters the pipeline writes with; ``sluice_tools.cli`` only parses arguments and prints.
"""
