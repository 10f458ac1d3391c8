"""`make scale`: a night of the deployed stack simulated in seconds, checked against AWS's limits.

``quotas`` reads AWS's limits (one data file, each with its source), ``inputs`` the stack's settings
and the measured per-page figures, ``scenarios`` the nights to play, ``model`` plays one (a
discrete-event simulation), ``report`` prints and writes docs/scale.md. docs/scale.md says how.
"""
