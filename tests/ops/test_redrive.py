"""`sluice redrive`: dead letters checked, then moved back to the frontier; malformed ones refused or purged."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from infra.config import DEFAULT

from sluice.adapters.aws.clients import client
from sluice.adapters.local import LocalStore
from sluice.messages import UrlTask
from sluice.settings import Settings
from sluice_tools.emulate.move_tasks import MoveTasks
from sluice_tools.emulate.resources import dlq_url

from .conftest import Cli

CRAWL = "demo-books"
NOT_JSON = "not json"


def _dead_letter_everything(store: LocalStore) -> None:
    """Receive every queued message past its maximum receives, as failing fetchers would."""
    for _ in range(store.queue.max_receive_count + 1):
        store.queue.receive(None, 10, 0.0)


def _local_dead_letters(state: Path) -> tuple[str, str]:
    """Three dead letters: one of an open run, one of a finished run, one malformed; the two runs' ids."""
    store = LocalStore.open(state)
    try:
        ledger = store.ledger
        done = ledger.open_run(CRAWL, "d", timedelta(hours=1), trigger=None, catalog_run=None)
        ledger.finish(CRAWL, done.run_id, healthy=True, complete=True, records=0, summary_key="k")
        running = ledger.open_run(CRAWL, "d", timedelta(hours=1), trigger=None, catalog_run=None)
        store.queue.send(CRAWL, done.run_id, [UrlTask(url="http://127.0.0.1:9/done.html")])
        store.queue.send(CRAWL, running.run_id, [UrlTask(url="http://127.0.0.1:9/open.html")])
        store.queue.send_messages("", [("raw", NOT_JSON)])
        _dead_letter_everything(store)
        assert store.queue.depth(None).dead == 3
    finally:
        store.close()
    return running.run_id, done.run_id


def test_local_redrive_refuses_malformed_letters_then_purges_them_and_moves_the_rest(
    tmp_path: Path, sluice: Cli
) -> None:
    state = tmp_path / "state"
    running, _ = _local_dead_letters(state)

    code, out, err = sluice("redrive", "--state", str(state))
    assert (code, out) == (2, "")
    assert "refused: 1 of 3 dead letter(s)" in err
    assert "body is not JSON" in err
    assert "--purge-malformed" in err
    store = LocalStore.open(state)
    try:
        assert store.queue.depth(None).dead == 3  # refused: nothing changed

        result = sluice.json("redrive", "--state", str(state), "--purge-malformed", "--json")
        assert (result["held"], result["moved"], result["dropped"], result["purged"]) == (3, 1, 1, 1)
        depth = store.queue.depth(None)
        assert (depth.visible, depth.dead) == (1, 0)
        (received,) = store.queue.receive(running, 10, 60.0)
        assert received.receive_count == 1  # its receives start over
        assert json.loads(received.body)["tasks"][0]["url"].endswith("/open.html")
    finally:
        store.close()

    code, out, _ = sluice("redrive", "--state", str(state))
    assert code == 0
    assert out.strip().endswith("empty, nothing to redrive")


def test_local_redrive_keeps_each_letters_message_group(tmp_path: Path, sluice: Cli) -> None:
    """A group is a host: a redriven message must go back to its host's group, or two fetchers could share it."""
    store = LocalStore.open(tmp_path / "state")
    try:
        run = store.ledger.open_run(CRAWL, "d", timedelta(hours=1), trigger=None, catalog_run=None)
        store.queue.send(CRAWL, run.run_id, [UrlTask(url="http://a.test/1"), UrlTask(url="http://b.test/1")])
        with store.db.reading() as db:
            groups = sorted(g for (g,) in db.execute("SELECT grp FROM queue"))
        _dead_letter_everything(store)
        assert sluice("redrive", "--state", str(tmp_path / "state"))[0] == 0
        with store.db.reading() as db:
            assert sorted(g for (g,) in db.execute("SELECT grp FROM queue")) == groups
    finally:
        store.close()
    assert len(set(groups)) == 2


def _send_to_dlq(*messages: tuple[str, str]) -> None:
    client("sqs").send_message_batch(
        QueueUrl=dlq_url(DEFAULT),
        Entries=[
            {"Id": str(i), "MessageBody": body, "MessageGroupId": group, "MessageDeduplicationId": f"d{i}"}
            for i, (group, body) in enumerate(messages)
        ],
    )


def _depth(url: str) -> int:
    attributes = client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_stage_redrive_checks_every_letter_then_starts_sqs_move_task(aws: Settings, sluice: Cli) -> None:
    sqs = client("sqs")
    tasks = MoveTasks.install(sqs)
    good = json.dumps(
        {"v": 2, "crawl": CRAWL, "run_id": "20261201T000000Z-abcdef", "tasks": [{"url": "http://a.test/1"}]}
    )
    _send_to_dlq(("host-a", good), ("raw", NOT_JSON))

    code, out, err = sluice("redrive", "--stage")
    assert (code, out) == (2, "")
    assert "refused: 1 of 2 dead letter(s) in sluice-dev-frontier-dlq.fifo are malformed" in err
    assert tasks.tasks == []
    visible = sqs.get_queue_attributes(QueueUrl=dlq_url(DEFAULT), AttributeNames=["ApproximateNumberOfMessages"])
    assert visible["Attributes"]["ApproximateNumberOfMessages"] == "2"  # read, then made visible again at once

    result: dict[str, Any] = sluice.json("redrive", "--stage", "--purge-malformed", "--json")
    assert (result["held"], result["checked"], result["purged"]) == (2, 2, 1)
    assert result["task"] == {
        "TaskHandle": "moto-move-task-1",
        "Status": "COMPLETED",
        "ApproximateNumberOfMessagesMoved": 1,
    }
    (task,) = tasks.tasks
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url(DEFAULT), AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert (task["SourceArn"], task["DestinationArn"]) == (dlq_arn, queue_arn)
    assert _depth(dlq_url(DEFAULT)) == 0
    (moved,) = sqs.receive_message(
        QueueUrl=aws.queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    assert (moved["Body"], moved["Attributes"]["MessageGroupId"]) == (good, "host-a")

    code, out, _ = sluice("redrive", "--stage")
    assert code == 0
    assert out.strip() == "sluice-dev-frontier-dlq.fifo: empty, nothing to redrive"
    assert len(tasks.tasks) == 1


def test_stage_redrive_without_a_deployed_stage_names_it(aws: Settings, sluice: Cli) -> None:
    code, _, err = sluice("redrive", "--stage", "prod")
    assert code == 2
    assert "sluice-prod-frontier-dlq.fifo" in err
    assert "Is stage 'prod' deployed in this account and region?" in err
