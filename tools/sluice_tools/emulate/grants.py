"""Each function's IAM grants, from the synthesized template, enforced by moto.

moto checks no IAM unless asked to. Here each function's role policy is read from the stack's
template, its intrinsic functions resolved to the emulated resources' ARNs, and given to an IAM
user of its own; :func:`acting_as` then runs code with that user's keys while moto enforces every
call (``INITIAL_NO_AUTH_ACTION_COUNT`` 0). A call a function makes that its role does not allow
fails the way it would on AWS: AccessDenied.

moto matches a statement's resources for S3 and SQS (it knows the bucket, key and queue a call
names) but not for DynamoDB, Secrets Manager, SSM, Athena or Glue, where it checks the action only.
So DynamoDB statements go to moto with any resource, and :class:`ResourceCheck` checks each DynamoDB
call's tables against the role's own statements on the client side, with IAM's rules for batches
and transactions (each item's action on its table), and each Athena query start's workgroup (a role
granted one workgroup cannot start a query in another).
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from moto import settings as moto_settings
from moto.core.authorization import ActionAuthenticatorMixin

from sluice.adapters.aws.clients import client, reset
from sluice_tools.emulate.resources import ACCOUNT, REGION

_PSEUDO = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::URLSuffix": "amazonaws.com"}
_NO_VALUE = object()


@dataclass(frozen=True, slots=True)
class Keys:
    """An IAM user's access key: what a function's role gives it, as moto sees it."""

    function: str
    access_key_id: str
    secret_access_key: str


def physical_arns(resources: Mapping[str, Any], bucket: str) -> dict[str, str]:
    """Logical id -> the emulated resource's ARN, for what the functions' policies name."""
    arns: dict[str, str] = {}
    for logical, resource in resources.items():
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::DynamoDB::Table":
            arns[logical] = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{props['TableName']}"
        elif kind == "AWS::SQS::Queue":
            arns[logical] = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{props['QueueName']}"
        elif kind == "AWS::S3::Bucket":
            # The records bucket is the one the functions are told of; no function is granted another.
            arns[logical] = f"arn:aws:s3:::{bucket}" if "Records" in logical else f"arn:aws:s3:::{logical.lower()}"
        elif kind == "AWS::KMS::Key":
            arns[logical] = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{logical}"
        elif kind == "AWS::Lambda::Function":
            arns[logical] = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{props['FunctionName']}"
    return arns


def resolve(value: Any, arns: Mapping[str, str]) -> Any:
    """``value`` with Ref, Fn::GetAtt (Arn) and Fn::Join resolved; AWS::NoValue dropped from lists."""
    if isinstance(value, list):
        items = [resolve(v, arns) for v in value]
        return [v for v in items if v is not _NO_VALUE]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        name = value["Ref"]
        if name == "AWS::NoValue":
            return _NO_VALUE
        return _PSEUDO.get(name) or arns[name]
    if set(value) == {"Fn::GetAtt"}:
        logical, attribute = value["Fn::GetAtt"]
        if attribute != "Arn":
            raise ValueError(f"cannot resolve Fn::GetAtt {logical}.{attribute} in a policy")
        return arns[logical]
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(p) for p in resolve(parts, arns))
    return {k: resolve(v, arns) for k, v in value.items()}


def function_policies(resources: Mapping[str, Any], bucket: str) -> dict[str, dict[str, Any]]:
    """Function name (``sluice-dev-fetcher``) -> its role's inline policy document, resolved."""
    arns = physical_arns(resources, bucket)
    roles = {
        resource["Properties"]["Role"]["Fn::GetAtt"][0]: resource["Properties"]["FunctionName"]
        for resource in resources.values()
        if resource["Type"] == "AWS::Lambda::Function" and "FunctionName" in resource.get("Properties", {})
    }
    policies: dict[str, dict[str, Any]] = {name: {"Version": "2012-10-17", "Statement": []} for name in roles.values()}
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for role in resource["Properties"]["Roles"]:
            function = roles.get(role.get("Ref"))
            if function is not None:
                statements = resolve(resource["Properties"]["PolicyDocument"]["Statement"], arns)
                policies[function]["Statement"] += statements
    return policies


_SQS_BATCHES = {
    "sqs:SendMessage": "sqs:SendMessageBatch",
    "sqs:DeleteMessage": "sqs:DeleteMessageBatch",
    "sqs:ChangeMessageVisibility": "sqs:ChangeMessageVisibilityBatch",
}


