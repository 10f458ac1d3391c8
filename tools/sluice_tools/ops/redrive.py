"""`sluice redrive`: dead letters back to the frontier, once it is safe to say they can succeed.

Every body is read first and validated as a :class:`~sluice.messages.CrawlMessage`: a malformed
one can never succeed (it would come back after its receives), so the redrive is refused, naming
how many and why, unless told to purge those. On AWS the move is SQS's own move task (it keeps
each message's group); locally one transaction moves the rows. Safe to repeat: a redriven
message whose URLs were done already is counted once (the frontier's conditional writes), and a
second redrive finds nothing to move.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sluice.adapters.aws.clients import client
from sluice.adapters.local import LocalStore
from sluice.adapters.local.store import DB_NAME
from sluice.messages import CrawlMessage, MalformedMessage, parse_body
from sluice_tools.ops.history import NoSuchRun
from sluice_tools.ops.stage import Stage, aws_errors

PEEK_RECEIVES = 100
"""At most 1,000 dead letters are read before a move on AWS (ten a receive)."""
PEEK_VISIBILITY_S = 30
"""A read dead letter is hidden this long at most: released at once after the check, or it comes back by itself."""


@dataclass(frozen=True, slots=True)
class Malformed:
    message_id: str
    reason: str


@dataclass
class Redrive:
    """What a redrive found and did."""

    queue: str
    held: int
    """Messages the dead-letter queue held (SQS: ApproximateNumberOfMessages, before the move)."""
    checked: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    purged: int = 0
    moved: int | None = None
    """Exact locally; on AWS the move task moves them in the background (see ``task``)."""
    in_flight: int = 0
    """On AWS: letters someone is reading (received, not yet visible again); the move task takes them later."""
    dropped: int = 0
    """Locally: letters of runs already closed, deleted as a fetcher would acknowledge them."""
    task: dict[str, Any] | None = None
    """On AWS: the move task's handle, and its status as SQS lists it."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def reasons(self) -> str:
        counts = Counter(m.reason for m in self.malformed)
        return "; ".join(f"{reason} (x{n})" if n > 1 else reason for reason, n in counts.most_common(3))

    def text(self) -> str:
        if not self.held:
            if self.in_flight:
                return (
                    f"{self.queue}: {self.in_flight} message(s), all being read elsewhere (not visible): "
                    "redrive again once they are visible"
                )
            return f"{self.queue}: empty, nothing to redrive"
        reading = f" (and {self.in_flight} being read elsewhere, moved once visible)" if self.in_flight else ""
        lines = [f"{self.queue}: {self.held} message(s){reading}"]
        unread = ""
        if self.checked < self.held:
            unread = f" of {self.held} (a FIFO queue shows only the first messages of each group: the rest move unread)"
        lines.append(f"  checked  {self.checked}{unread}, {len(self.malformed)} malformed")
        if self.purged:
            lines.append(f"  purged   {self.purged} malformed: {self.reasons()}")
        if self.dropped:
            lines.append(
                f"  dropped  {self.dropped} of runs already closed: a closed run takes no more pages "
                "(its next run fetches them)"
            )
        if self.moved is not None:
            lines.append(f"  moved    {self.moved} back to the queue; `sluice run SPEC` resumes their run")
        if self.task is not None:
            status = self.task.get("Status", "started")
            done = self.task.get("ApproximateNumberOfMessagesMoved")
            progress = f", {done} moved so far" if done is not None else ""
            lines.append(f"  moving   to the frontier by SQS move task ({status}{progress}): {self.task['TaskHandle']}")
        return "\n".join(lines)


class MalformedDeadLetters(Exception):
    """Dead letters that can never succeed: the redrive is refused until they are read and purged."""

    def __init__(self, found: Redrive) -> None:
        self.found = found
        super().__init__(
            f"{len(found.malformed)} of {found.held} dead letter(s) in {found.queue} are malformed and would only "
            f"fail again: {found.reasons()}. Read them, then redrive with --purge-malformed to delete those first"
        )


def problem(body: str) -> str | None:
    """Why a body is no CrawlMessage (None: it is one)."""
    try:
        parse_body(CrawlMessage, body)
    except MalformedMessage as exc:
        return str(exc)
    return None


