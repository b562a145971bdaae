"""Random and grid search: the default searcher."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.tune.search.searcher import Searcher
from tandem.tune.search.variant_generator import (
    Variant,
    _check_num_samples,
    iter_variants,
    merge_point,
    needs_rng,
    validate_param_space,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BasicVariantGenerator"]


class BasicVariantGenerator(Searcher):
    """Grid search and random sampling over ``param_space`` (Ray Tune's default searcher).

    It yields ``num_samples`` passes over the grid (every ``grid_search`` combination, with
    the other domains sampled afresh in each), then :attr:`Searcher.FINISHED`. Each of
    ``points_to_evaluate`` takes the place of one pass.

    Controller call order::

        searcher.set_search_properties(metric, mode, param_space)
        searcher.set_num_samples(tune_config.num_samples)   # returns True: it counts itself
        searcher.suggest(trial_id)  # -> config | None (max_concurrent reached) | FINISHED
        searcher.on_trial_complete(trial_id, result, error)

    :attr:`last_variant` holds the :class:`Variant` (with ``resolved_vars`` for the
    experiment tag) of the latest suggestion. Save/restore replays the seeded stream, so a
    restored generator continues where the saved one stopped.

    Args:
        points_to_evaluate: Partial configs to run first; keys must exist in the space.
        max_concurrent: At most this many suggested trials unfinished at once (0 = no cap).
        constant_grid_search: Sample the random values once per pass, before expanding
            the grid, so every grid point of a pass shares them (Ray's option).
        random_state: Seed (int), ``numpy.random.Generator`` / ``RandomState``, or None:
            NumPy's global generator, so ``np.random.seed(...)`` before building the
            generator makes the configs reproducible (Ray's FAQ).
    """

    def __init__(
        self,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        max_concurrent: int = 0,
        constant_grid_search: bool = False,
        random_state: int | np.random.Generator | np.random.RandomState | None = None,
    ) -> None:
        super().__init__()
        if (
            isinstance(max_concurrent, bool)
            or not isinstance(max_concurrent, int)
            or (max_concurrent < 0)
        ):
            raise ConfigError(
                f"BasicVariantGenerator(max_concurrent={max_concurrent!r}): must be an int >= 0 "
                "(0 means no limit)."
            )
        if points_to_evaluate is not None and (
            isinstance(points_to_evaluate, Mapping)
            or not all(isinstance(p, Mapping) for p in points_to_evaluate)
        ):
            raise ConfigError(
                "BasicVariantGenerator(points_to_evaluate=...): must be a list of dicts (partial "
                f"configs), got {points_to_evaluate!r}. Write e.g. [{{'lr': 0.01}}]."
            )
        if not isinstance(constant_grid_search, bool):
            raise ConfigError(
                f"BasicVariantGenerator(constant_grid_search={constant_grid_search!r}): must "
                "be True or False."
            )
        self._points = [dict(p) for p in points_to_evaluate or []]
        self._max_concurrent = max_concurrent
        self._constant_grid_search = constant_grid_search
        if random_state is None:  # NumPy's global generator: np.random.seed() fixes it
            # Drawn now if NumPy is loaded (the program may have seeded it); else nothing can
            # have seeded it yet, and the seed is drawn when a value is first sampled, so a
            # space of constants never loads NumPy.
            random_state = _global_seed() if "numpy" in sys.modules else None
        elif not isinstance(random_state, int):
            import numpy as np

            if isinstance(random_state, np.random.Generator):
                random_state = int(random_state.integers(0, 2**63 - 1))
            elif isinstance(random_state, np.random.RandomState):
                random_state = int(random_state.randint(0, 2**31 - 1))
        self._seed: int | None = random_state
        self._param_space: dict[str, Any] = {}
        self._num_samples = 1
        self._num_suggested = 0
        self._live: set[str] = set()
        self._finished = False
        self._iterator: Iterator[Variant] | None = None
        self.last_variant: Variant | None = None

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: object
    ) -> bool:
        super().set_search_properties(metric, mode, config)
        validate_param_space(config)
        self._param_space = dict(config or {})
        for point in self._points:
            merge_point(self._param_space, point)  # raises on keys missing from the space
        self._iterator = None
        return True

    def set_num_samples(self, num_samples: int) -> bool:
        _check_num_samples(num_samples)
        self._num_samples = num_samples
        self._iterator = None
        return True

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._finished:
            return Searcher.FINISHED
        if self._max_concurrent and len(self._live) >= self._max_concurrent:
            return None
        if self._iterator is None:
            self._iterator = self._make_iterator()
        variant = next(self._iterator, None)
        if variant is None:
            self._finished = True
            return Searcher.FINISHED
        self._num_suggested += 1
        self._live.add(trial_id)
        self.last_variant = variant
        return variant.config

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, object] | None = None, error: bool = False
    ) -> None:
        self._live.discard(trial_id)

    @property
    def total_samples(self) -> int | None:
        """How many configs this generator yields in all (None when num_samples is -1)."""
        from tandem.tune.search.variant_generator import count_variants

        if self._num_samples == -1:
            return None
        per_point = sum(count_variants(merge_point(self._param_space, p)) for p in self._points)
        passes = max(self._num_samples - len(self._points), 0)
        return per_point + passes * count_variants(self._param_space)

    def _make_iterator(self) -> Iterator[Variant]:
        if self._seed is None and needs_rng(self._param_space, self._points):
            self._seed = _global_seed()
        stream = iter_variants(
            self._param_space,
            self._num_samples,
            seed=self._seed,
            points_to_evaluate=self._points,
            constant_grid_search=getattr(self, "_constant_grid_search", False),
        )
        # Replay what was already suggested so a restored generator continues the stream.
        return itertools.islice(stream, self._num_suggested, None)

    def get_state(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_iterator"] = None  # generators cannot be pickled; rebuilt by replay
        return state


def _global_seed() -> int:
    """A seed drawn from NumPy's global generator (``np.random.seed(...)`` fixes it)."""
    import numpy as np

    return int(np.random.randint(0, 2**31 - 1))
