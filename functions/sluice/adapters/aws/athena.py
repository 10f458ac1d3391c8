"""Athena for the Parquet copy (:class:`sluice.pipeline.finalize.columnar.QueryEngine`): statements in the stack's
workgroup.

The workgroup's enforced configuration decides where results go and how they are encrypted, so a call
names only the workgroup and the database. botocore's errors stop here, as :class:`QueryRefused`.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from sluice.adapters.aws.clients import client
from sluice.pipeline.finalize.columnar import QueryRefused


class AthenaQueries:
    def __init__(self, workgroup: str, database: str) -> None:
        self.workgroup, self.database = workgroup, database

    def start(self, sql: str, token: str) -> str:
        try:
            answer = client("athena").start_query_execution(
                QueryString=sql,
                ClientRequestToken=token,
                QueryExecutionContext={"Database": self.database},
                WorkGroup=self.workgroup,
            )
        except (ClientError, BotoCoreError) as exc:
            raise QueryRefused(f"StartQueryExecution in workgroup {self.workgroup}: {_why(exc)}") from exc
        return str(answer["QueryExecutionId"])

    def state(self, query_id: str) -> tuple[str, str | None]:
        try:
            status = client("athena").get_query_execution(QueryExecutionId=query_id)["QueryExecution"]["Status"]
        except (ClientError, BotoCoreError) as exc:
            raise QueryRefused(f"GetQueryExecution {query_id}: {_why(exc)}") from exc
        return str(status["State"]), status.get("StateChangeReason")


def _why(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}"
    return f"{type(exc).__name__}: {exc}"