def redrive_local(state_dir: Path, *, purge_malformed: bool) -> Redrive:
    """The state folder's dead letters back in its queue, visible now and never received, in one transaction.

    Letters of a run that is no longer running are dropped instead: a local run receives only its
    own messages, and on AWS a fetcher acknowledges those without effect.
    """
    if not (state_dir / DB_NAME).is_file():
        raise NoSuchRun(f"no state in {state_dir}/: `sluice run` keeps it there (or pass --state)")
    store = LocalStore.open(state_dir)
    try:
        letters = store.queue.dead_letter_list()
        found = Redrive(f"dead letters in {state_dir}/", len(letters), checked=len(letters))
        move: list[str] = []
        drop: list[str] = []
        for letter in letters:
            reason = problem(letter.body)
            if reason is not None:
                found.malformed.append(Malformed(letter.message_id, reason))
                continue
            message = parse_body(CrawlMessage, letter.body)
            run = store.ledger.get_run(message.crawl, message.run_id)
            (move if run is not None and run.status == "running" else drop).append(letter.message_id)
        if found.malformed and not purge_malformed:
            raise MalformedDeadLetters(found)
        moved, removed = store.queue.redrive(move, [m.message_id for m in found.malformed] + drop)
        found.moved, found.dropped = moved, len(drop)
        found.purged = removed - len(drop)
        return found
    finally:
        store.close()


def redrive_stage(stage: Stage, *, purge_malformed: bool) -> Redrive:
    """Read and check the stage's dead letters, then start SQS's move task back to the frontier."""
    sqs = client("sqs")
    config = stage.config
    dlq = stage.queue_url(config.dlq_name)
    with aws_errors(stage.name, f"read {config.dlq_name}"):
        attributes = sqs.get_queue_attributes(
            QueueUrl=dlq,
            AttributeNames=["QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        found = Redrive(config.dlq_name, int(attributes["ApproximateNumberOfMessages"]))
        found.in_flight = int(attributes["ApproximateNumberOfMessagesNotVisible"])
        if not found.held:
            return found
        seen = _peek(sqs, dlq)
    found.checked = len(seen)
    bad = {m: reason for m, (_, body) in seen.items() if (reason := problem(body)) is not None}
    found.malformed = [Malformed(m, reason) for m, reason in bad.items()]
    with aws_errors(stage.name, f"redrive {config.dlq_name}"):
        if bad and not purge_malformed:
            _release(sqs, dlq, [receipt for receipt, _ in seen.values()])
            raise MalformedDeadLetters(found)
        for start in range(0, len(bad), 10):
            chunk = list(bad)[start : start + 10]
            sqs.delete_message_batch(
                QueueUrl=dlq, Entries=[{"Id": str(i), "ReceiptHandle": seen[m][0]} for i, m in enumerate(chunk)]
            )
        found.purged = len(bad)
        _release(sqs, dlq, [receipt for m, (receipt, _) in seen.items() if m not in bad])
        frontier = stage.queue_arn(stage.queue_url(config.queue_name))
        handle = sqs.start_message_move_task(SourceArn=attributes["QueueArn"], DestinationArn=frontier)["TaskHandle"]
        listed = sqs.list_message_move_tasks(SourceArn=attributes["QueueArn"], MaxResults=1).get("Results", [])
    found.task = {"TaskHandle": handle} | {
        k: v for k, v in (listed[0] if listed else {}).items() if k in ("Status", "ApproximateNumberOfMessagesMoved")
    }
    return found


def _peek(sqs: Any, queue_url: str) -> dict[str, tuple[str, str]]:
    """Receipt and body of each dead letter a receive gives, hidden a short while (FIFO: each group's head)."""
    seen: dict[str, tuple[str, str]] = {}
    for _ in range(PEEK_RECEIVES):
        batch = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=PEEK_VISIBILITY_S, WaitTimeSeconds=0
        ).get("Messages", [])
        if not batch:
            break
        seen |= {m["MessageId"]: (m["ReceiptHandle"], m["Body"]) for m in batch}
    return seen


def _release(sqs: Any, queue_url: str, receipts: list[str]) -> None:
    """Make read dead letters visible again at once (for the move task, or the next reader)."""
    for start in range(0, len(receipts), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": r, "VisibilityTimeout": 0}
                for i, r in enumerate(receipts[start : start + 10])
            ],
        )
