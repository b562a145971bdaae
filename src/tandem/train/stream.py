"""A trial stream's worker side (``tandem.train._internal.stream``): one train job whose
worker runs one run after another, for a tuner's trials (``docs/warm_workers.md``)."""

from tandem.train._internal.stream import (  # noqa: F401 - their public path
    STREAM_AHEAD,
    STREAM_CHECKPOINT_KEY,
    STREAM_CHECKPOINT_ONLY,
    STREAM_NEXT,
    STREAM_RUN_KEY,
    RunStopped,
    RunStream,
    StreamAhead,
    StreamedRun,
    StreamOutcome,
    prepare_output,
    stream_error,
)
