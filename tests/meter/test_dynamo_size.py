"""Item sizes and request units by the rules of the DynamoDB Developer Guide (CapacityUnitCalculations.html,
read-write-operations.html), checked against sizes AWS itself reported."""

from __future__ import annotations

import pytest

from sluice.domain.cost import read_units, write_units
from sluice_tools.meter.dynamo_size import batch_read_units, item_size, number_size


def test_a_string_counts_the_utf8_bytes_of_its_name_and_value() -> None:
    assert item_size({"naïve": {"S": "日本"}}) == 6 + 6


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("2099", 3),  # 4 significant digits: 2 bytes, plus 1
        ("123", 3),
        ("0.000123", 3),  # leading zeros are trimmed
        ("1200", 2),  # so are trailing ones: "12"
        ("-7", 2),
        ("1" * 38, 20),  # the most a number holds
    ],
)
def test_a_number_costs_a_byte_per_two_significant_digits_plus_one(number: str, size: int) -> None:
    assert number_size(number) == size
    assert item_size({"n": {"N": number}}) == 1 + size


def test_a_binary_counts_its_raw_bytes_not_the_base64_sent() -> None:
    assert item_size({"b": {"B": b"\x00" * 10}}) == 1 + 10


def test_booleans_and_nulls_are_one_byte() -> None:
    assert item_size({"t": {"BOOL": False}, "z": {"NULL": True}}) == (1 + 1) + (1 + 1)


def test_lists_and_maps_cost_three_bytes_plus_one_per_element() -> None:
    assert item_size({"l": {"L": []}}) == 1 + 3
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}) == 1 + 3 + (1 + 2) + (1 + 2)
    # A map's keys count like attribute names.
    assert item_size({"m": {"M": {"key": {"S": "v"}}}}) == 1 + 3 + (1 + 3 + 1)


def test_sets_are_the_sum_of_their_elements() -> None:
    assert item_size({"s": {"SS": ["a", "bc"]}}) == 1 + 3
    assert item_size({"s": {"NS": ["1", "123"]}}) == 1 + 2 + 3
    assert item_size({"s": {"BS": [b"ab", b"c"]}}) == 1 + 3


def test_an_item_the_dynamodb_console_measured_at_1042_bytes() -> None:
    # Franck Pachot (dbi-services, "DynamoDB Scan pagination") wrote 5,000 of these items; the
    # console's item summary reported 5,209,783 bytes, 1,041.96 per item.
    item = {"MyKeyPart": {"N": "12"}, "MyKeySort": {"N": "1234"}, "MyUnstructuredData": {"S": "x" * 1000}}
    assert item_size(item) == 1041


def test_an_item_sized_by_the_ddbitemsizer_example() -> None:
    item = {
        "itemType": {"S": "SLOT"},
        "id": {"S": "abc1231"},
        "hostName": {"S": "Harry Mason"},
        "timeSlot": {"S": "February 23, 1999"},
        "slotStatus": {"S": "OPEN"},
        "createdAt": {"S": "February 1, 1999"},
        "updatedAt": {"S": "February 1, 1999"},
        "expiresAt": {"N": "2099"},
    }
    assert item_size(item) == 141


@pytest.mark.parametrize(("size", "units"), [(0, 1), (1024, 1), (1025, 2), (1536, 2), (3 * 1024, 3)])
def test_a_write_costs_a_unit_per_started_kilobyte(size: int, units: int) -> None:
    assert write_units(size) == units


def test_a_read_costs_a_unit_per_started_4_kb_and_half_when_eventually_consistent() -> None:
    # The guide's examples: a 3,500-byte read costs as 4 KB; an 8 KB item costs 2 strongly
    # consistent, 1 eventually consistent.
    assert read_units(3500, consistent=True) == 1
    assert read_units(3500, consistent=False) == 0.5
    assert read_units(8 * 1024, consistent=True) == 2
    assert read_units(8 * 1024, consistent=False) == 1
    assert read_units(10 * 1024, consistent=True) == 3  # rounded up to 12 KB


def test_a_batch_get_rounds_each_item_before_summing() -> None:
    # The guide's example: 1.5 KB and 6.5 KB count as 4 KB + 8 KB = 12 KB, not 8 KB.
    assert batch_read_units([1536, 6656], consistent=True) == 3


@pytest.mark.parametrize(("consistent", "units"), [(True, 1.0), (False, 0.5)])
def test_a_read_of_nothing_still_costs_the_minimum_unit(consistent: bool, units: float) -> None:
    # The Query API reference: a query that returns no results consumes the minimum read units of its
    # kind; a GetItem of a missing item likewise. The run's estimate and the meter share this rule.
    assert read_units(0, consistent=consistent) == units
