"""The local runner: the real handlers against embedded AWS (moto), with state kept between runs."""
