"""Secrets by reference: Secrets Manager and SSM on moto, environment variables locally; errors name, never show."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from moto import mock_aws

from sluice.adapters.aws import clients
from sluice.adapters.aws.clients import client
from sluice.adapters.aws.secrets import AwsSecrets
from sluice.adapters.local.secrets import EnvSecrets
from sluice.domain.secrets import MAX_SECRET_BYTES, SecretUnavailable, checked
from sluice_tools.emulate.resources import fake_credentials

TOKEN = "test-token-not-a-secret"
PASSWORD = "test-password-not-a-secret"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsSecrets]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        fake_credentials()
        client("secretsmanager").create_secret(Name="sluice/demo/token", SecretString=TOKEN)
        client("ssm").put_parameter(Name="/sluice/demo/password", Value=PASSWORD, Type="SecureString")
        try:
            yield AwsSecrets()
        finally:
            clients.reset()


def test_a_secret_name_reads_secrets_manager(aws: AwsSecrets) -> None:
    assert aws.read("sluice/demo/token") == TOKEN


def test_an_ssm_reference_reads_a_decrypted_parameter(aws: AwsSecrets) -> None:
    assert aws.read("ssm:/sluice/demo/password") == PASSWORD


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("sluice/demo/nothing", "no such secret in this account and region (ResourceNotFoundException)"),
        ("ssm:/sluice/demo/nothing", "no such parameter in this account and region (ParameterNotFound)"),
    ],
)
def test_a_missing_secret_is_a_permanent_error_naming_it(aws: AwsSecrets, name: str, why: str) -> None:
    with pytest.raises(SecretUnavailable) as caught:
        aws.read(name)
    assert (caught.value.name, caught.value.why, caught.value.retryable) == (name, why, False)
    assert caught.value.__cause__ is None  # botocore's error is not chained: one short reason is logged
    assert caught.value.__suppress_context__


def test_a_binary_secret_is_refused(aws: AwsSecrets) -> None:
    client("secretsmanager").create_secret(Name="sluice/demo/binary", SecretBinary=b"\x00\x01")
    with pytest.raises(SecretUnavailable, match="it is a binary secret"):
        aws.read("sluice/demo/binary")


def test_botocore_never_logs_a_secrets_value_even_at_debug(aws: AwsSecrets) -> None:
    """botocore logs every response body at DEBUG: a secret's is dropped while it is read."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    before = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        assert aws.read("sluice/demo/token") == TOKEN
        assert aws.read("ssm:/sluice/demo/password") == PASSWORD
        client("sqs").list_queues()  # other calls still log as they did
    finally:
        root.removeHandler(handler)
        root.setLevel(before)
    text = stream.getvalue()
    assert "Response body" in text
    assert TOKEN not in text
    assert PASSWORD not in text


def test_locally_a_secret_is_its_environment_variable() -> None:
    secrets = EnvSecrets({"SLUICE_SECRET_SLUICE_DEMO_TOKEN": TOKEN})
    assert secrets.read("sluice/demo/token") == TOKEN
    assert secrets.read("ssm:/sluice/demo/token") == TOKEN  # the same variable either way
    with pytest.raises(SecretUnavailable) as caught:
        secrets.read("sluice/demo/password")
    assert str(caught.value) == (
        "secret 'sluice/demo/password' unavailable: the environment variable SLUICE_SECRET_SLUICE_DEMO_PASSWORD "
        "is not set (export it to run locally)"
    )


def test_a_value_is_bounded_and_masked() -> None:
    secret = checked("sluice/demo/token", TOKEN)
    assert secret.reveal() == TOKEN
    assert TOKEN not in repr(secret) + str(secret) + f"{secret}" + repr([secret])
    with pytest.raises(SecretUnavailable, match=f"more than the {MAX_SECRET_BYTES} a secret may have"):
        checked("sluice/demo/token", "x" * (MAX_SECRET_BYTES + 1))
    with pytest.raises(SecretUnavailable, match="its value is empty"):
        checked("sluice/demo/token", "")
