"""The intake: any bytes become an event or a refusal with a code from the table, and the
payload is parsed once (the plan validates the intake's document, it does not decode again)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cloudrunner.event import intake
from cloudrunner.event.stage_errors import Refusal
from cloudrunner.protocol import plan
from cloudrunner.protocol.events import event_spec
from cloudrunner.protocol.profiles import Profile
from cloudrunner.refusals import WORKER_REFUSALS, ErrorCode

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.binary(max_size=300) | _json.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_an_intake_or_a_refusal_with_a_worker_code(raw: bytes) -> None:
    try:
        read = intake.read(raw, None, cap=200, profile=Profile.CLOUD)
    except Refusal as exc:
        assert exc.code in WORKER_REFUSALS and exc.message
        assert "\n" not in exc.message  # one line
        return
    assert read.decoded.raw == raw and read.name


def test_an_oversized_payload_is_refused_before_it_is_read() -> None:
    with pytest.raises(Refusal) as caught:
        intake.read(b"{" * 500, "stop", cap=100, profile=Profile.CLOUD)
    assert caught.value.code is ErrorCode.PAYLOAD_TOO_LARGE and caught.value.event == "stop"


def test_the_plan_takes_the_intakes_document_without_decoding_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = json.dumps({"hook_event_name": "stop", "status": "completed"}).encode()
    read = intake.read(raw, None, cap=10_000, profile=Profile.CLOUD)

    def no_second_parse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the payload was decoded a second time")

    monkeypatch.setattr(plan.json, "loads", no_second_parse)
    model, given_to_hooks = plan.parse_payload(event_spec("stop"), read.decoded)
    assert given_to_hooks is raw  # hooks get the bytes as sent
    assert model.hook_event_name == "stop"
