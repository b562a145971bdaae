"""Typed worker/driver frames: the wire tuples stay what they were; one encode and decode."""

from __future__ import annotations

import pytest

from tandem.train._internal.frames import (
    CallFrame,
    Connected,
    DoneFrame,
    ErrorFrame,
    ErrorInfo,
    NoticeFrame,
    ProcessExited,
    ReadyFrame,
    ReplyFrame,
    ReportsFrame,
    ResultFrame,
    StreamEnded,
    ValidateFrame,
    decode_driver_frame,
    decode_worker_frame,
    encode,
)

INFO = ErrorInfo("ValueError", "boom", "Traceback: ...", None)

# each frame with the exact tuple it travelled as before frames were typed
WORKER = [
    (ReportsFrame(1, [(3, 0.25, {"loss": 0.5}, "/ckpt")]),
     ("reports", 1, [(3, 0.25, {"loss": 0.5}, "/ckpt")])),
    (DoneFrame(0, b"x"), ("done", 0, b"x")),
    (ErrorFrame(2, INFO), ("error", 2, INFO)),
    (CallFrame(7, "tune_verdict", (3, 1)), ("call", 7, "tune_verdict", (3, 1))),
    (ReadyFrame(3), ("ready", 3)),
    (ResultFrame(5, False, INFO), ("result", 5, False, INFO)),
    (ValidateFrame(1, 7, True), ("validate", 1, (7, True))),
    (Connected(4242), ("__connected__", 4242)),
    (StreamEnded(), ("__eof__",)),
    (ProcessExited(-9), ("__exit__", -9)),
]
DRIVER = [
    (ReplyFrame(7, True, "continue"), ("reply", 7, True, "continue")),
    (NoticeFrame("job_event", (1, "reports", [{"a": 1}])),
     ("job_event", (1, "reports", [{"a": 1}]))),
    (NoticeFrame("stop", None), ("stop", None)),
]


def test_every_frame_travels_as_its_old_tuple_and_comes_back_equal():
    for frame, wire in WORKER:
        assert encode(frame) == wire
        assert decode_worker_frame(wire) == frame
    for frame, wire in DRIVER:
        assert encode(frame) == wire
        assert decode_driver_frame(wire) == frame


@pytest.mark.parametrize("raw, named", [
    (("reports", 1), "'reports'"),          # a field missing
    (("error", 0, "not an ErrorInfo"), "'error'"),
    (("reports", "0", []), "'reports'"),    # a field of the wrong type
    (("hello", "w1", 42), "'hello'"),       # a cluster frame, not a train worker's
    (b"junk", "bytes"),
])
def test_a_frame_of_the_wrong_shape_is_named_not_half_applied(raw, named):
    with pytest.raises(ValueError, match=f"not a worker frame: {named}"):
        decode_worker_frame(raw)


def test_a_driver_frame_of_the_wrong_shape_is_named():
    with pytest.raises(ValueError, match="not a driver frame: 'reply'"):
        decode_driver_frame(("reply", 1))