def _for_moto(document: Mapping[str, Any]) -> dict[str, Any]:
    """The policy as moto can enforce it: DynamoDB statements on any resource (see the module doc)."""
    statements = []
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if all(a.startswith("dynamodb:") for a in actions):
            # moto authorizes a transaction as an action of its own, which IAM has not (it checks
            # each item's action, as ResourceCheck does): name it where the item actions are granted.
            if {"dynamodb:PutItem", "dynamodb:UpdateItem"} & set(actions):
                actions = [*actions, "dynamodb:TransactWriteItems"]
            if "dynamodb:GetItem" in actions:
                actions = [*actions, "dynamodb:TransactGetItems"]
            statement = {**statement, "Action": actions, "Resource": "*"}
        elif all(a.startswith(("secretsmanager:", "ssm:", "athena:", "glue:")) for a in actions):
            # moto checks these services' actions only (it authorizes them on '*'): the grant's ARNs
            # are checked against the ones the stores give in tests/infra/test_secrets_grant.py.
            statement = {**statement, "Resource": "*"}
        elif any(a in _SQS_BATCHES for a in actions):
            # SQS authorizes a batch call by its single action; moto by the batch's name.
            statement = {**statement, "Action": [*actions, *(_SQS_BATCHES[a] for a in actions if a in _SQS_BATCHES)]}
        statements.append(statement)
    return {**document, "Statement": statements}


def create_users(policies: Mapping[str, Mapping[str, Any]]) -> dict[str, Keys]:
    """One IAM user a function, with exactly its role's policy (call before enforcement starts)."""
    iam = client("iam")
    keys: dict[str, Keys] = {}
    for function, document in policies.items():
        iam.create_user(UserName=function)
        iam.put_user_policy(UserName=function, PolicyName="role", PolicyDocument=json.dumps(_for_moto(document)))
        key = iam.create_access_key(UserName=function)["AccessKey"]
        keys[function] = Keys(function, key["AccessKeyId"], key["SecretAccessKey"])
    return keys


@contextmanager
def enforced() -> Iterator[None]:
    """moto checks every call against the caller's IAM policy while this lasts."""
    before = (moto_settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count)
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = before


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def table_actions(operation: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(action, table)`` pairs IAM authorizes for one DynamoDB call."""
    if operation in ("TransactWriteItems", "TransactGetItems"):
        pairs = []
        for item in params.get("TransactItems", []):
            ((kind, body),) = item.items()
            pairs.append((f"dynamodb:{_TRANSACT_ACTIONS[kind]}", body["TableName"]))
        return pairs
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", table) for table in params.get("RequestItems", {})]
    return [(f"dynamodb:{operation}", params["TableName"])] if "TableName" in params else []


def workgroup_actions(operation: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(action, workgroup ARN)`` for an Athena call that names its workgroup (a start: Athena's default
    workgroup, ``primary``, when it names none)."""
    if operation != "StartQueryExecution":
        return []
    workgroup = params.get("WorkGroup", "primary")
    return [(f"athena:{operation}", f"arn:aws:athena:{REGION}:{ACCOUNT}:workgroup/{workgroup}")]


class ResourceCheck:
    """Each DynamoDB call's tables, and each Athena start's workgroup, checked against a role's statements (what
    moto does not match); what was refused, kept."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.statements: Sequence[Mapping[str, Any]] = document["Statement"]
        self.refused: list[str] = []

    def allows(self, action: str, arn: str) -> bool:
        for statement in self.statements:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if (
                statement["Effect"] == "Allow"
                and any(fnmatch.fnmatchcase(action, a) for a in actions)
                and any(fnmatch.fnmatchcase(arn, r) for r in resources)
            ):
                return True
        return False

    def before_parameter_build(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        for action, table in table_actions(model.name, params):
            if not self.allows(action, f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"):
                self.refused.append(f"{action} on table {table}")
                raise PermissionError(f"the role does not grant {action} on table {table}")

    def before_athena_call(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        for action, workgroup in workgroup_actions(model.name, params):
            if not self.allows(action, workgroup):
                self.refused.append(f"{action} on {workgroup}")
                raise PermissionError(f"the role does not grant {action} on {workgroup}")


@contextmanager
def acting_as(keys: Keys, checks: ResourceCheck | None = None) -> Iterator[None]:
    """Calls made inside use ``keys`` (clients are made anew, and again after: callers rebuild theirs)."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
    before = {name: os.environ.get(name) for name in names}
    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = keys.access_key_id, keys.secret_access_key
    os.environ.pop("AWS_SESSION_TOKEN", None)
    reset()
    if checks is not None:  # the cached clients every adapter will use, checked before each call
        client("dynamodb").meta.events.register("before-parameter-build.dynamodb", checks.before_parameter_build)
        client("athena").meta.events.register("before-parameter-build.athena", checks.before_athena_call)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset()
