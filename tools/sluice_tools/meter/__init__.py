"""What the AWS calls of a run would cost and where DynamoDB would push back, measured against moto.

moto is exact about AWS's APIs but charges nothing and never refuses a write for contention.
:func:`observe_calls` sees every botocore call made in the process; :class:`AwsMeter` tallies
requests, DynamoDB request units, S3 bytes and SQS billed requests from what the calls carry;
:func:`price` turns a tally into dollars; :class:`DynamoContention` fails writes that would meet
a transaction on the same item and reports the hottest items. Developer tooling: never shipped.
"""

from sluice_tools.meter.aws_meter import AwsMeter
from sluice_tools.meter.calls import CallObserver, current_client, observe_calls
from sluice_tools.meter.contention import DynamoContention, ItemRate, WriteRates
from sluice_tools.meter.prices import US_EAST_1, Cost, PriceList, price
from sluice_tools.meter.tally import OperationTally, Tally

__all__ = [
    "US_EAST_1",
    "AwsMeter",
    "CallObserver",
    "Cost",
    "DynamoContention",
    "ItemRate",
    "OperationTally",
    "PriceList",
    "Tally",
    "WriteRates",
    "current_client",
    "observe_calls",
    "price",
]
