"""The adapter sets behind ``sluice.ports``: ``aws`` as deployed, ``local`` for ``sluice run`` on one machine."""
