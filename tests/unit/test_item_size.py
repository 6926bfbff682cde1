"""DynamoDB item sizes as DynamoDB counts them, and which parts of a large item move to S3."""

from __future__ import annotations

from agent_core.store.item_size import ITEM_LIMIT_BYTES, item_size, value_size
from agent_core.store.spill import INLINE_ITEM_BYTES, SPILLED, plan_spill, spill_key


def test_strings_count_utf8_bytes_and_names_count_too() -> None:
    assert item_size({"a": "xyz"}) == 1 + 3
    assert item_size({"内容": "你好"}) == 6 + 6  # three bytes per CJK character, names included
    assert item_size({"n": 12345, "b": True, "z": None}) == (1 + 4) + (1 + 1)  # None is not written


def test_numbers_lists_and_maps() -> None:
    assert value_size(0) == 2 and value_size(99) == 2 and value_size(123456) == 4
    assert value_size(["ab", "c"]) == 3 + (1 + 2) + (1 + 1)
    assert value_size({"k": "v"}) == 3 + 1 + 1 + 1


def test_an_item_that_fits_is_left_alone() -> None:
    item = {"pk": "CHAT#c", "sk": "MSG#1", "content": "short"}
    assert plan_spill(item) == (item, {})


def test_70000_cjk_characters_are_measured_in_bytes_and_spilled() -> None:
    text = "你" * 70_000  # 70,000 characters, 210,000 bytes
    item = {"pk": "CHAT#c", "sk": "RUN#r", "snapshot": text, "result": text, "status": "completed"}
    assert item_size(item) > ITEM_LIMIT_BYTES  # two copies: the old RUN item failed exactly so
    fitted, objects = plan_spill(item)
    assert item_size(fitted) <= INLINE_ITEM_BYTES
    assert fitted[SPILLED] == ["snapshot"] and "snapshot" not in fitted and fitted["result"] == text
    assert objects == {spill_key("CHAT#c", "RUN#r", "snapshot"): text.encode()}
    assert spill_key("CHAT#c", "RUN#r", "snapshot") == "spill/CHAT/c/RUN/r/snapshot"


def test_keys_are_never_spilled() -> None:
    item = {"pk": "CHAT#c", "sk": "MSG#" + "k" * 1000, "gsi1pk": "x" * 2000, "content": "y" * 300_000}
    fitted, objects = plan_spill(item)
    assert set(fitted) == {"pk", "sk", "gsi1pk", SPILLED} and len(objects) == 1
