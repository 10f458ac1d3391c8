"""Secrets from Secrets Manager and SSM Parameter Store: :class:`sluice.ports.SecretSource` when deployed.

``ssm:/path`` is a SecureString (or String) parameter, read with ``GetParameter`` and
``WithDecryption``; any other name is a Secrets Manager secret, read with ``GetSecretValue``
(its current version, as a string). The fetcher's role may read exactly the secrets the
deployed specs name (``infra/functions.py``). botocore logs every response body at DEBUG:
while a secret is read, that logger drops its records on the reading thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sluice.adapters.aws.clients import client
from sluice.domain.secrets import SecretUnavailable, is_ssm, ssm_parameter

_PERMANENT = {
    "ResourceNotFoundException": "no such secret in this account and region",
    "ParameterNotFound": "no such parameter in this account and region",
    "ParameterVersionNotFound": "no such parameter version",
    "AccessDeniedException": "access denied: the fetcher may read only the secrets a deployed spec names",
    "AccessDenied": "access denied: the fetcher may read only the secrets a deployed spec names",
    "DecryptionFailure": "cannot be decrypted with its KMS key",
    "InvalidKeyId": "cannot be decrypted with its KMS key",
    "KMSAccessDeniedException": "cannot be decrypted: the KMS key's policy does not let the fetcher use it",
    "InvalidRequestException": "is not readable (scheduled for deletion, or disabled)",
    "ValidationException": "is not a valid name",
}


class _Reading(threading.local):
    active = False


_reading = _Reading()


class _HideSecretResponses(logging.Filter):
    """Drops botocore's DEBUG lines (the response body among them) on a thread that is reading a secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _reading.active


_FILTER = _HideSecretResponses()


class AwsSecrets:
    """:class:`sluice.ports.SecretSource` on Secrets Manager (names) and SSM Parameter Store (``ssm:/path``)."""

    def __init__(self) -> None:
        for name in ("botocore.parsers", "botocore.endpoint", "botocore.hooks", "botocore.retryhandler"):
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)

    def read(self, name: str) -> str:
        _reading.active = True
        try:
            return self._ssm(name) if is_ssm(name) else self._secrets_manager(name)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _PERMANENT:
                raise SecretUnavailable(name, f"{_PERMANENT[code]} ({code})") from None
            raise SecretUnavailable(name, f"the store did not answer ({code or 'error'})", retryable=True) from None
        except BotoCoreError as exc:
            raise SecretUnavailable(name, f"the store did not answer ({type(exc).__name__})", retryable=True) from None
        finally:
            _reading.active = False

    def _secrets_manager(self, name: str) -> str:
        answer: dict[str, Any] = client("secretsmanager").get_secret_value(SecretId=name)
        value = answer.get("SecretString")
        if not isinstance(value, str):
            raise SecretUnavailable(name, "it is a binary secret: store the value as a string")
        return value

    def _ssm(self, name: str) -> str:
        answer: dict[str, Any] = client("ssm").get_parameter(Name=ssm_parameter(name), WithDecryption=True)
        value = answer.get("Parameter", {}).get("Value")
        if not isinstance(value, str):
            raise SecretUnavailable(name, "the parameter has no value")
        return value
