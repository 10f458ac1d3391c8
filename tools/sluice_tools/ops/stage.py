"""A deployed stage, found from its name: the resources ``infra/config.py`` names, in the account and region
your AWS settings point at; AWS's refusals said in words a user can act on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError
from infra.config import DEFAULT, StackConfig

from sluice.adapters.aws.clients import client
from sluice.domain.errors import StoreError

_NOT_DEPLOYED = frozenset(
    {"ResourceNotFoundException", "NoSuchBucket", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
)


class StageUnreachable(Exception):
    """The stage cannot be read: no region, no credentials, not deployed, or AWS refused; the text says which."""


@contextmanager
def aws_errors(stage: str, doing: str) -> Iterator[None]:
    """Translate botocore's errors into :class:`StageUnreachable` naming what to set or deploy: raised by a
    client, or by an adapter as the domain's store error it translated them into (the original its cause)."""
    try:
        yield
    except StoreError as exc:
        if isinstance(exc.__cause__, ClientError | BotoCoreError):
            raise _unreachable(stage, doing, exc.__cause__) from exc
        raise StageUnreachable(f"could not {doing}: {exc}") from exc
    except (ClientError, BotoCoreError) as exc:
        raise _unreachable(stage, doing, exc) from exc


def _unreachable(stage: str, doing: str, exc: ClientError | BotoCoreError) -> StageUnreachable:
    if isinstance(exc, NoRegionError):
        return StageUnreachable(
            "no AWS region. Set AWS_DEFAULT_REGION (e.g. AWS_DEFAULT_REGION=eu-west-1) "
            "or AWS_PROFILE to a profile with a region, the one the stack was deployed to."
        )
    if isinstance(exc, NoCredentialsError):
        return StageUnreachable(
            "no AWS credentials. Set AWS_PROFILE (after `aws configure` or `aws sso login`) or "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the account the stack was deployed to."
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "error"), error.get("Message", str(exc))
        hint = (
            f" Is stage {stage!r} deployed in this account and region? (`make deploy STAGE={stage}`)"
            if code in _NOT_DEPLOYED
            else ""
        )
        return StageUnreachable(f"AWS refused to {doing}: {code}: {message}.{hint}")
    return StageUnreachable(f"cannot reach AWS: {exc}")


@dataclass(frozen=True)
class Stage:
    """One deployed stack's names: ``sluice-STAGE-*`` in the account and region of your AWS settings."""

    config: StackConfig

    @classmethod
    def named(cls, stage: str) -> Stage:
        return cls(dataclasses.replace(DEFAULT, stage=stage))

    @property
    def name(self) -> str:
        return self.config.stage

    @cached_property
    def account(self) -> str:
        with aws_errors(self.name, "say which account your credentials are for"):
            account: str = client("sts").get_caller_identity()["Account"]
        return account

    @cached_property
    def region(self) -> str:
        with aws_errors(self.name, "name a region"):
            region: str = client("sts").meta.region_name
        return region

    @property
    def bucket(self) -> str:
        return self.config.bucket_name(self.account, self.region)

    @property
    def log_groups(self) -> list[str]:
        """The three functions' log groups (infra/functions.py names them after the functions)."""
        return [f"/aws/lambda/{self.config.name(f)}" for f in ("scheduler", "fetcher", "finalizer")]

    def queue_url(self, name: str) -> str:
        with aws_errors(self.name, f"find queue {name}"):
            url: str = client("sqs").get_queue_url(QueueName=name)["QueueUrl"]
        return url

    def queue_arn(self, url: str) -> str:
        with aws_errors(self.name, "read a queue's attributes"):
            arn: str = client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
        return arn
