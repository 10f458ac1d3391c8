"""A spec's secrets on this machine: read from the environment (``SLUICE_SECRET_<NAME>``) before anything starts.

``sluice run`` and ``sluice crawl`` refuse to start a crawl whose secrets are not all set,
naming each variable to export, rather than open a run whose every page would fail.
``sluice run --emulate-aws`` copies them into moto's Secrets Manager and SSM, where the real
handlers read them as they would deployed.
"""

from __future__ import annotations

from sluice.adapters.aws.clients import client
from sluice.adapters.local.secrets import EnvSecrets
from sluice.domain.secrets import SecretUnavailable, checked, is_ssm, ssm_parameter
from sluice.fetch.credentials import RequestCredentials
from sluice.pipeline.credentials import request_credentials
from sluice.spec import CrawlSpec


class MissingSecrets(Exception):
    """Secrets a spec names that this machine cannot give: every one named, with its variable."""

    def __init__(self, problems: list[SecretUnavailable]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


def local_credentials(spec: CrawlSpec, source: EnvSecrets | None = None) -> RequestCredentials | None:
    """The spec's request section, resolved from the environment (None if it has none).

    Raises :class:`MissingSecrets` naming every secret that is unset or unusable."""
    if not spec.request.configured:
        return None
    source = source or EnvSecrets()
    problems = []
    for name in spec.request.secret_names():
        try:
            checked(name, source.read(name))
        except SecretUnavailable as exc:
            problems.append(exc)
    if problems:
        raise MissingSecrets(problems)
    try:
        return request_credentials(spec, source)  # as the pipeline's fetchers resolve it, proxy pool included
    except SecretUnavailable as exc:
        raise MissingSecrets([exc]) from None


def copy_to_moto(spec: CrawlSpec, source: EnvSecrets | None = None) -> None:
    """Store each secret the spec names in moto, from the environment, where the deployed fetcher reads it."""
    local_credentials(spec, source)  # every one present and usable, or refused naming them all
    source = source or EnvSecrets()
    for name in spec.request.secret_names():
        if is_ssm(name):
            client("ssm").put_parameter(
                Name=ssm_parameter(name), Value=source.read(name), Type="SecureString", Overwrite=True
            )
        else:
            client("secretsmanager").create_secret(Name=name, SecretString=source.read(name))
