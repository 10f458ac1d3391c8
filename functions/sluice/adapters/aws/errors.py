"""botocore's errors as the domain's store errors (:mod:`sluice.domain.errors`), by error code.

Every AWS adapter class is wrapped with :data:`aws_errors`, so no ``ClientError`` or ``BotoCoreError``
leaves a port. Conditions an adapter expects (a claim that loses, a lock already held) it handles itself
before that; what reaches the translation is a failure. S3's 403 for a key the role may not list is
sorted into missing or denied by ``objects.py`` first, since only a listing can tell.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from sluice.adapters.boundary import store_errors
from sluice.domain.errors import Conflict, Denied, Missing, StoreError, Throttled

_KINDS: dict[str, type[StoreError]] = {
    **dict.fromkeys(
        (
            "ConditionalCheckFailedException",
            "TransactionCanceledException",
            "TransactionConflictException",
            "TransactionInProgressException",
            "PreconditionFailed",
            "ConditionalRequestConflict",
            "OperationAborted",
        ),
        Conflict,
    ),
    **dict.fromkeys(
        (
            "ProvisionedThroughputExceededException",
            "ThrottlingException",
            "Throttling",
            "ThrottledException",
            "RequestThrottled",
            "RequestThrottledException",
            "RequestLimitExceeded",
            "SlowDown",
            "TooManyRequestsException",
            "LimitExceededException",
        ),
        Throttled,
    ),
    **dict.fromkeys(("NoSuchKey", "404", "NotFound", "NoSuchUpload"), Missing),
    **dict.fromkeys(
        (
            "AccessDenied",
            "AccessDeniedException",
            "403",
            "Forbidden",
            "KMSAccessDeniedException",
            "KMS.AccessDeniedException",
            "UnrecognizedClientException",
            "InvalidAccessKeyId",
            "ExpiredToken",
            "ExpiredTokenException",
            "InvalidClientTokenId",
        ),
        Denied,
    ),
}


def code(exc: ClientError) -> str:
    """The error code AWS answered with (``ConditionalCheckFailedException``, ``NoSuchKey``, ``403``...)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def translate(exc: BaseException, where: str) -> StoreError | None:
    """The store error a botocore error raised in ``where`` means; None for anything else (not the store's)."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        kind = _KINDS.get(code(exc), StoreError)
        why = f"{code(exc) or 'error'}: {error.get('Message') or 'no message'}"
        return kind(f"{where}: AWS refused {exc.operation_name}: {why}")
    if isinstance(exc, BotoCoreError):
        return StoreError(f"{where}: AWS did not answer: {type(exc).__name__}: {exc}")
    return None


def of_kind(exc: ClientError, kind: type[StoreError]) -> bool:
    """Whether AWS's error means ``kind`` (a ``404`` and a ``NoSuchKey`` are both :class:`Missing`)."""
    return issubclass(_KINDS.get(code(exc), StoreError), kind)


aws_errors = store_errors(translate)
"""Wrap an AWS adapter class: its public methods raise the domain's store errors, never botocore's."""
